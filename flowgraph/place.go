package flowgraph

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ffpf-go/ffpf/flowspaces"
)

// place finds the flowspace f runs in with FFPF's three rules (§2.1–2.3):
// the lowest flowspace that runs its class, never below any of its inputs,
// and at or above their lowest common successor. The query starts at the
// root and descends through the stubs along the path field merged from
// its inputs' (a capture source's, towards its interface); see
// flowspaces.Place. f's inputs are placed already.
func (rt *Runtime) place(f *Function) error {
	n := f.node
	q := &flowspaces.Query{Node: n, Path: flowspaces.Root}
	if n.Class.IsSource() {
		if n.Class.Interface != nil {
			q.Iface = n.Class.Interface(n.Ctx.Params)
		}
	} else {
		paths := make([]flowspaces.Path, 0, len(n.Inputs)+len(n.Reads))
		for _, in := range n.Inputs {
			paths = append(paths, in.Path)
		}
		for _, w := range n.Reads { // never beneath the state it reads
			paths = append(paths, w.Path)
		}
		if f.hasFloor {
			paths = append(paths, f.floor)
		}
		q.Path = flowspaces.Merge(paths...)
	}
	start := q.Path
	if !flowspaces.Place(rt.root, q) {
		return fmt.Errorf("cannot place %s: no flowspace from %s up can run it: %s", n.ID, q.Bottom.Name(), refusals(q.Trail))
	}
	// Rule 4: a function that reads another's state runs where that state
	// is, so that it reads it as the writer updates it, not a copy. An
	// annotation is no such state: the words travel with the packet, and
	// a bridge carries them up, except from a flowspace whose packets go
	// up as frames alone (a switch's), where they are as state.
	for _, w := range n.Reads {
		if w.Flowspace != q.Placed && (w.Class.Annotates == 0 || flowspaces.AnnotationsStay(w.Flowspace)) {
			why := ""
			if len(q.Trail) > 0 {
				why = " (" + refusals(q.Trail) + ")"
			}
			what := "the state"
			if w.Class.Annotates > 0 {
				what = "the annotation" // written where packets go up as frames alone
			}
			return &stateBelow{w: w, at: q.Path, what: what, msg: fmt.Sprintf("cannot place %s: it reads %s of %s, which runs in %s, and a function runs in the flowspace of the state it reads; %s runs in %s (lowest that can run it)%s",
				n.ID, what, w.ID, w.Flowspace.Name(), n.ID, q.Placed.Name(), why)}
		}
	}
	n.Flowspace, n.Path = q.Placed, q.Path
	n.Ctx.Flowspace = q.Placed.Name()
	f.PassedOver = q.Trail
	f.Reason = fmt.Sprintf("lowest flowspace with class %s %s", n.Class.Name, rt.where(n, q, start))
	switch {
	case f.hasFloor && f.floorAnn:
		f.Reason += fmt.Sprintf(", raised to %s: a function there reads its annotation, which packets going up as frames do not carry", q.Placed.Name())
	case f.hasFloor:
		f.Reason += fmt.Sprintf(", raised to %s: a function that reads its state cannot run below", q.Placed.Name())
	}
	return nil
}

// where says from where placement looked upwards, and why there.
func (rt *Runtime) where(n *flowspaces.Node, q *flowspaces.Query, start flowspaces.Path) string {
	switch {
	case q.Iface != "":
		return fmt.Sprintf("at or above %s, where packets of %s enter", q.Bottom.Name(), q.Iface)
	case n.Class.IsSource():
		return "in userspace on the host, where sources that read files or generate packets run"
	case len(n.Inputs) == 0: // checked without a source
		return "from the root: it has no input yet"
	case len(n.Inputs) == 1:
		in := n.Inputs[0]
		return fmt.Sprintf("at or above %s, where its input %s runs", in.Flowspace.Name(), in.ID)
	}
	lcs := flowspaces.Resolve(rt.root, start)
	ins := make([]string, len(n.Inputs))
	for i, in := range n.Inputs {
		ins[i] = fmt.Sprintf("%s (%s)", in.ID, in.Flowspace.Name())
	}
	list := strings.Join(ins[:len(ins)-1], ", ") + " and " + ins[len(ins)-1]
	return fmt.Sprintf("at or above %s, the lowest common successor of %s", lcs.Name(), list)
}

func refusals(rs []flowspaces.Refusal) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.Flowspace.Name() + ": " + r.Reason.Error()
	}
	return strings.Join(s, "; ")
}

// stateBelow is rule 4's refusal: the state w a function reads runs
// below the lowest flowspace that can run the function (at).
type stateBelow struct {
	w    *flowspaces.Node
	at   flowspaces.Path
	what string // "the state", or "the annotation" (from a switch)
	msg  string
}

func (e *stateBelow) Error() string { return e.msg }

// placeRaising places f; when f cannot run beside a state it reads
// because the state's flowspace cannot hold f (a switch out of stages),
// the state goes up to f's flowspace with its dependants, FFPF's rule
// for what does not fit, and what does not depend on it stays below.
// Only functions of this request (added, in order) move; a state that
// runs already for another request stays, and the refusal is f's.
func (rt *Runtime) placeRaising(f *Function, added []*Function) error {
	for range len(added) + 1 {
		err := rt.place(f)
		sb, ok := err.(*stateBelow)
		if !ok {
			return err
		}
		i := slices.IndexFunc(added, func(g *Function) bool { return g.node == sb.w })
		if i < 0 || added[i].hasFloor && added[i].floor == sb.at {
			return err
		}
		added[i].floor, added[i].hasFloor, added[i].floorAnn = sb.at, true, sb.what == "the annotation"
		// Re-place the state and, in order, every later function of the
		// request that depends on it (its inputs' paths lift it).
		moved := map[*flowspaces.Node]bool{sb.w: true}
		for _, g := range added[i:] {
			dep := g.node == sb.w
			for _, in := range append(slices.Clone(g.node.Inputs), g.node.Reads...) {
				dep = dep || moved[in]
			}
			if !dep {
				continue
			}
			moved[g.node] = true
			if err := rt.place(g); err != nil {
				return err
			}
		}
	}
	return rt.place(f)
}
