package flowgraph

import (
	"slices"

	"github.com/ffpf-go/ffpf/bridges/inproc"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
)

// Plan is where the functions of the flowgraph run and what connects them:
// what `ffpf place` prints. It is computed from the placement alone, before
// anything is instantiated, with the rules the flowspaces follow when they
// are.
type Plan struct {
	Functions []PlannedFunction `json:"functions"`
	Bridges   []PlannedBridge   `json:"bridges"`
	PBufs     []PlannedPBuf     `json:"pbufs"`
}

// PlannedFunction is one function's place.
type PlannedFunction struct {
	ID        string `json:"id"`
	Label     string `json:"label,omitempty"`
	Class     string `json:"class"`
	Flowspace string `json:"flowspace"`
	Path      string `json:"path"` // the path field, in hex
	Reason    string `json:"reason"`
	// PassedOver are the flowspaces below that could not run it.
	PassedOver []PassedOver `json:"passed_over,omitempty"`
	Inputs     []string     `json:"inputs"`
	// PBufs are the packet buffers the packets it sees are in; "in place"
	// when a flowspace that keeps no PBuf works on them where they arrive.
	PBufs []string `json:"pbufs"`
	// Concurrency, for a function in a Go flowspace, is how it runs when
	// several workers reach it: ordered (one lock), stateless or
	// mergeable (DESIGN.md §15); Ordered says why it runs ordered when its
	// class has another kind.
	Concurrency string `json:"concurrency,omitempty"`
	Ordered     string `json:"ordered,omitempty"`
}

// PassedOver is a flowspace that could not run a function, and why.
type PassedOver struct {
	Flowspace string `json:"flowspace"`
	Reason    string `json:"reason"`
}

// PlannedBridge is a barrier crossing that carries function outputs up.
type PlannedBridge struct {
	From     string   `json:"from"`
	To       string   `json:"to"`
	Barrier  string   `json:"barrier"`
	Strategy string   `json:"strategy"`
	Carries  []string `json:"carries"` // ids of the functions whose output crosses
}

// PlannedPBuf is a packet buffer and what it holds.
type PlannedPBuf struct {
	Name      string `json:"name"`
	Flowspace string `json:"flowspace"`
	Holds     string `json:"holds"`
}

// InPlace is the PBuf name of packets that a flowspace keeps in no PBuf.
const InPlace = "in place"

// Plan returns the placement of the flowgraph's functions.
func (rt *Runtime) Plan() *Plan {
	fns := rt.snapshotFuncs()
	p := &Plan{Functions: []PlannedFunction{}, Bridges: []PlannedBridge{}, PBufs: []PlannedPBuf{}}
	pl := &planner{rt: rt, pbufs: map[string]bool{}, plan: p}
	nodes := make([]*flowspaces.Node, len(fns))
	for i, f := range fns {
		nodes[i] = f.node
	}
	pl.nodes = nodes
	for _, f := range fns {
		n := f.node
		pf := PlannedFunction{ID: f.ID, Label: f.Label, Class: n.Class.Name, Flowspace: n.Flowspace.Name(),
			Path: n.Path.String(), Reason: f.Reason, Inputs: []string{}, PBufs: []string{}}
		for _, r := range f.PassedOver {
			pf.PassedOver = append(pf.PassedOver, PassedOver{r.Flowspace.Name(), r.Reason.Error()})
		}
		for _, in := range n.Inputs {
			pf.Inputs = append(pf.Inputs, in.ID)
		}
		for _, s := range pl.reach.Sources(n) {
			if b := pl.loc(s, n.Flowspace); !slices.Contains(pf.PBufs, b) {
				pf.PBufs = append(pf.PBufs, b)
			}
		}
		if !n.Class.IsSource() && n.Flowspace.Target() == functions.TargetUser {
			k, why := n.Concurrency(nodes)
			pf.Concurrency, pf.Ordered = k.String(), why
		}
		p.Functions = append(p.Functions, pf)
	}
	pl.bridges()
	return p
}

type planner struct {
	rt    *Runtime
	nodes []*flowspaces.Node
	reach flowspaces.Reach
	pbufs map[string]bool
	plan  *Plan
}

// loc is the PBuf that holds source s's packets when they are processed in
// fs, which is s's flowspace or above it (FFPF §4.1, §6.2). Packets are
// stored once, in a PBuf named pbuf:<source>@<flowspace>:
//   - where s runs, its packets are stored there if the flowspace keeps
//     PBufs and a function there uses them; otherwise they are pushed up;
//   - crossing a zero-copy barrier, packets that are in a PBuf stay there
//     and the flowspace above refers to them in place;
//   - otherwise a flowspace that keeps PBufs stores a copy in its own, and
//     one that does not works on them where they arrive, unstored.
func (pl *planner) loc(s *flowspaces.Node, fs flowspaces.Flowspace) string {
	if fs == s.Flowspace {
		if fs.Stores() && pl.usedIn(s, fs) {
			what := "packets of "
			if s.Producer() {
				what = "records of "
			}
			return pl.pbuf("pbuf:"+s.ID+"@"+fs.Name(), fs, what+s.ID)
		}
		return InPlace
	}
	child := fs.Children()[s.Path.At(fs.Level())].Child()
	below := pl.loc(s, child)
	if below != InPlace && flowspaces.StubOf(child).Strategy == flowspaces.ZeroCopy {
		return below
	}
	if fs.Stores() {
		return pl.pbuf("pbuf:"+s.ID+"@"+fs.Name(), fs, "packets of "+s.ID+", copied up from "+child.Name())
	}
	return InPlace
}

