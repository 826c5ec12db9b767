package p4gen

import "fmt"

// Node is one function of a program that Assemble builds.
type Node struct {
	ID    string // "cms#2"
	Label string // its label in the request, "" for none (StateOf)
	Fn    Function
	// Inputs are the earlier nodes that feed it; none: the packets that
	// enter the switch.
	Inputs []int
}

// TimeUnit is the unit of the switch's clock, ingress_global_timestamp:
// microseconds, as bmv2 keeps it.
const TimeUnit = 1000

// Assemble lowers nodes, inputs before dependents, into one program named
// name: each through a Builder of its own, its statements run for the
// packets that reach it (a node without inputs: every packet; else a
// packet one of its inputs passed). A packet that a sink passed (a node no
// other node reads) leaves on port uplink; the others are dropped. Which
// nodes a packet reached and passed is not kept in metadata but computed
// where it is read, from the nodes' In and Pass: no stage waits for it. It
// returns the program, valid, and the nodes' builders.
func Assemble(name string, nodes []Node, uplink uint16) (*Program, []*Builder, error) {
	p := NewProgram(name)
	bs := make([]*Builder, len(nodes))
	outs := make([]Expr, len(nodes)) // the node reached and passed the packet
	read := make([]bool, len(nodes))
	var body []Stmt
	for i, n := range nodes {
		in := Expr(True)
		if len(n.Inputs) > 0 {
			var ins []Expr
			for _, j := range n.Inputs {
				if j < 0 || j >= i {
					return nil, nil, fmt.Errorf("%s: input %d is not an earlier node", n.ID, j)
				}
				read[j] = true
				ins = append(ins, outs[j])
			}
			in = AnyOf(ins...)
		}
		b := &Builder{Prog: p, ID: n.ID, Prefix: Ident(n.ID), In: in, Time: Std("ingress_global_timestamp"), TimeUnit: TimeUnit}
		b.StateOf = func(label string) (map[string]Expr, bool) {
			for k := range i {
				if nodes[k].Label == label && label != "" {
					return bs[k].Exports(), true
				}
			}
			return nil, false
		}
		if err := n.Fn.Lower(b); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", n.ID, err)
		}
		outs[i] = in
		if b.Pass != nil {
			outs[i] = AllOf(in, b.Pass)
		}
		if in == Expr(True) {
			body = append(body, b.Body...)
		} else {
			body = append(body, If{Cond: in, Then: b.Body})
		}
		bs[i] = b
	}
	var sinks []Expr
	for i := range nodes {
		if !read[i] {
			sinks = append(sinks, outs[i])
		}
	}
	body = append(body, If{Cond: AnyOf(sinks...),
		Then: []Stmt{Assign{Dst: Std("egress_spec"), X: C(uint64(uplink), 9)}},
		Else: []Stmt{MarkToDrop{}}})
	p.Ingress = append(p.Ingress, body...)
	if err := p.Validate(); err != nil {
		return nil, nil, fmt.Errorf("program %s: %w", name, err)
	}
	return p, bs, nil
}
