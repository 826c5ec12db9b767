package p4net

// The program of a switch on a path: ingress forwards (a table of routes
// the controller fills: ingress port → egress port); egress runs the
// functions on every packet that leaves by a front-panel port, where the
// switch knows the port and the depth of the queue the packet joined,
// and a packet that reached a collect is copied, once, to the CPU port
// (an egress-to-egress clone that keeps the metadata it needs), with a
// packet_in header whose mask says which collectors it is for. What the
// functions on a copy write (tags after a duplicate) is written into the
// copy only; the packet forwarded keeps what the functions on its own
// stream wrote.

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/annotate"
	"github.com/ffpf-go/ffpf/functions/p4gen"
	"github.com/ffpf-go/ffpf/lang"
)

// ProgramName is the name of the programs of a path's switches.
const ProgramName = "ffpf_path"

// CloneSession is the clone session that sends copies to the CPU port.
const CloneSession = 1

// Options describe the switch a program is built for.
type Options struct {
	Name    string // the switch's name, for messages
	Role    string // the section it runs, for messages
	ID      uint32 // switch.id
	CPUPort uint16
	Profile p4gen.Profile
	// Registry holds the classes (functions.Default when nil).
	Registry *functions.Registry
	// PortCounters counts the packets each port takes in and sends out
	// (PortIn, PortOut): what a controller knows of a switch that runs
	// elsewhere, whose model it does not hold.
	PortCounters bool
}

// Program is a switch's program and what the controller needs of it.
type Program struct {
	Options
	Prog       *p4gen.Program
	Nodes      []*Node // in the order they were lowered
	Collectors []*Collector
	// Routes is the forwarding table; SetPort its action (one
	// parameter: the port).
	Routes  *p4gen.Table
	SetPort *p4gen.Action
	// PortIn counts the packets (and bytes) that enter by each port, in
	// ingress; PortOut those that leave by each port, in egress (a copy
	// to the CPU port among them). Nil without Options.PortCounters.
	PortIn, PortOut *p4gen.Counter

	Printed *p4gen.Printed
	Report  p4gen.Report
}

// DeviceConfig is the program as the model takes it
// (SetForwardingPipelineConfig's p4_device_config), made when it is
// pushed: compiling a program stops at its P4.
func (p *Program) DeviceConfig() ([]byte, error) { return p4gen.EncodeJSON(p.Prog) }

// Node is one function of the program.
type Node struct {
	ID     string
	Label  string
	Class  *functions.Class
	Ctx    functions.Context
	Inputs []*Node
	Reads  []*Node
	// Copy: the function works on the copy a collect sends (a stream a
	// duplicate started).
	Copy bool
	// Collector is set for an export: where the copies go.
	Collector *Collector

	Code    p4gen.Function
	Builder *p4gen.Builder
	// Out is 1 when the function passed the packet; Acct counts the
	// packets it filtered (cell 0) and passed (cell 1).
	Out  p4gen.Ref
	Acct *p4gen.Counter
}

// Collector is an endpoint copies go to: a capture file (file=) or a UDP
// collector (to=HOST:PORT).
type Collector struct {
	Label    string
	File, To string
	Bit      int // its bit in the packet_in header's mask
}

// Build builds the program of req (a MAFIA section's request; copies
// tells, in the order its functions are printed, which work on a copy)
// for a switch.
func Build(req *lang.Request, copies []bool, o Options) (*Program, error) {
	if o.Registry == nil {
		o.Registry = functions.Default
	}
	p := &Program{Options: o, Prog: p4gen.NewProgram(ProgramName)}
	nodes, err := resolve(req, copies, o)
	if err != nil {
		return nil, err
	}
	p.Nodes = nodes
	if err := p.lower(); err != nil {
		return nil, p.errorf(err)
	}
	if err := p.Prog.Validate(); err != nil {
		return nil, p.errorf(fmt.Errorf("the program is not valid: %v", err))
	}
	al, err := p4gen.Allocate(p.Prog, o.Profile)
	if err != nil {
		return nil, p.errorf(err)
	}
	p.Report = al.Report()
	if p.Printed, err = p4gen.Print(p.Prog); err != nil {
		return nil, p.errorf(err)
	}
	return p, nil
}

