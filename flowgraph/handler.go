package flowgraph

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
)

// Call runs the handler named handler of the function fn (its label in
// the request, or its id) with arg, and returns its result. Only functions
// of the request's flowgroup are reachable: one of another group is
// reported as absent. The handler runs between two batches, under the
// function's lock, so a running flowgraph keeps counting around it.
func (r *Request) Call(fn, handler, arg string) (any, error) {
	f := r.find(fn)
	if f == nil {
		return nil, fmt.Errorf("no function %s in flowgroup %q", fn, r.group)
	}
	if !f.ready.Load() {
		return nil, fmt.Errorf("%s is not instantiated yet: call its handlers after Instantiate", f.ID)
	}
	n := f.node
	hs, ok := n.Function.(functions.Handlers)
	if !ok {
		return nil, fmt.Errorf("%s (class %s) has no handlers", f.ID, n.Class.Name)
	}
	var names []string
	for _, h := range hs.Handlers() {
		if h.Name != handler {
			names = append(names, h.Name)
			continue
		}
		l, ok := n.Flowspace.(flowspaces.Locker)
		if !ok {
			return nil, fmt.Errorf("%s runs in %s, whose functions' handlers cannot be called yet", f.ID, n.Flowspace.Name())
		}
		unlock := l.Lock(n)
		defer unlock()
		return h.Call(arg)
	}
	slices.Sort(names)
	return nil, fmt.Errorf("%s has no handler %q (it has %s)", f.ID, handler, strings.Join(names, ", "))
}

// find returns the request's function labelled or named fn, if it is of
// the request's flowgroup.
func (r *Request) find(fn string) *Function {
	for _, f := range r.funcs {
		if (f.Label == fn || f.ID == fn) && f.group == r.group {
			return f
		}
	}
	return nil
}
