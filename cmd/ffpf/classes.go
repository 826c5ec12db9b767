package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/ffpf-go/ffpf/functions"
)

const classesSynopsis = `[--json]

Lists the function classes: what each does, its parameters (type, default,
unit) and the flowspaces it can run in. The first parameter may be given
without its key: (bpf,"tcp") is (bpf,expr="tcp").`

type classDoc struct {
	Name      string     `json:"name"`
	Summary   string     `json:"summary"`
	Source    bool       `json:"source"`
	MinInputs int        `json:"min_inputs"`
	MaxInputs int        `json:"max_inputs"`
	Targets   []string   `json:"targets"`
	Params    []paramDoc `json:"params"`
}

type paramDoc struct {
	Name     string   `json:"name"`
	Type     string   `json:"type"`
	Default  string   `json:"default,omitempty"`
	Required bool     `json:"required"`
	Unit     string   `json:"unit,omitempty"`
	Summary  string   `json:"summary"`
	Enum     []string `json:"enum,omitempty"`
}

func describeClasses(reg *functions.Registry) []classDoc {
	var docs []classDoc
	for _, c := range reg.All() {
		d := classDoc{Name: c.Name, Summary: c.Summary, Source: c.IsSource(),
			MinInputs: c.MinInputs, MaxInputs: c.MaxInputs, Params: []paramDoc{}}
		for _, t := range c.Targets {
			d.Targets = append(d.Targets, string(t))
		}
		for _, p := range c.Params {
			d.Params = append(d.Params, paramDoc{Name: p.Name, Type: p.Type.String(), Default: p.Default,
				Required: p.Required, Unit: p.Unit, Summary: p.Summary, Enum: p.Enum})
		}
		docs = append(docs, d)
	}
	return docs
}

func cmdClasses(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("classes", classesSynopsis, stderr)
	asJSON := fs.Bool("json", false, "print the classes as JSON")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("classes takes no arguments")
	}
	docs := describeClasses(functions.Default)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(docs)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
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
		fmt.Fprintf(tw, "\t%s; targets: %s\n", inputs, strings.Join(d.Targets, ", "))
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
	}
	return tw.Flush()
}
