package main

import (
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/user"
	"github.com/ffpf-go/ffpf/functions"
)

const checkSynopsis = `[-r FILE | -i IFACE] [--plugins DIR] [-e EXPR]... [EXPR]...

Validates each expression (syntax, classes, parameters, the graph, filters)
without running it and prints its canonical form: classes in lower case,
every argument as key=value, parameters at their default left out. An
input file that cannot be opened fails check as it fails run (exit
status 1). A chain
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
	host, err := o.plugins.load(stderr)
	if err != nil {
		return err
	}
	defer host.Close()
	cfg, group, err := o.config(flowgraph.Config{})
	if err != nil {
		return err
	}
	rt := flowgraph.New(cfg)
	var canon []string
	for _, e := range exprs {
		req, err := rt.Populate(e, flowgraph.RequestOptions{DefaultSource: src, Unfed: src == "", Group: group})
		if err != nil {
			return o.mafiaPlace(e, err)
		}
		canon = append(canon, req.Canonical())
	}
	if err := readable(rt); err != nil {
		return err
	}
	for _, c := range canon {
		fmt.Fprintln(stdout, c)
	}
	return nil
}

// readable returns, as run would report it (exit status 1), the first
// error opening a file that a function of rt reads: a request that names
// an input it cannot read passes check no more than it runs.
func readable(rt *flowgraph.Runtime) error {
	for _, f := range rt.Functions() {
		c, ok := functions.Default.Lookup(f.Class)
		if !ok {
			continue
		}
		for _, par := range c.Params {
			path, _ := f.Params[par.Name].(string)
			if par.File != functions.FileRead || path == "" || path == "-" {
				continue
			}
			// Without blocking: a FIFO with no writer yet is readable. (A
			// directory or a device was refused when the request was
			// populated.)
			fd, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
			if err != nil {
				return fmt.Errorf("%s: cannot open %s: %v", f.ID, path, functions.PathReason(err))
			}
			fd.Close()
		}
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
		if isSwitchPort(fs, iface) {
			found = true // a switch's front-panel port
		}
	})
	return found
}
