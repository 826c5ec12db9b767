package flowgraph

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/lang"
)

// lnode is a function of one request before it is overlaid on the graph.
type lnode struct {
	class  *functions.Class
	params functions.Params
	label  string
	pos    lang.Pos
	argPos lang.Pos // of the first argument's value: what a class's Validate usually blames
	inputs []*lnode
	reads  []*lnode            // the functions whose state it reads, by label
	lt     functions.LinkType  // of its output
	inLT   functions.LinkType  // of its input (a producer's differ)
	caps   []functions.Capture // the captures whose packets reach it
	key    string              // identity, computed by overlay
	fn     *Function           // its function in the flowgraph, after overlay
}

// name is how messages refer to the node: its label, or its class.
func (n *lnode) name() string {
	if n.label != "" {
		return n.label + ":" + n.class.Name
	}
	return n.class.Name
}

// ports are a term's inputs and outputs: "A > B" connects A's outputs to
// B's inputs.
type ports struct{ ins, outs []*lnode }

// builder evaluates the AST of one request into lnodes and edges.
type builder struct {
	src    string
	reg    *functions.Registry
	nodes  []*lnode
	memo   map[lang.Term]ports
	labels map[string]lang.Term
	active map[lang.Term]bool
	bound  map[*lang.Func]functions.Params
	unfed  bool // chains may start without a source (ffpf check)
}

func (b *builder) errorf(p lang.Pos, format string, args ...any) error {
	return &lang.Error{Pos: p, Msg: fmt.Sprintf(format, args...), Src: b.src}
}

func (b *builder) collectLabels(cs []*lang.Chain) {
	for _, c := range cs {
		for _, t := range c.Terms {
			switch t := t.(type) {
			case *lang.Func:
				if t.Label != "" {
					b.labels[t.Label] = t
				}
			case *lang.Group:
				if t.Label != "" {
					b.labels[t.Label] = t
				}
				b.collectLabels(t.Chains)
			}
		}
	}
}

func (b *builder) chain(c *lang.Chain) (ports, error) {
	var first, cur ports
	for i, t := range c.Terms {
		p, err := b.term(t)
		if err != nil {
			return ports{}, err
		}
		if i == 0 {
			first = p
		} else if err := b.connect(cur.outs, p.ins, t.TermPos()); err != nil {
			return ports{}, err
		}
		cur = p
	}
	return ports{ins: first.ins, outs: cur.outs}, nil
}

func (b *builder) connect(outs, ins []*lnode, at lang.Pos) error {
	for _, in := range ins {
		for _, o := range outs {
			if o == in {
				return b.errorf(at, "%s feeds itself: a flowgraph cannot have cycles", in.class.Name)
			}
			if !slices.Contains(in.inputs, o) {
				in.inputs = append(in.inputs, o)
			}
		}
	}
	return nil
}

func (b *builder) term(t lang.Term) (ports, error) {
	if r, ok := t.(*lang.Ref); ok {
		def, ok := b.labels[r.Name]
		if !ok {
			return ports{}, b.errorf(r.Pos, "label %q is not defined in this request", r.Name)
		}
		if b.active[def] {
			return ports{}, b.errorf(r.Pos, "label %q refers to the term that contains it: a flowgraph cannot have cycles", r.Name)
		}
		t = def
	}
	if p, ok := b.memo[t]; ok {
		return p, nil
	}
	b.active[t] = true
	defer delete(b.active, t)
	var p ports
	switch t := t.(type) {
	case *lang.Func:
		n, err := b.fn(t)
		if err != nil {
			return ports{}, err
		}
		p = ports{ins: []*lnode{n}, outs: []*lnode{n}}
	case *lang.Group:
		for _, c := range t.Chains {
			q, err := b.chain(c)
			if err != nil {
				return ports{}, err
			}
			p.ins = appendNew(p.ins, q.ins...)
			p.outs = appendNew(p.outs, q.outs...)
		}
	}
	b.memo[t] = p
	return p, nil
}

func (b *builder) fn(f *lang.Func) (*lnode, error) {
	c, ok := b.reg.Lookup(f.Class)
	if !ok {
		return nil, b.errorf(f.ClassPos, "unknown class %q", f.Class)
	}
	args := make([]functions.Arg, len(f.Args))
	for i, a := range f.Args {
		args[i] = functions.Arg{Key: a.Key, Value: rawOf(a.Value)}
	}
	params, err := c.Bind(args)
	if err != nil {
		pos := f.ClassPos
		if be, ok := err.(*functions.BindError); ok && be.Arg >= 0 {
			pos = f.Args[be.Arg].Value.Pos
		}
		return nil, b.errorf(pos, "%v", err)
	}
	n := &lnode{class: c, params: params, label: f.Label, pos: f.Pos, argPos: f.Pos}
	if len(f.Args) > 0 {
		n.argPos = f.Args[0].Value.Pos
	}
	b.bound[f] = params
	b.nodes = append(b.nodes, n)
	return n, nil
}

