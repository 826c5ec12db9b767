package p4

// The program: the functions placed on the switch, lowered each with a
// p4gen.Builder of its own and chained in the order of the flowgraph, with
// their accounting, into one v1model program, allocated to the pipeline's
// stages function by function (p4gen.Allocator) so that a refusal names
// the function and the resource.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// ProgramName is the name of the programs the switch flowspace builds.
const ProgramName = "ffpf"

// Assembly is the program of the functions placed on one switch, built
// one function after another.
type Assembly struct {
	Prog  *p4gen.Program
	Alloc *p4gen.Allocator
	// Lowered are the functions in the order they were added.
	Lowered []*Lowered

	fs    *Flowspace
	by    map[*flowspaces.Node]*Lowered
	final bool
}

// Lowered is one function (or a port's source) as the program has it.
type Lowered struct {
	Node *flowspaces.Node
	// Out is meta.<prefix>_out, 1 when the function passed the packet
	// (for a source: the packet entered at its port).
	Out p4gen.Ref
	// Acct counts the packets that reached the function and that it
	// filtered (cell 0) or passed (cell 1); a source's has one cell, the
	// packets that entered at its port.
	Acct *p4gen.Counter
	// Code is the function's P4 code (nil for a source); Builder what it
	// was lowered into.
	Code    p4gen.Function
	Builder *p4gen.Builder
	// Port is a source's port.
	Port uint16
}

// NewAssembly returns an empty program for the switch.
func (fs *Flowspace) NewAssembly() (*Assembly, error) {
	al, err := p4gen.NewAllocator(fs.opts.Profile)
	if err != nil {
		return nil, err
	}
	return &Assembly{Prog: p4gen.NewProgram(ProgramName), Alloc: al, fs: fs, by: map[*flowspaces.Node]*Lowered{}}, nil
}

// code returns n's P4 code from its class's Code hook, once per node: a
// class may work hard for it (bpf runs its filter symbolically), and
// placement assembles the program anew for each function it offers.
func (fs *Flowspace) code(n *flowspaces.Node) (p4gen.Function, error) {
	fs.codeMu.Lock()
	defer fs.codeMu.Unlock()
	if c, ok := fs.codes[n]; ok {
		return c.fn, c.err
	}
	fn, err := n.Class.P4(&n.Ctx)
	if fs.codes == nil {
		fs.codes = map[*flowspaces.Node]p4code{}
	}
	fs.codes[n] = p4code{fn, err}
	return fn, err
}

// p4code is a node's P4 code, or why it has none.
type p4code struct {
	fn  p4gen.Function
	err error
}

