//go:build nogrpc

package hierarchy

import "github.com/ffpf-go/ffpf/flowspaces"

// A build without gRPC (the build tag nogrpc: make build's bin/ffpf) has
// no p4 flowspace, whose controller speaks P4Runtime over gRPC: a file
// that describes one is refused with a NotBuiltError, and cmd/ffpf runs
// the command again with its build that has it.

func (p *parser) p4Flowspace(_ flowspaces.Flowspace, s *spec, barrier string) (flowspaces.Flowspace, string, error) {
	return nil, barrier, &NotBuiltError{File: p.file, Line: s.line, What: "p4 flowspace " + s.label()}
}

func describeSwitch(flowspaces.Flowspace) (*Switch, []Interface, bool) { return nil, nil, false }