func rawOf(v lang.Value) functions.Raw {
	k := functions.RawWord
	switch v.Kind {
	case lang.String:
		k = functions.RawString
	case lang.Number:
		k = functions.RawNumber
	}
	return functions.Raw{Kind: k, Text: v.Text, Unit: v.Unit}
}

// resolveReads gives every function that reads named state the functions
// it reads: labels of functions of the same request, each with state.
func (b *builder) resolveReads() error {
	byLabel := map[string]*lnode{}
	for _, n := range b.nodes {
		if n.label != "" {
			byLabel[n.label] = n
		}
	}
	for _, n := range b.nodes {
		if n.class.Reads == nil {
			continue
		}
		refs, err := n.class.Reads(n.params)
		if err != nil {
			return b.errorf(n.argPos, "%v", err)
		}
		for _, ref := range refs {
			l, name, _ := strings.Cut(ref, ".")
			w, ok := byLabel[l]
			switch {
			case !ok && b.labels[l] != nil:
				return b.errorf(n.argPos, "%s reads the state of %q, which names a group, not a function", n.name(), l)
			case !ok:
				return b.errorf(n.argPos, "%s reads the state of %q, but no function of this request is labelled %q", n.name(), l, l)
			case w == n:
				return b.errorf(n.argPos, "%s reads its own state: a function reads the state of another", n.name())
			case w.class.State == nil && w.class.Annotates == 0:
				return b.errorf(n.argPos, "%s reads the state of %s, which keeps none", n.name(), w.name())
			}
			if names := w.class.Readable; name != "" && names != nil && !slices.Contains(names(w.params), name) {
				msg := fmt.Sprintf("%s reads %s.%s, but %s has no %q to read (it has %s)",
					n.name(), l, name, w.name(), name, strings.Join(names(w.params), ", "))
				if s, ok := lang.Suggest(name, names(w.params)); ok {
					msg += fmt.Sprintf("; did you mean %s.%s?", l, s)
				}
				return b.errorf(n.argPos, "%s", msg)
			}
			if w.class.Annotates > 0 && !feeds(w, n) {
				return b.errorf(n.argPos, "%s reads the annotation %s writes on each packet, so it must come after %s on the packets' way (%s > ... > %s)",
					n.name(), w.name(), w.name(), w.name(), n.name())
			}
			if !slices.Contains(n.reads, w) {
				n.reads = append(n.reads, w)
			}
		}
	}
	return nil
}

// feeds reports whether a's output reaches b through inputs.
func feeds(a, b *lnode) bool {
	for _, in := range b.inputs {
		if in == a || feeds(a, in) {
			return true
		}
	}
	return false
}

