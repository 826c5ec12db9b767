//go:build nogrpc

package hierarchy

import (
	"gopkg.in/yaml.v3"

	"github.com/ffpf-go/ffpf/flowspaces"
)

// A build without gRPC (the build tag nogrpc: make build's bin/ffpf) has
// no p4 flowspace, whose controller speaks P4Runtime over gRPC: a file
// that describes one is refused with a NotBuiltError, and cmd/ffpf runs
// the command again with its build that has it.

// built refuses a file with a p4 flowspace as soon as it is read, before
// any flowspace is built (the kernel's and XDP's probe eBPF): the build
// that runs the command again builds them once.
func (p *parser) built(n *yaml.Node) error {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], deref(n.Content[i+1])
		switch {
		case k.Value == "kind" && v.Kind == yaml.ScalarNode && v.Value == string(flowspaces.KindP4):
			return &NotBuiltError{File: p.file, Line: k.Line, What: "a p4 flowspace"}
		case k.Value == "children" && v.Kind == yaml.SequenceNode:
			for _, c := range v.Content {
				if err := p.built(c); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (p *parser) p4Flowspace(_ flowspaces.Flowspace, s *spec, barrier string) (flowspaces.Flowspace, string, error) {
	return nil, barrier, &NotBuiltError{File: p.file, Line: s.line, What: "p4 flowspace " + s.label()}
}

func describeSwitch(flowspaces.Flowspace) (*Switch, []Interface, bool) { return nil, nil, false }
