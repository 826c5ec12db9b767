package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/hierarchy"
	"github.com/ffpf-go/ffpf/functions"
)

const placeSynopsis = `[--hierarchy FILE.yaml] [-r FILE | -i IFACE] [--plugins DIR] [--dot | --json] [-e EXPR]... [EXPR]...

Shows where each function would run, without running anything: the
flowspace tree with the functions placed in each, their path fields, why
each went where it did (FFPF's rules: the lowest flowspace that runs the
class, never below an input, at or above the inputs' lowest common
successor), the packet buffers their packets are in, and the bridges that
would carry packets up. 'ffpf run' uses the same plan.`

func cmdPlace(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("place", placeSynopsis, stderr)
	var o runOptions
	o.register(fs)
	dot := fs.Bool("dot", false, "print the plan as a Graphviz graph: one cluster per flowspace")
	asJSON := fs.Bool("json", false, "print the plan as one JSON object")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if *dot && *asJSON {
		return usageErrorf("--dot and --json exclude each other")
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
	plan := rt.Plan()
	switch {
	case *asJSON:
		switches, err := switchResources(rt)
		if err != nil {
			return err
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Hierarchy *hierarchy.Info `json:"hierarchy"`
			*flowgraph.Plan
			Switches any `json:"switches"`
		}{hierarchy.Describe(rt.Hierarchy()), plan, switches})
	case *dot:
		return writeDot(stdout, rt.Hierarchy(), plan)
	}
	if err := writePlan(stdout, rt.Hierarchy(), plan); err != nil {
		return err
	}
	return writeSwitches(stdout, rt)
}

// populate places the requests the flags and arguments give, without
// instantiating anything.
func (o *runOptions) populate(pos []string) (*flowgraph.Runtime, error) {
	exprs, src, err := o.requests(pos)
	if err != nil {
		return nil, err
	}
	cfg, group, err := o.config(flowgraph.Config{})
	if err != nil {
		return nil, err
	}
	rt := flowgraph.New(cfg)
	for _, e := range exprs {
		if _, err := rt.Populate(e, flowgraph.RequestOptions{DefaultSource: src, Unfed: src == "", Group: group}); err != nil {
			return nil, o.mafiaPlace(e, err)
		}
	}
	return rt, nil
}

// writePlan prints the flowspace tree with each function under the
// flowspace it runs in, then the bridges and PBufs.
func writePlan(w io.Writer, root flowspaces.Flowspace, p *flowgraph.Plan) error {
	by := map[string][]flowgraph.PlannedFunction{}
	for _, f := range p.Functions {
		by[f.Flowspace] = append(by[f.Flowspace], f)
	}
	var walk func(fs flowspaces.Flowspace, lead, branch, cont string)
	walk = func(fs flowspaces.Flowspace, lead, branch, cont string) {
		fmt.Fprintf(w, "%s%s%s  [%s, path %s%s]\n", lead, branch, fs.Name(), fs.Kind(), flowspaces.PathOf(fs), storage(fs))
		inner := lead + cont
		kids := fs.Children()
		bar := "    "
		if len(kids) > 0 {
			bar = "│   "
		}
		width := 0
		for _, f := range by[fs.Name()] {
			width = max(width, len(name(f)))
		}
		for _, f := range by[fs.Name()] {
			fmt.Fprintf(w, "%s%s%-*s  %s  %s\n", inner, bar, width, name(f), f.Path, f.Reason)
			pad := inner + bar + strings.Repeat(" ", width+2+len(f.Path)+2)
			for _, r := range f.PassedOver {
				fmt.Fprintf(w, "%snot in %s: %s\n", pad, r.Flowspace, r.Reason)
			}
			if len(f.Inputs) > 0 {
				fmt.Fprintf(w, "%sinputs %s; packets %s\n", pad, strings.Join(f.Inputs, ", "), strings.Join(f.PBufs, ", "))
			} else {
				fmt.Fprintf(w, "%spackets %s\n", pad, strings.Join(f.PBufs, ", "))
			}
			if f.Concurrency != "" {
				fmt.Fprintf(w, "%sworkers: %s\n", pad, placedWorkers(f))
			}
		}
		for i, s := range kids {
			if i == len(kids)-1 {
				walk(s.Child(), inner, "└── ", "    ")
			} else {
				walk(s.Child(), inner, "├── ", "│   ")
			}
		}
	}
	walk(root, "", "", "")
	if len(p.Bridges) > 0 {
		fmt.Fprintln(w, "\nbridges:")
		for _, b := range p.Bridges {
			fmt.Fprintf(w, "  %s > %s  (%s, %s)  carries %s\n", b.From, b.To, b.Barrier, b.Strategy, strings.Join(b.Carries, ", "))
		}
	}
	if len(p.PBufs) > 0 {
		fmt.Fprintln(w, "\npbufs:")
		for _, b := range p.PBufs {
			fmt.Fprintf(w, "  %s  in %s: %s\n", b.Name, b.Flowspace, b.Holds)
		}
	}
	return nil
}