// checkGraph validates arity and acyclicity and returns the nodes in
// topological order.
func (b *builder) checkGraph() ([]*lnode, error) {
	for _, n := range b.nodes {
		c := n.class
		switch k := len(n.inputs); {
		case c.IsSource() && k > 0:
			return nil, b.errorf(n.pos, "%s is a source: nothing can feed it", c.Name)
		case k == 0 && !c.IsSource() && b.unfed:
			// checked without a source: the run's default source will feed it
		case k < c.MinInputs:
			return nil, b.errorf(n.pos, "%s needs at least %d input(s), has %d", c.Name, c.MinInputs, k)
		case c.MaxInputs >= 0 && k > c.MaxInputs:
			return nil, b.errorf(n.pos, "%s takes at most %d input(s), has %d", c.Name, c.MaxInputs, k)
		}
	}
	state := map[*lnode]int{} // 1 visiting, 2 done
	order := make([]*lnode, 0, len(b.nodes))
	var path []*lnode
	var visit func(n *lnode) error
	visit = func(n *lnode) error {
		switch state[n] {
		case 1:
			// path runs against the data (each node is an input of the one
			// before it), so the cycle in data order is n, then path back
			// to n.
			names := []string{n.name()}
			for i := len(path) - 1; path[i] != n; i-- {
				names = append(names, path[i].name())
			}
			names = append(names, n.name())
			return b.errorf(n.pos, "cycle %s: a flowgraph cannot have cycles", strings.Join(names, " > "))
		case 2:
			return nil
		}
		state[n] = 1
		path = append(path, n)
		for _, in := range n.inputs {
			if err := visit(in); err != nil {
				return err
			}
		}
		for _, w := range n.reads { // a writer runs before its readers
			if err := visit(w); err != nil {
				return err
			}
		}
		path = path[:len(path)-1]
		state[n] = 2
		order = append(order, n)
		return nil
	}
	for _, n := range b.nodes {
		if err := visit(n); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// MaxState is the most state (MBuf bytes) one function may keep: a
// sketch's dimensions come from its parameters, and a typo there must
// fail at populate, not exhaust the machine's memory at instantiation.
const MaxState = 1 << 30

// linkTypes gives every node the link type of its packets and lets classes
// validate themselves with it; sources report theirs through Validate.
func (b *builder) linkTypes(order []*lnode, snaplen int) error {
	for _, n := range order {
		ctx := &functions.Context{Params: n.params, Snaplen: snaplen, Flowspace: "user"}
		if !n.class.IsSource() {
			for i, in := range n.inputs {
				if i > 0 && in.lt != n.inputs[0].lt {
					return b.errorf(n.pos, "the inputs of %s carry different link types (%s and %s)",
						n.class.Name, n.inputs[0].lt, in.lt)
				}
			}
			ctx.LinkType = functions.LinkEthernet // assumed when checking without a source
			if len(n.inputs) > 0 {
				ctx.LinkType = n.inputs[0].lt
			}
			for _, in := range n.inputs {
				for _, c := range in.caps {
					if !slices.Contains(ctx.Captures, c) {
						ctx.Captures = append(ctx.Captures, c)
					}
				}
			}
		}
		if ctx.LinkType == functions.LinkRecord && !n.class.TakesRecords && len(n.inputs) > 0 {
			return b.errorf(n.pos, "%s reads packet headers, but %s feeds it records: give it packets (place it before the producer, or on another branch)",
				n.name(), n.inputs[0].name())
		}
		if _, size, err := n.class.State.Layout(functions.TargetUser, n.params); err != nil {
			return b.errorf(n.argPos, "%s: %v", n.name(), err)
		} else if size > MaxState {
			return b.errorf(n.argPos, "%s would keep %d MiB of state, more than the %d MiB a function may: make it smaller",
				n.name(), size>>20, MaxState>>20)
		}
		producer := n.class.IsProducer(n.params)
		if producer {
			ctx.Output = functions.LinkRecord
		}
		// A file a function reads is a regular file or a FIFO: a
		// directory or a device (/dev/zero) is refused here, at once.
		var bad error
		n.params.Files(func(path string, use functions.FileUse) {
			if use == functions.FileRead && bad == nil {
				bad = functions.CheckStream(path)
			}
		})
		if bad != nil {
			return b.errorf(n.argPos, "%s: %v", n.name(), bad)
		}
		if n.class.Validate != nil {
			if err := n.class.Validate(ctx); err != nil {
				return b.errorf(n.argPos, "%v", err)
			}
		}
		n.lt, n.inLT = ctx.LinkType, ctx.LinkType
		if producer {
			n.lt = ctx.Output
		}
		n.caps = ctx.Captures
		if n.class.IsSource() && len(n.caps) == 0 {
			// A source that does not describe its capture is taken as a
			// live one of its link type (gen, dev).
			n.caps = []functions.Capture{functions.LiveCapture(n.lt)}
		}
	}
	return nil
}

func appendNew(list []*lnode, ns ...*lnode) []*lnode {
	for _, n := range ns {
		if !slices.Contains(list, n) {
			list = append(list, n)
		}
	}
	return list
}

// identity is what makes two functions the same function: class, canonical
// parameters, inputs and flowgroup (FFPF §6.2 reuses only identical ones).
// It is a digest of those, the inputs by their own identity, so that it is
// known before the request touches the flowgraph. n's inputs must have theirs.
// solo, when set, names the one request whose function it is (a request
// with a packet limit of its own shares none).
func identity(n *lnode, group, solo string) string {
	ins := make([]string, len(n.inputs))
	for i, in := range n.inputs {
		ins[i] = in.key
	}
	sort.Strings(ins)
	// The state it reads is part of what it is: two predicates over the
	// state of different sketches are different functions.
	var reads []string
	for _, w := range n.reads {
		reads = append(reads, w.label+"="+w.key)
	}
	sort.Strings(reads)
	h := sha256.New()
	for _, s := range []string{n.class.Name, n.params.Canonical(), strings.Join(ins, ","), group, strings.Join(reads, ",")} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	if solo != "" {
		h.Write([]byte(solo))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