// usedIn reports whether a function in fs uses s's packets.
func (pl *planner) usedIn(s *flowspaces.Node, fs flowspaces.Flowspace) bool {
	for _, n := range pl.nodes {
		if n != s && n.Flowspace == fs && pl.reach.Reaches(s, n) {
			return true
		}
	}
	return false
}

func (pl *planner) pbuf(name string, fs flowspaces.Flowspace, holds string) string {
	if !pl.pbufs[name] {
		pl.pbufs[name] = true
		pl.plan.PBufs = append(pl.plan.PBufs, PlannedPBuf{name, fs.Name(), holds})
	}
	return name
}

// bridges lists the crossings: a function's output goes up from its
// flowspace through every barrier to each flowspace above that uses it.
func (pl *planner) bridges() {
	type edge struct{ from, to flowspaces.Flowspace }
	carries := map[edge][]string{}
	var order []edge
	for _, n := range pl.nodes {
		for _, in := range n.Inputs {
			for fs := in.Flowspace; fs != n.Flowspace && fs.Parent() != nil; fs = fs.Parent() {
				e := edge{fs, fs.Parent()}
				if _, ok := carries[e]; !ok {
					order = append(order, e)
				}
				if !slices.Contains(carries[e], in.ID) {
					carries[e] = append(carries[e], in.ID)
				}
			}
		}
	}
	for _, e := range order {
		s := flowspaces.StubOf(e.from)
		pl.plan.Bridges = append(pl.plan.Bridges, PlannedBridge{From: e.from.Name(), To: e.to.Name(),
			Barrier: s.Barrier, Strategy: string(s.Strategy), Carries: carries[e]})
	}
}

// BridgeState is a bridge's counters, as `ffpf run --json` prints them:
// In = Out + Dropped; Copied of them were copied across, the rest referred
// to in place.
type BridgeState struct {
	From     string `json:"from"`
	To       string `json:"to"`
	Barrier  string `json:"barrier"`
	Strategy string `json:"strategy"`
	In       uint64 `json:"in"`
	Out      uint64 `json:"out"`
	Dropped  uint64 `json:"dropped"`
	Copied   uint64 `json:"copied"`
	// Lanes are the packets that came up on each lane of a bridge of
	// several, each read by a worker of its own (DESIGN.md §15).
	Lanes []uint64 `json:"lanes,omitempty"`
}

// Bridges returns the counters of every bridge built, parents first.
func (rt *Runtime) Bridges() []BridgeState {
	out := []BridgeState{}
	for _, fs := range rt.all() {
		u, ok := fs.(flowspaces.Receiver)
		if !ok {
			continue
		}
		for _, st := range fs.Children() {
			b := u.Bridges()[st.Name()]
			if b == nil {
				continue
			}
			s := b.Stats()
			out = append(out, BridgeState{From: st.Name(), To: fs.Name(), Barrier: st.Barrier, Strategy: used(st.Strategy, s),
				In: s.In, Out: s.Out, Dropped: s.Dropped, Copied: s.Copied, Lanes: s.Lanes})
		}
	}
	return out
}

// used is the strategy a bridge used, as its counts tell: the barrier's,
// unless packets crossed otherwise. A zero-copy barrier copies packets
// that are in no PBuf (a flowspace that processes in place, a kernel ring
// buffer), so that the flowspace above can keep them.
func used(declared flowspaces.Strategy, s inproc.Stats) string {
	switch {
	case s.Copied > 0 && s.Referred > 0:
		return string(flowspaces.ZeroCopy) + "+" + string(flowspaces.CopyOnce)
	case s.Copied > 0:
		return string(flowspaces.CopyOnce)
	case s.Referred > 0:
		return string(flowspaces.ZeroCopy)
	}
	return string(declared)
}

// Attachments says, per flowspace that attaches programs to interfaces
// (the eBPF ones), where and how it did: native or generic XDP, TCX.
func (rt *Runtime) Attachments() map[string][]string {
	out := map[string][]string{}
	for _, fs := range rt.all() {
		if a, ok := fs.(interface{ Attachments() []string }); ok {
			if l := a.Attachments(); len(l) > 0 {
				out[fs.Name()] = l
			}
		}
	}
	return out
}