// placedWorkers says how a function runs when several workers reach it.
func placedWorkers(f flowgraph.PlannedFunction) string {
	switch {
	case f.Concurrency == functions.Stateless.String():
		return "stateless: an instance per worker, no lock"
	case f.Concurrency == functions.Mergeable.String():
		return "mergeable: a shard of its state per worker, merged when read"
	case f.Ordered != "":
		return "ordered: one lock, because " + f.Ordered
	}
	return "ordered: one lock, as its class declares"
}

// name is a function's id, with its label if it has one.
func name(f flowgraph.PlannedFunction) string {
	if f.Label != "" {
		return f.ID + " (" + f.Label + ")"
	}
	return f.ID
}

func storage(fs flowspaces.Flowspace) string {
	if fs.Stores() {
		return ""
	}
	return ", in place"
}

// writeDot prints the plan as a Graphviz digraph: flowspaces are nested
// clusters, functions nodes, inputs edges; an edge that leaves a cluster
// crosses a bridge.
func writeDot(w io.Writer, root flowspaces.Flowspace, p *flowgraph.Plan) error {
	by := map[string][]flowgraph.PlannedFunction{}
	for _, f := range p.Functions {
		by[f.Flowspace] = append(by[f.Flowspace], f)
	}
	fmt.Fprintln(w, "digraph ffpf {\n  rankdir=BT;\n  node [shape=box, fontname=\"monospace\"];")
	n := 0
	var walk func(fs flowspaces.Flowspace, indent string)
	walk = func(fs flowspaces.Flowspace, indent string) {
		n++
		fmt.Fprintf(w, "%ssubgraph cluster_%d {\n%s  label=%s;\n", indent, n, indent,
			strconv.Quote(fmt.Sprintf("%s (%s) %s", fs.Name(), fs.Kind(), flowspaces.PathOf(fs))))
		for _, f := range by[fs.Name()] {
			fmt.Fprintf(w, "%s  %s [label=%s];\n", indent, strconv.Quote(f.ID), strconv.Quote(f.ID+"\n"+f.Class))
		}
		for _, s := range fs.Children() {
			walk(s.Child(), indent+"  ")
		}
		fmt.Fprintf(w, "%s}\n", indent)
	}
	walk(root, "  ")
	for _, f := range p.Functions {
		for _, in := range f.Inputs {
			fmt.Fprintf(w, "  %s -> %s;\n", strconv.Quote(in), strconv.Quote(f.ID))
		}
	}
	_, err := fmt.Fprintln(w, "}")
	return err
}

const hierarchySynopsis = `[--hierarchy FILE.yaml] [--json]

Prints the flowspace hierarchy functions are placed in: the one found on
this machine (userspace, the kernel's tc hook and one XDP flowspace per
interface, each where eBPF programs can really be loaded), or the one a
YAML file describes (see examples/hierarchy/).`

func cmdHierarchy(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("hierarchy", hierarchySynopsis, stderr)
	file := fs.String("hierarchy", "", "describe the hierarchy in `FILE.yaml` instead of this machine's")
	asJSON := fs.Bool("json", false, "print the hierarchy as one JSON object")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("unexpected argument %q; see 'ffpf hierarchy -h'", pos[0])
	}
	var root flowspaces.Flowspace
	var absent []string
	if *file != "" {
		if root, err = hierarchy.Load(*file, functions.Default); err != nil {
			return &exitError{2, err}
		}
	} else {
		root, absent = hierarchy.Discover(functions.Default)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			*hierarchy.Info
			Absent []string `json:"absent"`
		}{hierarchy.Describe(root), append([]string{}, absent...)})
	}
	if err := hierarchy.Format(stdout, root); err != nil {
		return err
	}
	for _, a := range absent {
		fmt.Fprintf(stdout, "absent: %s\n", a)
	}
	return nil
}