// Add lowers n (a port's capture, or a function whose inputs were added
// before) into the program and allocates its statements; on an error
// the assembly is unusable, and the error says why n does not fit.
func (a *Assembly) Add(n *flowspaces.Node) error {
	if a.final {
		return errors.New("p4: Add after Finish")
	}
	prefix := p4gen.Ident(n.ID)
	l := &Lowered{Node: n}
	var body []p4gen.Stmt
	if n.Class.IsSource() {
		iface := n.Class.Interface(n.Ctx.Params)
		port, ok := a.fs.opts.Ports[iface]
		if !ok {
			return fmt.Errorf("%s has no port %s", a.fs.Name(), iface)
		}
		l.Port = port
		l.Out = a.meta(prefix + "_out")
		l.Acct = &p4gen.Counter{Name: prefix + "_acct", Size: 1, Type: p4gen.PacketsAndBytes, Owner: n.ID}
		a.Prog.Counters = append(a.Prog.Counters, l.Acct)
		at := p4gen.B(p4gen.Eq, p4gen.Std("ingress_port"), p4gen.C(uint64(port), 9))
		body = []p4gen.Stmt{
			p4gen.Assign{Dst: l.Out, X: bit(at)},
			p4gen.If{Cond: at, Then: []p4gen.Stmt{p4gen.Count{Counter: l.Acct, Index: p4gen.C(0, 32)}}},
		}
	} else {
		fn, err := a.fs.code(n)
		if err != nil {
			return err
		}
		var ins []p4gen.Expr
		for _, in := range n.Inputs {
			li, ok := a.by[in]
			if !ok {
				return fmt.Errorf("its input %s runs in %s, and packets cannot come down to the switch", in.ID, where(in))
			}
			if in.Producer() {
				return fmt.Errorf("its input %s produces records, which leave the switch as digests: they are read above", in.ID)
			}
			ins = append(ins, p4gen.B(p4gen.Eq, li.Out, p4gen.C(1, 1)))
		}
		if len(ins) == 0 {
			return errors.New("it has no input on the switch")
		}
		in := p4gen.AnyOf(ins...)
		b := &p4gen.Builder{Prog: a.Prog, ID: n.ID, Prefix: prefix, In: in,
			Time: p4gen.Std("ingress_global_timestamp"), TimeUnit: p4gen.TimeUnit, StateOf: a.stateOf(n)}
		before := a.Prog.Ingress
		if err := fn.Lower(b); err != nil {
			return err
		}
		// A lowering may add statements every packet runs, once for the
		// program (the layers flow keys read, p4gen.StdLayers, put
		// first): they take stages too.
		shared, err := added(before, a.Prog.Ingress)
		if err != nil {
			return fmt.Errorf("%s: %v", n.ID, err)
		}
		if len(shared) > 0 {
			if err := a.validate(n); err != nil {
				return err
			}
			if err := a.Alloc.Offer(a.Prog, prefix, shared, nil); err != nil {
				return err
			}
		}
		l.Code, l.Builder = fn, b
		l.Out = a.meta(prefix + "_out")
		l.Acct = &p4gen.Counter{Name: prefix + "_acct", Size: 2, Type: p4gen.PacketsAndBytes, Owner: n.ID}
		a.Prog.Counters = append(a.Prog.Counters, l.Acct)
		pass := b.Pass
		if pass == nil {
			pass = p4gen.True
		}
		// One counter update a packet: cell out, 0 for a packet the
		// function filtered, 1 for one it passed.
		then := append(append([]p4gen.Stmt(nil), b.Body...),
			p4gen.Assign{Dst: l.Out, X: bit(pass)},
			p4gen.Count{Counter: l.Acct, Index: p4gen.Cast{Bits: 32, X: l.Out}})
		body = []p4gen.Stmt{
			p4gen.Assign{Dst: l.Out, X: p4gen.C(0, 1)},
			p4gen.If{Cond: in, Then: then},
		}
	}
	a.Prog.Ingress = append(a.Prog.Ingress, body...)
	if err := a.validate(n); err != nil {
		return err
	}
	if err := a.Alloc.Offer(a.Prog, prefix, body, nil); err != nil {
		return err
	}
	a.Lowered = append(a.Lowered, l)
	a.by[n] = l
	return nil
}

// validate checks the program as n left it, unless a program n was added
// to before (placement assembles the same functions in the same order,
// one more each time) was valid: Finish checks the whole program anyway.
func (a *Assembly) validate(n *flowspaces.Node) error {
	fs := a.fs
	fs.codeMu.Lock()
	ok := fs.valid[n]
	fs.codeMu.Unlock()
	if ok {
		return nil
	}
	if err := a.Prog.Validate(); err != nil {
		return fmt.Errorf("its P4 code is not a valid program: %v", err)
	}
	fs.codeMu.Lock()
	if fs.valid == nil {
		fs.valid = map[*flowspaces.Node]bool{}
	}
	fs.valid[n] = true
	fs.codeMu.Unlock()
	return nil
}

// added returns the statements a lowering put into the program's ingress
// itself (p4gen.Inserted: at the head, after the layers, or at the end of
// those it held, before).
func added(before, after []p4gen.Stmt) ([]p4gen.Stmt, error) {
	if run, ok := p4gen.Inserted(before, after); ok {
		return run, nil
	}
	return nil, errors.New("its lowering rewrote the statements of the functions before it")
}

func where(n *flowspaces.Node) string {
	if n.Flowspace == nil {
		return "another flowspace"
	}
	return n.Flowspace.Name()
}

// bit is a condition as a bit<1>.
func bit(cond p4gen.Expr) p4gen.Expr {
	return p4gen.Mux{Cond: cond, Then: p4gen.C(1, 1), Else: p4gen.C(0, 1)}
}

func (a *Assembly) meta(name string) p4gen.Ref {
	a.Prog.Metadata = append(a.Prog.Metadata, p4gen.Field{Name: name, Bits: 1})
	return p4gen.Ref{Path: "meta." + name, Bits: 1}
}

