package main

import (
	"fmt"
	"io"

	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/user"
)

const checkSynopsis = `[-r FILE | -i IFACE] [-e EXPR]... [EXPR]...

Validates each expression (syntax, classes, parameters, the graph, filters)
without running it and prints its canonical form: classes in lower case,
every argument as key=value, parameters at their default left out. A chain
without a source is checked as if fed by Ethernet frames unless -r or -i
says otherwise.`

func cmdCheck(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("check", checkSynopsis, stderr)
	var o runOptions
	o.register(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	exprs, src, err := o.requests(pos)
	if err != nil {
		return err
	}
	cfg, group, err := o.config(flowgraph.Config{})
	if err != nil {
		return err
	}
	rt := flowgraph.New(cfg)
	for _, e := range exprs {
		req, err := rt.Populate(e, flowgraph.RequestOptions{DefaultSource: src, Unfed: src == "", Group: group})
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, req.Canonical())
	}
	return nil
}

// simulates reports whether a flowspace of the hierarchy replays traffic
// for iface (a hierarchy file's test flowspace), so that it need not exist.
func simulates(root flowspaces.Flowspace, iface string) bool {
	found := false
	flowspaces.Walk(root, func(fs flowspaces.Flowspace) {
		if u, ok := fs.(*user.Flowspace); ok && u.Traffic(iface) != nil {
			found = true
		}
	})
	return found
}
