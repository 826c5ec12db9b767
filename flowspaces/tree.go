package flowspaces

import (
	"errors"
	"fmt"
)

// Position is a flowspace's place in the hierarchy. Flowspace
// implementations embed it; Attach sets it.
type Position struct {
	level    int
	parent   Flowspace
	children []*Stub
}

// Level implements Flowspace.
func (p *Position) Level() int { return p.level }

// Parent implements Flowspace.
func (p *Position) Parent() Flowspace { return p.parent }

// Children implements Flowspace.
func (p *Position) Children() []*Stub { return p.children }

func (p *Position) position() *Position { return p }

// Strategy is how packets cross a barrier upwards (FFPF §3.1).
type Strategy string

const (
	// CopyOnce copies each packet once, into a PBuf of the flowspace above.
	CopyOnce Strategy = "copy-once"
	// ZeroCopy lets the flowspace above refer to the packets where they
	// are stored (memory mapped across the barrier, or shared in process).
	ZeroCopy Strategy = "zero-copy"
)

// Stub is how a parent flowspace sees a child: the one handle through which
// control requests go down (placement queries, the outputs it needs) and a
// bridge brings packets and state up. A child can only be reached through
// its stub (§3.1: requests are reflected down, there is no central table).
type Stub struct {
	child    Flowspace
	index    int
	Barrier  string   // what separates the two ("user/kernel", "pci", "in-process")
	Strategy Strategy // how its packets cross
}

// Name returns the child's name.
func (s *Stub) Name() string { return s.child.Name() }

// Index is the child's number below its parent: its path subfield value.
func (s *Stub) Index() int { return s.index }

// Child returns the flowspace behind the stub, for a flowspace of the same
// process that builds an in-process bridge to it.
func (s *Stub) Child() Flowspace { return s.child }

// Place reflects a placement query down to the child (see Place).
func (s *Stub) Place(q *Query) bool { return Place(s.child, q) }

// Reaches says how packets of the interface enter the hierarchy in the
// child or beneath it: OwnEntry if a flowspace there has the interface as
// its own, AnyEntry if one can capture any interface.
func (s *Stub) Reaches(iface string) Entry {
	e := s.child.Entry(iface)
	for _, c := range s.child.Children() {
		if e == OwnEntry {
			break
		}
		e = max(e, c.Reaches(iface))
	}
	return e
}

// Attach makes child a child of parent, behind a barrier crossed with the
// given strategy. A hierarchy is at most MaxLevels deep and a flowspace has
// at most MaxChildren children: the path field has no room for more.
func Attach(parent, child Flowspace, barrier string, s Strategy) (*Stub, error) {
	pp, cp := parent.position(), child.position()
	switch {
	case cp.parent != nil:
		return nil, fmt.Errorf("flowspace %s already has a parent (%s)", child.Name(), cp.parent.Name())
	case len(pp.children) >= MaxChildren:
		return nil, fmt.Errorf("flowspace %s cannot have more than %d children: the path field has 4 bits per level, one value reserved", parent.Name(), MaxChildren)
	case pp.level+1 >= MaxLevels:
		return nil, fmt.Errorf("flowspace %s would be at level %d: a hierarchy has at most %d levels (8 path subfields of 4 bits)", child.Name(), pp.level+1, MaxLevels)
	case s != CopyOnce && s != ZeroCopy:
		return nil, fmt.Errorf("unknown bridge strategy %q (want %s or %s)", s, CopyOnce, ZeroCopy)
	}
	if len(cp.children) > 0 {
		return nil, errors.New("flowspaces: attach a child before its own children")
	}
	st := &Stub{child: child, index: len(pp.children), Barrier: barrier, Strategy: s}
	pp.children = append(pp.children, st)
	cp.parent, cp.level = parent, pp.level+1
	return st, nil
}

// StubOf returns the stub through which fs's parent reaches it, or nil at
// the root.
func StubOf(fs Flowspace) *Stub {
	if p := fs.Parent(); p != nil {
		for _, s := range p.Children() {
			if s.child == fs {
				return s
			}
		}
	}
	return nil
}

// Walk calls f for fs and every flowspace beneath it, parents first.
func Walk(fs Flowspace, f func(Flowspace)) {
	f(fs)
	for _, c := range fs.Children() {
		Walk(c.child, f)
	}
}

// Resolve returns the flowspace a path leads to from the root, and how far
// it got: a path through a child that does not exist stops above it.
func Resolve(root Flowspace, p Path) Flowspace {
	fs := root
	for l := 0; l < MaxLevels; l++ {
		v := p.At(l)
		cs := fs.Children()
		if v == Invalid || int(v) >= len(cs) {
			break
		}
		fs = cs[v].child
	}
	return fs
}

// PathOf returns the path of fs: the subfields of its ancestors' stubs.
func PathOf(fs Flowspace) Path {
	p := Root
	for s := StubOf(fs); s != nil; s = StubOf(fs) {
		fs = fs.Parent()
		p = p.With(fs.Level(), uint8(s.index))
	}
	return p
}

// Find returns the flowspace named name in the tree below root.
func Find(root Flowspace, name string) Flowspace {
	var found Flowspace
	Walk(root, func(fs Flowspace) {
		if found == nil && fs.Name() == name {
			found = fs
		}
	})
	return found
}

// Above reports whether a is b or an ancestor of b.
func Above(a, b Flowspace) bool {
	for ; b != nil; b = b.Parent() {
		if a == b {
			return true
		}
	}
	return false
}
