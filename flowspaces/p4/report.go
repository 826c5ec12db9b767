package p4

import (
	"fmt"
	"strings"

	p4cfg "github.com/p4lang/p4runtime/go/p4/config/v1"

	"github.com/ffpf-go/ffpf/functions/p4gen"
	"github.com/ffpf-go/ffpf/functions/p4gen/p4info"
)

// Output is an assembled program in the forms it leaves ffpf in: the
// P4_16 text, its P4Info, the model's device config, and what it takes
// of the switch.
type Output struct {
	Printed      *p4gen.Printed
	P4Info       *p4cfg.P4Info
	DeviceConfig []byte
	Resources    Resources
}

// Resources is what a program takes of a switch, in the shape of MAFIA's
// Table IV (stages used, the pipeline's depth; the widest stage's
// logical tables; stateful operations) and Table II (tables, actions and
// lines of P4), with the allocation stage by stage.
type Resources struct {
	Switch    string   `json:"switch"`
	Functions []string `json:"functions"`
	Depth     int      `json:"pipeline_depth"` // ingress stages used
	Width     int      `json:"widest_stage"`   // logical tables in the widest stage
	Stateful  int      `json:"stateful_ops"`
	// Table II: the program's tables (the logical tables of the
	// allocation: p4c makes a table of straight-line code too), its
	// declared match-action tables, actions and lines of P4.
	Tables         int          `json:"tables"`
	DeclaredTables int          `json:"declared_tables"`
	Actions        int          `json:"actions"`
	Lines          int          `json:"lines_of_p4"`
	Allocation     p4gen.Report `json:"allocation"`
}

// Output prints the program and its P4Info and encodes its device config.
func (a *Assembly) Output() (*Output, error) {
	pr, err := p4gen.Print(a.Prog)
	if err != nil {
		return nil, err
	}
	info := p4info.Of(a.Prog, pr)
	cfg, err := p4gen.EncodeJSON(a.Prog)
	if err != nil {
		return nil, err
	}
	rep := a.Alloc.Report()
	r := Resources{Switch: a.fs.Name(), Functions: []string{}, Depth: rep.Depth, Width: rep.Width, Stateful: rep.Stateful,
		Tables: rep.Tables, DeclaredTables: len(a.Prog.Tables), Actions: len(a.Prog.Actions), Lines: pr.Lines, Allocation: rep}
	for _, l := range a.Lowered {
		r.Functions = append(r.Functions, l.Node.ID)
	}
	return &Output{Printed: pr, P4Info: info, DeviceConfig: cfg, Resources: r}, nil
}

// String prints the resources as resources.txt has them.
func (r Resources) String() string {
	var b strings.Builder
	p := r.Allocation.Profile
	fmt.Fprintf(&b, "switch %s: %s\n", r.Switch, strings.Join(r.Functions, ", "))
	fmt.Fprintf(&b, "stages used (pipeline depth)  %d of %d\n", r.Depth, p.Stages)
	fmt.Fprintf(&b, "widest stage                  %d logical tables of %d\n", r.Width, p.Tables)
	fmt.Fprintf(&b, "stateful operations           %d\n", r.Stateful)
	fmt.Fprintf(&b, "tables                        %d (%d declared match-action tables)\n", r.Tables, r.DeclaredTables)
	fmt.Fprintf(&b, "actions                       %d\n", r.Actions)
	fmt.Fprintf(&b, "lines of P4                   %d\n\n", r.Lines)
	b.WriteString(r.Allocation.String())
	return b.String()
}
