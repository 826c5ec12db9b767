package bpf

import (
	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

func init() {
	functions.Register(&functions.Class{
		Name:    "bpf",
		Summary: "pass the packets that match a pcap-filter expression (tcpdump syntax)",
		Params: []functions.Param{{
			Name:     "expr",
			Type:     functions.String,
			Required: true,
			Summary:  `pcap-filter(7) expression, as tcpdump takes it, e.g. "tcp and dst port 80"`,
		}},
		MinInputs: 1, MaxInputs: -1,
		Concurrency: functions.Stateless,
		// In the kernel and XDP, cbpfc translates libpcap's program to
		// eBPF; filters with a backward jump (protochain) stay in userspace.
		// On a switch the program becomes a ternary table (p4.go).
		Targets:  []functions.Target{functions.TargetUser, functions.TargetKernel, functions.TargetXDP, functions.TargetP4},
		Validate: validateFilter,
		New:      newFilter,
		Code:     functions.Codes(functions.EBPFCode(newEBPF), functions.P4Code(newP4)),
	})
}

// validateFilter compiles the expression for the captures that reach the
// filter (see CompileCaptures) at populate time, so that a bad filter fails
// the request before anything is instantiated.
func validateFilter(ctx *functions.Context) error {
	_, err := compileContext(ctx)
	return err
}

func newFilter(ctx *functions.Context) (functions.Function, error) {
	prog, err := compileContext(ctx)
	if err != nil {
		return nil, err
	}
	if asksDirection(prog.Instructions()) && (ctx.Target == "" || ctx.Target == functions.TargetUser) {
		return nil, errDirection
	}
	return &Filter{expr: ctx.Params.Str("expr"), lt: ctx.LinkType, snaplen: ctx.Snaplen, prog: prog}, nil
}

// compileContext compiles the class's expression as tcpdump would for the
// captures in ctx: as `tcpdump -r` for a file, for the link type otherwise.
func compileContext(ctx *functions.Context) (*Program, error) {
	return CompileCapturesAndLoad(ctx.Params.Str("expr"), ctx.LinkType, ctx.Captures, ctx.Snaplen)
}

// Filter is an instance of the bpf class: a compiled, loaded filter.
type Filter struct {
	expr    string
	lt      functions.LinkType
	snaplen int
	prog    *Program
}

// NewFilter compiles expr for a live capture of link type lt and snap
// length snaplen (see Compile) and loads it.
func NewFilter(expr string, lt functions.LinkType, snaplen int) (*Filter, error) {
	prog, err := CompileAndLoad(expr, lt, snaplen)
	if err != nil {
		return nil, err
	}
	return &Filter{expr: expr, lt: lt, snaplen: snaplen, prog: prog}, nil
}

// Process keeps the packets the filter accepts; see Program.Filter. Entry
// classes pass through unchanged.
func (f *Filter) Process(b *buffers.Batch) { f.prog.Filter(b) }

// Expr returns the pcap-filter expression.
func (f *Filter) Expr() string { return f.expr }

// LinkType returns the link type the filter was compiled for.
func (f *Filter) LinkType() functions.LinkType { return f.lt }

// Instructions returns the classic BPF program libpcap compiled, for
// placement in a lower flowspace (translation to eBPF) and for display.
// The caller must not modify it.
func (f *Filter) Instructions() []Instruction { return f.prog.Instructions() }

// Program returns the loaded program.
func (f *Filter) Program() *Program { return f.prog }
