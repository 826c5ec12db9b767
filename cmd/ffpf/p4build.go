//go:build !nogrpc

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/p4"
	"github.com/ffpf-go/ffpf/functions/p4gen/p4info"
)

// switchShare is what a request places on one switch, built.
type switchShare struct {
	sw  *p4.Flowspace
	out *p4.Output
}

// switchShares builds, for each switch of the hierarchy that was given
// functions, their program: the outputs sent up are those a function
// placed elsewhere reads.
func switchShares(rt *flowgraph.Runtime) ([]switchShare, error) {
	plan := rt.Plan()
	var shares []switchShare
	var err error
	flowspaces.Walk(rt.Hierarchy(), func(fs flowspaces.Flowspace) {
		sw, ok := fs.(*p4.Flowspace)
		if !ok || err != nil {
			return
		}
		nodes := sw.Placed()
		if len(nodes) == 0 {
			return
		}
		var want []*flowspaces.Node
		for _, n := range nodes {
			for _, f := range plan.Functions {
				if f.Flowspace != sw.Name() && slices.Contains(f.Inputs, n.ID) && !slices.Contains(want, n) {
					want = append(want, n)
				}
			}
		}
		var a *p4.Assembly
		if a, err = sw.Build(nodes, want); err != nil {
			err = fmt.Errorf("switch %s: %w", sw.Name(), err)
			return
		}
		var out *p4.Output
		if out, err = a.Output(); err != nil {
			err = fmt.Errorf("switch %s: %w", sw.Name(), err)
			return
		}
		shares = append(shares, switchShare{sw, out})
	})
	return shares, err
}

func cmdP4Build(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("p4 build", p4BuildSynopsis, stderr)
	var o runOptions
	o.register(fs)
	dir := fs.String("o", "out", "write the files into `DIR`")
	asJSON := fs.Bool("json", false, "print the programs' files and resources as one JSON object")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if o.hierarchy == "" {
		return usageErrorf("p4 build needs --hierarchy: a file that describes a switch (see examples/hierarchy/tor.yaml)")
	}
	host, err := o.plugins.load(stderr)
	if err != nil {
		return err
	}
	defer host.Close()
	rt, err := o.populate(pos)
	if err != nil {
		return err
	}
	defer rt.Close()
	shares, err := switchShares(rt)
	if err != nil {
		return err
	}
	if len(shares) == 0 && o.iface == "" && o.file == "" {
		// Chains without a source run on the packets that enter the
		// switch: at its front-panel interface when it has one.
		ports := switchInterfaces(rt.Hierarchy())
		if len(ports) != 1 {
			return &exitError{2, fmt.Errorf("nothing runs on a switch: the expressions have no source, and a switch runs only functions of packets that enter at one of its interfaces: name one with -i (%s)", orList(ports))}
		}
		o.iface = ports[0] // the first runtime is closed by its defer
		if rt, err = o.populate(pos); err != nil {
			return err
		}
		defer rt.Close()
		if shares, err = switchShares(rt); err != nil {
			return err
		}
	}
	if len(shares) == 0 {
		return &exitError{2, fmt.Errorf("nothing runs on a switch: the hierarchy %s has none, or no function of the expressions could be placed on one (see 'ffpf place')", o.hierarchy)}
	}
	type built struct {
		Switch    string       `json:"switch"`
		Program   string       `json:"program"`
		P4Info    string       `json:"p4info"`
		Resources p4.Resources `json:"resources"`
		ResFile   string       `json:"resources_file"`
	}
	var all []built
	for _, s := range shares {
		d := *dir
		if len(shares) > 1 {
			d = filepath.Join(d, s.sw.Name())
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		info, err := p4info.Text(s.out.P4Info)
		if err != nil {
			return err
		}
		b := built{Switch: s.sw.Name(), Program: filepath.Join(d, "main.p4"), P4Info: filepath.Join(d, "p4info.txtpb"),
			Resources: s.out.Resources, ResFile: filepath.Join(d, "resources.txt")}
		for _, f := range []struct {
			path string
			data []byte
		}{{b.Program, s.out.Printed.Text}, {b.P4Info, info}, {b.ResFile, []byte(s.out.Resources.String())}} {
			if err := os.WriteFile(f.path, f.data, 0o644); err != nil {
				return err
			}
		}
		all = append(all, b)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Switches []built `json:"switches"`
		}{all})
	}
	for _, b := range all {
		fmt.Fprintf(stdout, "%s, %s, %s\n%s", b.Program, b.P4Info, b.ResFile, b.Resources)
	}
	return nil
}

// writeSwitches prints, after a plan, each switch's resource report.
func writeSwitches(w io.Writer, rt *flowgraph.Runtime) error {
	shares, err := switchShares(rt)
	if err != nil {
		return err
	}
	for _, s := range shares {
		fmt.Fprintf(w, "\nswitch %s resources:\n%s", s.sw.Name(), s.out.Resources)
	}
	return nil
}

// switchResources returns the switches' resource reports, for place --json.
func switchResources(rt *flowgraph.Runtime) ([]p4.Resources, error) {
	shares, err := switchShares(rt)
	out := []p4.Resources{}
	for _, s := range shares {
		out = append(out, s.out.Resources)
	}
	return out, err
}

// switchInterfaces returns the front-panel interfaces of the switches
// in the hierarchy under root (each switch's sorted).
func switchInterfaces(root flowspaces.Flowspace) []string {
	var out []string
	flowspaces.Walk(root, func(fs flowspaces.Flowspace) {
		if sw, ok := fs.(*p4.Flowspace); ok {
			out = append(out, sw.Interfaces()...)
		}
	})
	return out
}

// orList writes names as "-i a, -i b or -i c", or says there are none.
func orList(names []string) string {
	if len(names) == 0 {
		return "the hierarchy declares no switch interface"
	}
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = "-i " + n
	}
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// isSwitchPort reports whether fs is a switch and iface one of its
// front-panel ports.
func isSwitchPort(fs flowspaces.Flowspace, iface string) bool {
	sw, ok := fs.(*p4.Flowspace)
	return ok && sw.Entry(iface) == flowspaces.OwnEntry
}
