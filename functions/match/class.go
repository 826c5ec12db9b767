package match

import (
	"fmt"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
)

func init() {
	functions.Register(&functions.Class{
		Name:      "match",
		Summary:   "pass the packets that satisfy a predicate over packet fields, annotations and named state (MAFIA's Match)",
		MinInputs: 1, MaxInputs: -1,
		Concurrency: functions.Stateless, // a predicate over named state runs ordered (see flowspaces.Node.Concurrency)
		Params: []functions.Param{
			{Name: "expr", Type: functions.String, Required: true,
				Summary: `predicate, e.g. "tcp.dport == 80 and ipv4.src in 10.0.0.0/8" or "nbytes.min > 0.01 * total.value"`,
				Check: func(v functions.Value) error {
					n, err := parse(v.Str)
					if err != nil {
						return err
					}
					_, err = compile(n, checkState)
					return err
				}},
		},
		Targets: []functions.Target{functions.TargetUser, functions.TargetP4},
		Code:    functions.P4Code(p4Code),
		Runs: func(t functions.Target, p functions.Params) error {
			return UserRuns(t, p, nil, "expr")
		},
		Reads: func(p functions.Params) ([]string, error) {
			n, err := parse(p.Str("expr"))
			if err != nil {
				return nil, err
			}
			return n.refs(nil), nil
		},
		Validate: func(ctx *functions.Context) error {
			n, err := parse(ctx.Params.Str("expr"))
			if err != nil {
				return err
			}
			if n.headers() && !flowkey.Supported(ctx.LinkType) {
				return fmt.Errorf("match cannot read packet headers of %v packets (only pkt.* fields)", ctx.LinkType)
			}
			return nil
		},
		New: func(ctx *functions.Context) (functions.Function, error) { return New(ctx) },
	})
}

// Match passes the packets that satisfy its predicate.
type Match struct {
	pred boolFn
	env  env
}

// New instantiates a match function: it compiles the predicate against
// the functions whose state it reads.
func New(ctx *functions.Context) (*Match, error) {
	n, err := parse(ctx.Params.Str("expr"))
	if err != nil {
		return nil, err
	}
	pred, err := compile(n, readState(ctx))
	if err != nil {
		return nil, err
	}
	return &Match{pred: pred, env: env{lt: ctx.LinkType}}, nil
}

// Compile compiles a predicate over packets of link type lt that reads no
// named state, for tests and tools.
func Compile(expr string, lt functions.LinkType) (*Match, error) {
	n, err := parse(expr)
	if err != nil {
		return nil, err
	}
	pred, err := compile(n, func(label, name string) (any, error) {
		return nil, fmt.Errorf("%s.%s: no named state here", label, name)
	})
	if err != nil {
		return nil, err
	}
	return &Match{pred: pred, env: env{lt: lt}}, nil
}

// Process keeps the entries of the packets that satisfy the predicate,
// their class results unchanged.
func (m *Match) Process(b *buffers.Batch) {
	e, k := &m.env, 0
	for _, x := range b.E[:b.N] {
		e.set(b.PBuf, x.Slot)
		if m.pred(e) {
			b.E[k] = x
			k++
		}
	}
	b.N = k
}

// Eval evaluates the predicate on slot i of p.
func (m *Match) Eval(p *buffers.PBuf, i uint32) bool {
	m.env.set(p, i)
	return m.pred(&m.env)
}
