package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/ffpf-go/ffpf/flowgraph/daemon/client"
	"github.com/ffpf-go/ffpf/functions"
)

const classesSynopsis = `[--plugins DIR] [--plugin-sums FILE] [--json]

Lists the function classes: what each does, its parameters (type, default,
unit), the flowspaces it can run in, how one function runs when several
workers reach it (ordered: one lock; stateless: an instance per worker;
mergeable: a shard of its state per worker, merged when read), and the
state a function keeps (the fields 'run --json' shows: type, unit, and how
the copies of per-CPU maps or of workers' shards merge). The first
parameter may be given without its key: (bpf,"tcp") is (bpf,expr="tcp").`

type classDoc struct {
	Name      string   `json:"name"`
	Summary   string   `json:"summary"`
	Source    bool     `json:"source"`
	MinInputs int      `json:"min_inputs"`
	MaxInputs int      `json:"max_inputs"`
	Targets   []string `json:"targets"`
	// Plugin is the binary that serves the class out of process, if one
	// does (--plugins).
	Plugin string         `json:"plugin,omitempty"`
	Params []client.Param `json:"params"`
	State  *stateDoc      `json:"state,omitempty"` // absent for a class without state
	// Concurrency is how one function runs on several workers (absent for
	// a source): ordered, stateless or mergeable; OrderedWhen the
	// settings under which it runs ordered all the same.
	Concurrency string        `json:"concurrency,omitempty"`
	OrderedWhen []orderingDoc `json:"ordered_when,omitempty"`
}

type orderingDoc struct {
	When string `json:"when"`
	Why  string `json:"why"`
}

type stateDoc struct {
	ByteOrder string          `json:"byte_order"` // native, big-endian, little-endian
	Fields    []stateFieldDoc `json:"fields"`
}

type stateFieldDoc struct {
	Name     string   `json:"name"`
	Type     string   `json:"type"`             // of one value: u8, u32, u64, i64, f64
	Len      int      `json:"len,omitempty"`    // an array of this many values
	LenOf    string   `json:"len_of,omitempty"` // an array as long as this, from the parameters
	Parity   bool     `json:"parity,omitempty"` // kept twice, one copy per epoch parity
	Unit     string   `json:"unit,omitempty"`
	Merge    string   `json:"merge"`             // sum, max, or, shared
	Targets  []string `json:"targets,omitempty"` // only in these flowspaces
	Summary  string   `json:"summary"`
	typeName string
}

func describeClasses(reg *functions.Registry) []classDoc {
	var docs []classDoc
	for _, c := range reg.All() {
		d := classDoc{Name: c.Name, Summary: c.Summary, Source: c.IsSource(),
			MinInputs: c.MinInputs, MaxInputs: c.MaxInputs}
		for _, t := range c.Targets {
			d.Targets = append(d.Targets, string(t))
		}
		if !c.IsSource() {
			d.Concurrency = c.Concurrency.String()
			for _, o := range c.OrderedWhen {
				d.OrderedWhen = append(d.OrderedWhen, orderingDoc{o.When, o.Why})
			}
			// What flowspaces.Node.Concurrency adds for every class.
			if c.Concurrency != functions.Ordered && c.Reads != nil {
				d.OrderedWhen = append(d.OrderedWhen, orderingDoc{"named state read", "it reads another function's state as that function left it after each packet"})
			}
			if c.Concurrency == functions.Mergeable && c.Readable != nil {
				d.OrderedWhen = append(d.OrderedWhen, orderingDoc{"its state read by label", "the reader needs the one state as it is after each packet"})
			}
		}
		d.Params = []client.Param{} // as the daemon's classes list them
		for _, p := range c.Params {
			d.Params = append(d.Params, client.Param{Name: p.Name, Type: p.Type.String(), Default: p.Default,
				Required: p.Required, Unit: p.Unit, Summary: p.Summary, Enum: p.Enum})
		}
		if st := c.State; st != nil {
			d.State = &stateDoc{ByteOrder: st.OrderName()}
			for i := range st.Fields {
				f := &st.Fields[i]
				fd := stateFieldDoc{Name: f.Name, Type: f.Type.String(), Len: f.Len, LenOf: f.LenDoc,
					Parity: f.Parity, Unit: f.Unit, Merge: f.Merge.String(), Summary: f.Summary, typeName: f.TypeName()}
				for _, t := range f.Targets {
					fd.Targets = append(fd.Targets, string(t))
				}
				d.State.Fields = append(d.State.Fields, fd)
			}
		}
		docs = append(docs, d)
	}
	return docs
}

func cmdClasses(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("classes", classesSynopsis, stderr)
	asJSON := fs.Bool("json", false, "print the classes as JSON")
	var plugins pluginOptions
	plugins.register(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("classes takes no arguments")
	}
	host, err := plugins.load(stderr)
	if err != nil {
		return err
	}
	defer host.Close()
	docs := describeClasses(functions.Default)
	for i := range docs {
		docs[i].Plugin = host.Plugin(docs[i].Name)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(docs)
	}
	return printClasses(stdout, docs)
}

// printClasses prints the classes as text, aligned in columns.
func printClasses(w io.Writer, docs []classDoc) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, d := range docs {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		inputs := "source"
		if !d.Source {
			max := "any"
			if d.MaxInputs >= 0 {
				max = fmt.Sprint(d.MaxInputs)
			}
			inputs = fmt.Sprintf("inputs %d..%s", d.MinInputs, max)
		}
		fmt.Fprintf(tw, "%s\t%s\n", d.Name, d.Summary)
		if d.Plugin != "" {
			fmt.Fprintf(tw, "\tplugin %s, out of process\n", d.Plugin)
		}
		fmt.Fprintf(tw, "\t%s; targets: %s\n", inputs, strings.Join(d.Targets, ", "))
		if d.Concurrency != "" {
			fmt.Fprintf(tw, "\tworkers: %s\n", workersDoc(d))
			for _, o := range d.OrderedWhen {
				fmt.Fprintf(tw, "\t  ordered with %s: %s\n", o.When, o.Why)
			}
		}
		for _, p := range d.Params {
			def := p.Default
			switch {
			case p.Required:
				def = "required"
			case def == "":
				def = "-"
			}
			typ := p.Type
			if p.Unit != "" {
				typ += " (" + p.Unit + ")"
			}
			fmt.Fprintf(tw, "\t  %s\t%s\t%s\t%s\n", p.Name, typ, def, p.Summary)
		}
		if d.State == nil {
			continue
		}
		fmt.Fprintf(tw, "\tstate (%s byte order):\n", d.State.ByteOrder)
		for _, f := range d.State.Fields {
			typ := f.typeName
			if f.Unit != "" {
				typ += " (" + f.Unit + ")"
			}
			summary := f.Summary
			if len(f.Targets) > 0 {
				summary = "in " + strings.Join(f.Targets, ", ") + ": " + summary
			}
			fmt.Fprintf(tw, "\t  %s\t%s\tmerge=%s\t%s\n", f.Name, typ, f.Merge, summary)
		}
	}
	return tw.Flush()
}

// workersDoc says how a function of the class runs on several workers.
func workersDoc(d classDoc) string {
	switch d.Concurrency {
	case functions.Stateless.String():
		return "stateless: an instance per worker, no lock"
	case functions.Mergeable.String():
		return "mergeable: a shard of the state per worker, merged by each field's merge when read"
	}
	return "ordered: one lock"
}