func (p *Program) errorf(err error) error {
	where := "switch " + p.Name
	if p.Role != "" {
		where += " (" + p.Role + ")"
	}
	return fmt.Errorf("%s: %w", where, err)
}

// resolve makes the request's functions into nodes, in the order they are
// printed, each with its inputs and the functions whose state it reads.
func resolve(req *lang.Request, copies []bool, o Options) ([]*Node, error) {
	var nodes []*Node
	byFunc := map[*lang.Func]*Node{}
	labels := map[string]lang.Term{}
	count := map[string]int{}
	var walk func(cs []*lang.Chain) error
	walk = func(cs []*lang.Chain) error {
		for _, ch := range cs {
			for _, t := range ch.Terms {
				switch t := t.(type) {
				case *lang.Func:
					n, err := node(t, o)
					if err != nil {
						return err
					}
					if i := len(nodes); i < len(copies) {
						n.Copy = copies[i]
					}
					count[n.Class.Name]++
					n.ID = fmt.Sprintf("%s#%d", n.Class.Name, count[n.Class.Name])
					if t.Label != "" {
						labels[t.Label] = t
					}
					byFunc[t] = n
					nodes = append(nodes, n)
				case *lang.Group:
					if t.Label != "" {
						labels[t.Label] = t
					}
					if err := walk(t.Chains); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	if err := walk(req.Chains); err != nil {
		return nil, err
	}
	// Inputs: every output of a term feeds every input of the next.
	type ports struct{ ins, outs []*Node }
	var term func(t lang.Term, depth int) (ports, error)
	var chain func(c *lang.Chain, depth int) (ports, error)
	term = func(t lang.Term, depth int) (ports, error) {
		if depth > 64 {
			return ports{}, errors.New("labels refer to each other in a cycle")
		}
		switch t := t.(type) {
		case *lang.Ref:
			def, ok := labels[t.Name]
			if !ok {
				return ports{}, fmt.Errorf("label %q is not defined", t.Name)
			}
			return term(def, depth+1)
		case *lang.Func:
			n := byFunc[t]
			return ports{[]*Node{n}, []*Node{n}}, nil
		case *lang.Group:
			var p ports
			for _, c := range t.Chains {
				q, err := chain(c, depth+1)
				if err != nil {
					return ports{}, err
				}
				p.ins, p.outs = append(p.ins, q.ins...), append(p.outs, q.outs...)
			}
			return p, nil
		}
		return ports{}, fmt.Errorf("a term of type %T", t)
	}
	chain = func(c *lang.Chain, depth int) (ports, error) {
		var first, cur ports
		for i, t := range c.Terms {
			q, err := term(t, depth)
			if err != nil {
				return ports{}, err
			}
			if i == 0 {
				first = q
			} else {
				for _, in := range q.ins {
					for _, o := range cur.outs {
						if !containsNode(in.Inputs, o) {
							in.Inputs = append(in.Inputs, o)
						}
					}
				}
			}
			cur = q
		}
		return ports{first.ins, cur.outs}, nil
	}
	for _, c := range req.Chains {
		if _, err := chain(c, 0); err != nil {
			return nil, err
		}
	}
	byLabel := map[string]*Node{}
	for _, n := range nodes {
		if n.Label != "" {
			byLabel[n.Label] = n
		}
	}
	for _, n := range nodes {
		if n.Class.Reads == nil {
			continue
		}
		refs, err := n.Class.Reads(n.Ctx.Params)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", n.ID, err)
		}
		for _, ref := range refs {
			l, _, _ := strings.Cut(ref, ".")
			w, ok := byLabel[l]
			if !ok {
				return nil, fmt.Errorf("%s reads the state of %q, which labels no function", n.ID, l)
			}
			if !containsNode(n.Reads, w) {
				n.Reads = append(n.Reads, w)
			}
		}
	}
	return order(nodes)
}

// node binds a function's parameters.
func node(f *lang.Func, o Options) (*Node, error) {
	c, ok := o.Registry.Lookup(f.Class)
	if !ok {
		return nil, fmt.Errorf("unknown class %q", f.Class)
	}
	args := make([]functions.Arg, len(f.Args))
	for i, a := range f.Args {
		k := functions.RawWord
		switch a.Value.Kind {
		case lang.String:
			k = functions.RawString
		case lang.Number:
			k = functions.RawNumber
		}
		args[i] = functions.Arg{Key: a.Key, Value: functions.Raw{Kind: k, Text: a.Value.Text, Unit: a.Value.Unit}}
	}
	params, err := c.Bind(args)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", c.Name, err)
	}
	return &Node{Label: f.Label, Class: c, Ctx: functions.Context{Params: params, LinkType: functions.LinkEthernet,
		Snaplen: 65535, Flowspace: o.Name, Target: functions.TargetP4}}, nil
}

// order sorts the nodes so that each comes after its inputs and the
// functions it reads, keeping their order otherwise.
func order(nodes []*Node) ([]*Node, error) {
	var out []*Node
	state := map[*Node]int{} // 1 visiting, 2 done
	var visit func(n *Node) error
	visit = func(n *Node) error {
		switch state[n] {
		case 1:
			return fmt.Errorf("%s feeds itself", n.ID)
		case 2:
			return nil
		}
		state[n] = 1
		for _, d := range append(append([]*Node(nil), n.Inputs...), n.Reads...) {
			if err := visit(d); err != nil {
				return err
			}
		}
		state[n] = 2
		out = append(out, n)
		return nil
	}
	for _, n := range nodes {
		if err := visit(n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func containsNode(ns []*Node, n *Node) bool {
	for _, m := range ns {
		if m == n {
			return true
		}
	}
	return false
}

// lower builds the program: the routes in ingress, the functions and the
// copies in egress.
func (p *Program) lower() error {
	prog := p.Prog
	port := p4gen.Field{Name: "port", Bits: 9}
	p.SetPort = &p4gen.Action{Name: "set_port", Params: []p4gen.Field{port},
		Body: []p4gen.Stmt{p4gen.Assign{Dst: p4gen.Std("egress_spec"), X: p4gen.Ref{Path: "port", Bits: 9}}}}
	drop := &p4gen.Action{Name: "drop", Body: []p4gen.Stmt{p4gen.MarkToDrop{}}}
	p.Routes = &p4gen.Table{Name: "routes", Keys: []p4gen.TableKey{{X: p4gen.Std("ingress_port"), Match: p4gen.Exact}},
		Actions: []*p4gen.Action{p.SetPort, drop}, Default: drop, Size: 512}
	prog.Actions = append(prog.Actions, p.SetPort, drop)
	prog.Tables = append(prog.Tables, p.Routes)

	ann := 0
	lowered := map[*Node]bool{}
	var normal []p4gen.Stmt
	var deferred []*annotate.FieldTag
	for _, n := range p.Nodes {
		if n.Class.Annotates > 0 {
			n.Ctx.Ann = ann
			ann += n.Class.Annotates
		}
		n.ID = strings.TrimSpace(n.ID)
		n.Ctx.ID = n.ID
		if n.Class.Validate != nil {
			if err := n.Class.Validate(&n.Ctx); err != nil {
				return fmt.Errorf("%s: %v", n.ID, err)
			}
		}
		var ins []p4gen.Expr
		for _, in := range n.Inputs {
			if in.Collector != nil {
				return fmt.Errorf("%s: its input %s is a collect, whose packets leave the switch", n.ID, in.ID)
			}
			ins = append(ins, p4gen.B(p4gen.Eq, in.Out, p4gen.C(1, 1)))
		}
		in := p4gen.Expr(p4gen.True) // the request's functions with no input read every packet
		if len(ins) > 0 {
			in = p4gen.AnyOf(ins...)
		}
		if n.Class.Name == "export" {
			c, err := collector(n, len(p.Collectors))
			if err != nil {
				return err
			}
			n.Collector = c
			p.Collectors = append(p.Collectors, c)
			n.Builder = &p4gen.Builder{In: in}
			continue
		}
		if n.Class.IsSource() {
			return fmt.Errorf("%s reads packets of its own (MAFIA's ctrl); on a path the packets are those the switches forward", n.ID)
		}
		code, err := n.Class.P4(&n.Ctx)
		if err != nil {
			return fmt.Errorf("%s cannot run on a switch: %v", n.ID, err)
		}
		// A tag of a header field makes rewritten copies above a switch
		// (records); on a path it rewrites the packet, or its copy.
		t, isTag := code.(*annotate.FieldTag)
		switch {
		case isTag && n.Copy:
			t.Deferred = true
			deferred = append(deferred, t)
		case !isTag && n.Class.IsProducer(n.Ctx.Params):
			return fmt.Errorf("%s makes records; a path carries packets (collect sends them)", n.ID)
		}
		prefix := p4gen.Ident(n.ID)
		b := &p4gen.Builder{Prog: prog, ID: n.ID, Prefix: prefix, In: in,
			Time: p4gen.Std("ingress_global_timestamp"), TimeUnit: p4gen.TimeUnit, StateOf: stateOf(n, lowered),
			SwitchID: p4gen.C(uint64(p.ID), 32), OutPort: p4gen.Std("egress_port"), QDepth: p4gen.Std("enq_qdepth")}
		before := prog.Ingress
		if err := code.Lower(b); err != nil {
			return fmt.Errorf("%s: %v", n.ID, err)
		}
		if _, ok := p4gen.Inserted(before, prog.Ingress); !ok {
			return fmt.Errorf("%s: its lowering rewrote the statements of the functions before it", n.ID)
		}
		if b.Window != nil {
			return fmt.Errorf("%s: window= is not read on a path (its state is read when the trace ends)", n.ID)
		}
		if hasDigest(b.Body) {
			return fmt.Errorf("%s sends digests, which v1model sends from ingress only; on a path its functions run in egress", n.ID)
		}
		n.Code, n.Builder = code, b
		n.Out = meta(prog, prefix+"_out", 1)
		n.Acct = &p4gen.Counter{Name: prefix + "_acct", Size: 2, Type: p4gen.PacketsAndBytes, Owner: n.ID}
		prog.Counters = append(prog.Counters, n.Acct)
		pass := b.Pass
		if pass == nil {
			pass = p4gen.True
		}
		then := append(append([]p4gen.Stmt(nil), b.Body...),
			p4gen.Assign{Dst: n.Out, X: bit(pass)},
			p4gen.Count{Counter: n.Acct, Index: p4gen.Cast{Bits: 32, X: n.Out}})
		normal = append(normal, p4gen.Assign{Dst: n.Out, X: p4gen.C(0, 1)}, p4gen.If{Cond: in, Then: then})
		lowered[n] = true
	}
	var outCount []p4gen.Stmt
	if p.PortCounters {
		p.PortIn = &p4gen.Counter{Name: "ffpf_port_in", Size: p4gen.DropPort, Type: p4gen.PacketsAndBytes}
		p.PortOut = &p4gen.Counter{Name: "ffpf_port_out", Size: p4gen.DropPort, Type: p4gen.PacketsAndBytes}
		prog.Counters = append(prog.Counters, p.PortIn, p.PortOut)
		prog.Ingress = append(prog.Ingress, p4gen.Count{Counter: p.PortIn, Index: p4gen.Cast{Bits: 32, X: p4gen.Std("ingress_port")}})
		outCount = []p4gen.Stmt{p4gen.Count{Counter: p.PortOut, Index: p4gen.Cast{Bits: 32, X: p4gen.Std("egress_port")}}}
	}
	prog.Ingress = append(prog.Ingress, p4gen.Apply{Table: p.Routes})
	if len(p.Collectors) > 32 {
		return fmt.Errorf("%d collectors; a packet_in header has room for 32", len(p.Collectors))
	}
	var copyPass []p4gen.Stmt
	if len(p.Collectors) > 0 {
		mask := meta(prog, "ffpf_collect", 32)
		normal = append(normal, p4gen.Assign{Dst: mask, X: p4gen.C(0, 32)})
		for _, n := range p.Nodes {
			if c := n.Collector; c != nil {
				normal = append(normal, p4gen.If{Cond: n.Builder.In,
					Then: []p4gen.Stmt{p4gen.Assign{Dst: mask, X: p4gen.B(p4gen.Or, mask, p4gen.C(1<<c.Bit, 32))}}})
			}
		}
		preserve := []p4gen.Ref{mask}
		for _, t := range deferred {
			preserve = append(preserve, t.Value, t.Present)
			copyPass = append(copyPass, p4gen.If{Cond: p4gen.B(p4gen.Eq, t.Present, p4gen.C(1, 1)), Then: t.Write(prog, t.Value)})
		}
		normal = append(normal, p4gen.If{Cond: p4gen.B(p4gen.Ne, mask, p4gen.C(0, 32)),
			Then: []p4gen.Stmt{p4gen.Clone{Session: CloneSession, E2E: true, Preserve: preserve}}})
		ht := &p4gen.HeaderType{Name: "packet_in_t", Controller: p4gen.ControllerPacketIn, Fields: []p4gen.Field{
			{Name: "ingress_port", Bits: 16}, {Name: "mask", Bits: 32}}}
		prog.HeaderTypes = append(prog.HeaderTypes, ht)
		prog.Headers = append(prog.Headers, &p4gen.Header{Name: "packet_in", Type: ht})
		prog.Deparse = append([]string{"packet_in"}, prog.Deparse...)
		copyPass = append(copyPass,
			p4gen.SetValid{Header: "packet_in", Valid: true},
			p4gen.Assign{Dst: p4gen.Ref{Path: "hdr.packet_in.ingress_port", Bits: 16}, X: p4gen.Cast{Bits: 16, X: p4gen.Std("ingress_port")}},
			p4gen.Assign{Dst: p4gen.Ref{Path: "hdr.packet_in.mask", Bits: 32}, X: mask})
	} else if len(deferred) > 0 {
		return errors.New("functions work on a copy that no collect sends")
	}
	inst := p4gen.Std("instance_type")
	egress := append(outCount, p4gen.If{Cond: p4gen.B(p4gen.Eq, inst, p4gen.C(p4gen.InstanceNormal, inst.Bits)), Then: normal})
	if len(copyPass) > 0 {
		egress = append(egress, p4gen.If{Cond: p4gen.B(p4gen.Eq, inst, p4gen.C(p4gen.InstanceCloneE2E, inst.Bits)), Then: copyPass})
	}
	prog.Egress = append(prog.Egress, egress...)
	return nil
}

// collector reads an export's endpoint.
func collector(n *Node, bit int) (*Collector, error) {
	ps := n.Ctx.Params
	c := &Collector{Label: n.Label, Bit: bit}
	for _, name := range paramNames(n.Class) {
		if !ps.Has(name) {
			continue
		}
		switch name {
		case "file":
			c.File = ps.Str("file")
		case "to":
			c.To = ps.Str("to")
		case "format":
			if f := ps.Str("format"); f != "pcap" {
				return nil, fmt.Errorf("%s: format=%s; a path's collect sends packets (pcap)", n.ID, f)
			}
		default:
			return nil, fmt.Errorf("%s: %s= is not what a path's collect takes (file= or to=)", n.ID, name)
		}
	}
	if c.File == "" && c.To == "" {
		return nil, fmt.Errorf("%s: a collect needs file= or to=", n.ID)
	}
	return c, nil
}

func paramNames(c *functions.Class) []string {
	var ns []string
	for _, p := range c.Params {
		ns = append(ns, p.Name)
	}
	sort.Strings(ns)
	return ns
}

// stateOf resolves the labels n reads to what the functions they name
// exported, when lowered before it.
func stateOf(n *Node, lowered map[*Node]bool) func(string) (map[string]p4gen.Expr, bool) {
	return func(label string) (map[string]p4gen.Expr, bool) {
		for _, r := range n.Reads {
			if r.Label == label && lowered[r] && r.Builder != nil {
				return r.Builder.Exports(), true
			}
		}
		return nil, false
	}
}

func hasDigest(ss []p4gen.Stmt) bool {
	for _, s := range ss {
		switch s := s.(type) {
		case p4gen.Digest:
			return true
		case p4gen.If:
			if hasDigest(s.Then) || hasDigest(s.Else) {
				return true
			}
		}
	}
	return false
}

func meta(prog *p4gen.Program, name string, bits int) p4gen.Ref {
	prog.Metadata = append(prog.Metadata, p4gen.Field{Name: name, Bits: bits})
	return p4gen.Ref{Path: "meta." + name, Bits: bits}
}

func bit(cond p4gen.Expr) p4gen.Expr {
	return p4gen.Mux{Cond: cond, Then: p4gen.C(1, 1), Else: p4gen.C(0, 1)}
}
