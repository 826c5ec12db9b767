package flowspaces

import "slices"

// Reach answers which streams reach a node: a source reaches itself and
// every node it feeds, directly or through others, and so does a producer
// (its records are a stream of their own), while the streams that reach a
// producer end there. Placement,
// routes, bridges and the plan all ask this; Reach memoises the answers
// for one set of nodes, so build a new one when the flowgraph changes.
// Its zero value is ready to use.
type Reach struct {
	sources map[*Node][]*Node
}

// Sources returns the streams (sources and producers) that reach n, each once, in the
// order of n's inputs (depth first). The slice is shared: do not modify it.
func (r *Reach) Sources(n *Node) []*Node {
	if s, ok := r.sources[n]; ok {
		return s
	}
	if r.sources == nil {
		r.sources = map[*Node][]*Node{}
	}
	var s []*Node
	if n.Class.IsSource() {
		s = append(s, n)
	}
	for _, in := range n.Inputs {
		if in.Producer() {
			if !slices.Contains(s, in) {
				s = append(s, in)
			}
			continue
		}
		for _, x := range r.Sources(in) {
			if !slices.Contains(s, x) {
				s = append(s, x)
			}
		}
	}
	r.sources[n] = s
	return s
}

// Reaches reports whether src's packets reach n.
func (r *Reach) Reaches(src, n *Node) bool { return slices.Contains(r.Sources(n), src) }
