package flowspaces

import "fmt"

// Query asks the hierarchy where a function can run (FFPF §2.3).
type Query struct {
	Node *Node
	// Iface is set for a source that captures from a network interface: it
	// descends towards the flowspace where that interface's packets enter.
	// Other queries descend along Path.
	Iface string
	// Path is, on the way in, the route the function may take: the merge
	// of its inputs' paths (Root for a source that reads in userspace). On
	// success it is the function's path field, Invalid below its flowspace.
	Path Path

	// Results.
	Placed Flowspace
	Bottom Flowspace // the lowest flowspace the query reached
	Trail  []Refusal // flowspaces that could not run it, lowest first
}

// Refusal is one flowspace's reason for not running a function.
type Refusal struct {
	Flowspace Flowspace
	Reason    error
}

// Place runs the placement protocol from fs down: the query descends along
// its path field (or, for a capture source, towards its interface) until it
// reaches the lowest level or a subfield marked Invalid, then bubbles up
// until a flowspace can run the function; that flowspace marks its own
// subfield Invalid, so that nothing depending on the function is placed
// below it. Each flowspace talks only to its own children's stubs. Place
// reports whether fs or a flowspace beneath it took the function.
func Place(fs Flowspace, q *Query) bool {
	l := fs.Level()
	next := -1
	if q.Iface != "" {
		// Towards the flowspace that has the interface as its own, else
		// towards one that can capture any.
		best := NoEntry
		for i, c := range fs.Children() {
			if e := c.Reaches(q.Iface); e > best {
				next, best = i, e
			}
		}
	} else if v := q.Path.At(l); v != Invalid && int(v) < len(fs.Children()) {
		next = int(v)
	}
	if next >= 0 {
		q.Path = q.Path.With(l, uint8(next))
		if fs.Children()[next].Place(q) {
			return true
		}
	} else if q.Bottom == nil {
		q.Bottom = fs
	}
	if err := host(fs, q.Node); err != nil {
		q.Trail = append(q.Trail, Refusal{fs, err})
		return false
	}
	q.Path = q.Path.Cut(l)
	q.Placed = fs
	return true
}

// host asks fs whether it can run n: a source with a packet limit of its
// own runs only where sources read from a Budget (Limited).
func host(fs Flowspace, n *Node) error {
	if _, ok := fs.(Limited); n.Budget != nil && !ok {
		return fmt.Errorf("its request has a packet limit of its own, and %s does not count one", fs.Name())
	}
	return fs.Host(n)
}