// stateOf resolves the labels n reads (named state) to what the
// functions they name exported, when those were lowered here before.
func (a *Assembly) stateOf(n *flowspaces.Node) func(string) (map[string]p4gen.Expr, bool) {
	labels := map[string]*flowspaces.Node{}
	if n.Class.Reads != nil {
		if refs, err := n.Class.Reads(n.Ctx.Params); err == nil {
			i := 0
			for _, ref := range refs {
				l, _, _ := strings.Cut(ref, ".")
				if _, seen := labels[l]; !seen && i < len(n.Reads) {
					labels[l] = n.Reads[i]
					i++
				}
			}
		}
	}
	return func(label string) (map[string]p4gen.Expr, bool) {
		w, ok := labels[label]
		if !ok {
			return nil, false
		}
		lw, ok := a.by[w]
		if !ok || lw.Builder == nil {
			return nil, false
		}
		return lw.Builder.Exports(), true
	}
}

// Lowering returns what n was lowered to.
func (a *Assembly) Lowering(n *flowspaces.Node) (*Lowered, bool) {
	l, ok := a.by[n]
	return l, ok
}

// upCounter counts the packets the switch sends up.
const upCounter = "ffpf_up"

// Finish ends the program with the way up: a packet that one of want
// (functions here the parent asked for) passed leaves through the uplink
// (the CPU port, with a packet_in header whose mask says which of want
// passed it), and every other packet is dropped. It counts what goes up
// in counter ffpf_up.
func (a *Assembly) Finish(want []*flowspaces.Node) error {
	if a.final {
		return errors.New("p4: Finish twice")
	}
	a.final = true
	var sent []p4gen.Expr
	for _, w := range want {
		l, ok := a.by[w]
		if !ok {
			return fmt.Errorf("%s is not on switch %s", w.ID, a.fs.Name())
		}
		sent = append(sent, p4gen.B(p4gen.Eq, l.Out, p4gen.C(1, 1)))
	}
	up := &p4gen.Counter{Name: upCounter, Size: 1, Type: p4gen.PacketsAndBytes, Owner: ""}
	a.Prog.Counters = append(a.Prog.Counters, up)
	send := []p4gen.Stmt{
		p4gen.Assign{Dst: p4gen.Std("egress_spec"), X: p4gen.C(uint64(a.fs.uplinkPort()), 9)},
		p4gen.Count{Counter: up, Index: p4gen.C(0, 32)},
	}
	if a.fs.opts.UplinkCPU {
		if len(want) > 32 {
			return fmt.Errorf("switch %s sends the outputs of %d functions up; a packet_in header has room for 32", a.fs.Name(), len(want))
		}
		ht := &p4gen.HeaderType{Name: "packet_in_t", Controller: p4gen.ControllerPacketIn, Fields: []p4gen.Field{
			{Name: "ingress_port", Bits: 16}, {Name: "mask", Bits: 32}}}
		a.Prog.HeaderTypes = append(a.Prog.HeaderTypes, ht)
		a.Prog.Headers = append(a.Prog.Headers, &p4gen.Header{Name: "packet_in", Type: ht})
		a.Prog.Deparse = append([]string{"packet_in"}, a.Prog.Deparse...)
		var mask p4gen.Expr = p4gen.C(0, 32)
		for i, w := range want {
			bitI := p4gen.Mux{Cond: p4gen.B(p4gen.Eq, a.by[w].Out, p4gen.C(1, 1)), Then: p4gen.C(1<<i, 32), Else: p4gen.C(0, 32)}
			mask = p4gen.B(p4gen.Or, mask, bitI)
		}
		send = append(send,
			p4gen.SetValid{Header: "packet_in", Valid: true},
			p4gen.Assign{Dst: p4gen.Ref{Path: "hdr.packet_in.ingress_port", Bits: 16}, X: p4gen.Cast{Bits: 16, X: p4gen.Std("ingress_port")}},
			p4gen.Assign{Dst: p4gen.Ref{Path: "hdr.packet_in.mask", Bits: 32}, X: mask})
	}
	tail := []p4gen.Stmt{p4gen.If{Cond: p4gen.AnyOf(sent...), Then: send, Else: []p4gen.Stmt{p4gen.MarkToDrop{}}}}
	if len(sent) == 0 {
		tail = []p4gen.Stmt{p4gen.MarkToDrop{}}
	}
	a.Prog.Ingress = append(a.Prog.Ingress, tail...)
	if err := a.Prog.Validate(); err != nil {
		return fmt.Errorf("the switch's program is not valid: %v", err)
	}
	if err := a.Alloc.Offer(a.Prog, "", tail, nil); err != nil {
		return err
	}
	// The switch allocates the program whole, as it is: what placement
	// accepted function by function must fit that way too.
	if _, err := p4gen.Allocate(a.Prog, a.fs.opts.Profile); err != nil {
		return err
	}
	return nil
}
