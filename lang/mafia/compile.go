package mafia

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ffpf-go/ffpf/lang"
)

// Roles are the places on a path a section runs (at ROLE:).
var Roles = []string{"first_hop", "intermediate", "last_hop"}

// Options are what a compilation needs beyond the program.
type Options struct {
	// Ctrl is the ffpf source the ctrl stream reads, e.g.
	// (pcap,file="queries.pcap"); empty, a flow on ctrl is refused.
	Ctrl string
}

// Result is a compiled program: one ffpf request, or one per role when the
// program has sections (at ROLE:).
type Result struct {
	Requests []*Request
}

// Request is the ffpf request of one role ("" when the program has no
// sections).
type Request struct {
	Role string
	Req  *lang.Request
	// Origins are the positions in the program of the steps each of the
	// request's functions comes from, in the order Format prints them.
	Origins []Pos
	// Copies, in the same order, tells the functions that work on a copy
	// of the packets (their flow's stream is one duplicate started): on a
	// path of switches the packet forwarded is left as it is, and what
	// they write goes into the copy a collect sends.
	Copies []bool
}

// Expr is the request's canonical ffpf expression.
func (r *Request) Expr() string { return lang.Format(r.Req) }

// Check parses nothing: it compiles p and reports the first error (a
// *lang.Error), for callers that want only the verdict.
func Check(p *Program, o Options) error {
	_, err := Compile(p, o)
	return err
}

// Compile compiles a program into ffpf requests of ffpf's classes. The
// error is a *lang.Error: an undeclared name, a type error, a stream never
// consumed, branches of + that write one state, a state read before (or
// beside) its update, a form no class holds.
func Compile(p *Program, o Options) (*Result, error) {
	sym, err := declare(p)
	if err != nil {
		return nil, err
	}
	c := &compiler{src: p.src, sym: sym, opt: o}
	return c.program(p)
}

type compiler struct {
	src string
	sym *symbols
	opt Options

	// per section
	role       string
	streams    map[string]bool     // every stream name of the section
	defined    map[string]*Op      // duplicate(name) → its op
	copies     map[*lang.Func]bool // a function on a copy of the packets
	points     map[string]*point   // where each stream starts
	scoped     map[string]*scoped  // packet-scoped BloomFilters
	storeValue map[string]Expr     // a store Sketch's set value
	updates    map[string]*Op      // state → its update
	holder     map[string]string   // state → the class that holds it
	updNode    map[string]int      // state → the node that updates it
	nodes      []*node
	window     string
	ctrlHead   *lang.Func
	collectors map[string]int // endpoint → its export's node
}

// node is one function of the request being built.
type node struct {
	fn    *lang.Func
	ins   []int
	at    Pos
	reads []read
	self  *state // the state it updates (its old value it reads itself)
}

// point is where a step's packets come from: the functions whose outputs
// feed it, and the term to label when a stream starts there.
type point struct {
	outs   []int
	term   lang.Term // nil at a stream's start
	stream string    // at a stream's start: the stream
}

// scoped is a BloomFilter reset after every packet: no state, its bits
// are those of the packet's key (and what init gave it).
type scoped struct {
	init     string
	inserted bool
}

const (
	srcPkts = -1
	srcCtrl = -2
)

func (c *compiler) errorf(p Pos, format string, args ...any) error {
	return errorf(c.src, p, format, args...)
}

// section is a role's statements.
type section struct {
	role   string
	at     Pos
	flows  []*Flow
	window Expr
}

func (c *compiler) program(p *Program) (*Result, error) {
	var global Expr
	var secs []*section
	cur := &section{}
	byRole := map[string]*section{}
	hasSections := false
	for _, s := range p.Stmts {
		if _, ok := s.(*Section); ok {
			hasSections = true
		}
	}
	for _, s := range p.Stmts {
		switch s := s.(type) {
		case *Section:
			if !slices.Contains(Roles, s.Role) {
				if m, ok := lang.Suggest(s.Role, Roles); ok {
					return nil, c.errorf(s.Pos, "unknown role %s (did you mean %s?)", s.Role, m)
				}
				return nil, c.errorf(s.Pos, "unknown role %s: a section runs at first_hop, intermediate or last_hop", s.Role)
			}
			if byRole[s.Role] == nil {
				byRole[s.Role] = &section{role: s.Role, at: s.Pos}
				secs = append(secs, byRole[s.Role])
			}
			cur = byRole[s.Role]
		case *Window:
			if cur.role == "" {
				if global != nil {
					return nil, c.errorf(s.Pos, "a second window(...) for the whole program")
				}
				global = s.Dur
			} else {
				if cur.window != nil {
					return nil, c.errorf(s.Pos, "a second window(...) for %s", cur.role)
				}
				cur.window = s.Dur
			}
		case *Flow:
			if hasSections && cur.role == "" {
				return nil, c.errorf(s.Pos, "this flow comes before the first at ROLE:, so it runs nowhere")
			}
			cur.flows = append(cur.flows, s)
		}
	}
	if !hasSections {
		secs = []*section{cur}
	}
	if hasSections && len(cur.flows) == 0 && cur.role == "" && len(secs) == 0 {
		return nil, c.errorf(Pos{Line: 1, Col: 1}, "the program has no flow")
	}
	res := &Result{}
	for _, sec := range secs {
		if sec.window == nil {
			sec.window = global
		}
		if len(sec.flows) == 0 {
			at := sec.at
			if sec.role == "" {
				at = Pos{Offset: len(c.src), Line: 1, Col: 1}
				if len(p.Stmts) > 0 {
					at = p.Stmts[len(p.Stmts)-1].StmtPos()
				}
				return nil, c.errorf(at, "the program has no flow (pkts >> ...)")
			}
			return nil, c.errorf(at, "at %s: has no flow", sec.role)
		}
		r, err := c.section(sec)
		if err != nil {
			return nil, err
		}
		res.Requests = append(res.Requests, r)
	}
	return res, nil
}

// section compiles one role's flows into a request.
func (c *compiler) section(sec *section) (*Request, error) {
	c.role = sec.role
	c.streams = map[string]bool{"pkts": true, "ctrl": true}
	c.defined = map[string]*Op{}
	c.copies = map[*lang.Func]bool{}
	c.points = map[string]*point{"pkts": {outs: []int{srcPkts}, stream: "pkts"}}
	c.scoped = map[string]*scoped{}
	c.storeValue = map[string]Expr{}
	c.updates = map[string]*Op{}
	c.holder = map[string]string{}
	c.updNode = map[string]int{}
	c.nodes = nil
	c.window = ""
	c.ctrlHead = nil
	c.collectors = map[string]int{}
	if sec.window != nil {
		w, err := c.sym.duration(sec.window)
		if err != nil {
			return nil, err
		}
		c.window = w
	}
	// Per flow: a window of its own (pkts.window(5s)).
	flowWindow := map[*Flow]string{}
	for _, f := range sec.flows {
		if f.Window != nil {
			w, err := c.sym.duration(f.Window)
			if err != nil {
				return nil, err
			}
			flowWindow[f] = w
		}
	}
	if err := c.survey(sec.flows); err != nil {
		return nil, err
	}
	// Flows on a stream run once its start is known: pkts and ctrl first,
	// then the streams duplicate starts, in order.
	var chains []*lang.Chain
	pending := slices.Clone(sec.flows)
	consumed := map[string]bool{}
	windowOf := map[string]string{} // state → its flow's window
	for len(pending) > 0 {
		progress := false
		for i := 0; i < len(pending); i++ {
			f := pending[i]
			if f.Stream == "ctrl" && c.points["ctrl"] == nil {
				if err := c.ctrl(f.Pos); err != nil {
					return nil, err
				}
			}
			start := c.points[f.Stream]
			if start == nil {
				if c.defined[f.Stream] == nil {
					var names []string
					for n := range c.defined {
						names = append(names, n)
					}
					sort.Strings(names)
					if m, ok := lang.Suggest(f.Stream, append(names, "pkts", "ctrl")); ok {
						return nil, c.errorf(f.Pos, "stream %s is not defined (did you mean %s?): a stream is pkts, ctrl or one duplicate(NAME) starts", f.Stream, m)
					}
					return nil, c.errorf(f.Pos, "stream %s is not defined: a stream is pkts, ctrl or one duplicate(NAME) starts", f.Stream)
				}
				continue // its duplicate is in a flow not compiled yet
			}
			consumed[f.Stream] = true
			before := len(c.nodes)
			_, terms, err := c.comp(f.Body, *start, nil)
			if err != nil {
				return nil, err
			}
			for _, n := range c.nodes[before:] {
				c.copies[n.fn] = f.Stream != "pkts" && f.Stream != "ctrl"
			}
			if w := flowWindow[f]; w != "" {
				for _, n := range c.nodes[before:] {
					if n.self != nil {
						windowOf[n.self.name] = w
					}
				}
			}
			if head := c.head(start); head != nil {
				terms = append([]lang.Term{head}, terms...)
			}
			if len(terms) > 0 && !(len(terms) == 1 && isRef(terms[0])) {
				chains = append(chains, &lang.Chain{Terms: terms})
			}
			pending = slices.Delete(pending, i, i+1)
			i--
			progress = true
		}
		if !progress {
			f := pending[0]
			return nil, c.errorf(f.Pos, "stream %s starts only in a flow that it feeds itself (a cycle of duplicates)", f.Stream)
		}
	}
	for name, op := range c.defined {
		if !consumed[name] {
			return nil, c.errorf(op.Args[0].ExprPos(), "stream %s is never consumed: add a flow %s >> ... (collect(...), say)", name, name)
		}
	}
	if err := c.checkReads(); err != nil {
		return nil, err
	}
	if err := c.applyWindows(windowOf); err != nil {
		return nil, err
	}
	c.switchPositions()
	if len(chains) == 0 {
		return nil, c.errorf(sec.flows[0].Pos, "the flows compile to no function: they update no state and collect nothing")
	}
	req := &lang.Request{Chains: chains}
	// Parse the canonical text back: that is the request ffpf gets, with
	// its positions, and it checks that what was built is well formed.
	text := lang.Format(req)
	parsed, err := lang.Parse(text)
	if err != nil {
		return nil, fmt.Errorf("mafia: the compiled request does not parse (%v): %s", err, text)
	}
	r := &Request{Role: sec.role, Req: parsed}
	r.Origins, r.Copies = c.origins(chains)
	return r, nil
}

func ts0(ts []lang.Term) lang.Term {
	if len(ts) == 0 {
		return nil
	}
	return ts[0]
}

func isRef(t lang.Term) bool { _, ok := t.(*lang.Ref); return ok }

// ctrl makes the ctrl stream's source.
func (c *compiler) ctrl(at Pos) error {
	if c.opt.Ctrl == "" {
		return c.errorf(at, "ctrl is the packets a controller sends the switch: give their source (--ctrl FILE), or read the state with --json instead")
	}
	r, err := lang.Parse(c.opt.Ctrl)
	if err != nil || len(r.Chains) != 1 || len(r.Chains[0].Terms) != 1 {
		return c.errorf(at, "the ctrl stream's source %q is not one function", c.opt.Ctrl)
	}
	f, ok := r.Chains[0].Terms[0].(*lang.Func)
	if !ok {
		return c.errorf(at, "the ctrl stream's source %q is not one function", c.opt.Ctrl)
	}
	c.ctrlHead = f
	c.points["ctrl"] = &point{outs: []int{srcCtrl}, stream: "ctrl"}
	return nil
}

// head is the term a flow on a stream starts with: nothing for pkts (the
// run's default source), ctrl's source, or a reference to the term where
// duplicate started the stream.
func (c *compiler) head(p *point) lang.Term {
	if p.term != nil {
		return &lang.Ref{Name: label(p.term)}
	}
	if p.stream == "ctrl" {
		if c.ctrlHead.Label == "" {
			c.ctrlHead.Label = "ctrl"
			return c.ctrlHead
		}
		return &lang.Ref{Name: c.ctrlHead.Label}
	}
	return nil
}

func label(t lang.Term) string {
	switch t := t.(type) {
	case *lang.Func:
		return t.Label
	case *lang.Group:
		return t.Label
	}
	return ""
}

func setLabel(t lang.Term, l string) {
	switch t := t.(type) {
	case *lang.Func:
		if t.Label == "" {
			t.Label = l
		}
	case *lang.Group:
		if t.Label == "" {
			t.Label = l
		}
	}
}

// survey finds, before anything is compiled, the streams duplicate
// starts, the state each op updates (refusing a state updated in two
// places, and branches of + that write one state), the BloomFilters reset
// after each packet and the values store Sketches are set to.
func (c *compiler) survey(flows []*Flow) error {
	for _, f := range flows {
		if err := c.surveyComp(f.Body); err != nil {
			return err
		}
	}
	for name, st := range c.sym.states {
		if st.loc != nil && c.scoped[name] == nil && c.updates[name] != nil {
			return c.errorf(st.keyAt, "%s is kept per %s, a switch's own values: such a BloomFilter holds one packet's bits, reset after it (%s.reset())", name, strings.Join(st.loc, ", "), name)
		}
	}
	return nil
}

func (c *compiler) surveyComp(cp Comp) error {
	switch cp := cp.(type) {
	case *Seq:
		for _, s := range cp.Steps {
			if err := c.surveyComp(s); err != nil {
				return err
			}
		}
		return c.surveyScoped(cp)
	case *Par:
		if err := c.conflicts(cp); err != nil {
			return err
		}
		for _, b := range cp.Branches {
			if err := c.surveyComp(b); err != nil {
				return err
			}
		}
	case *Op:
		return c.surveyOp(cp)
	}
	return nil
}

// writes returns the states cp updates, with where.
func (c *compiler) writes(cp Comp, out map[string]*Op) {
	switch cp := cp.(type) {
	case *Seq:
		for _, s := range cp.Steps {
			c.writes(s, out)
		}
	case *Par:
		for _, b := range cp.Branches {
			c.writes(b, out)
		}
	case *Op:
		if t := updated(cp); t != "" && out[t] == nil {
			out[t] = cp
		}
	}
}

// conflicts refuses a + two of whose branches write the same state.
func (c *compiler) conflicts(p *Par) error {
	seen := map[string]*Op{}
	for _, b := range p.Branches {
		w := map[string]*Op{}
		c.writes(b, w)
		names := make([]string, 0, len(w))
		for n := range w {
			names = append(names, n)
		}
		sort.Slice(names, func(i, j int) bool { return w[names[i]].Pos.Offset < w[names[j]].Pos.Offset })
		for _, n := range names {
			if first := seen[n]; first != nil {
				return c.errorf(w[n].Pos, "the branches of the + at %s both write %s (here and at %s): branches of + run independently, so writes to one state would race; write it in one branch, or in sequence (>>)", p.Pos, n, first.Pos)
			}
		}
		for n, op := range w {
			seen[n] = op
		}
	}
	return nil
}

// updated returns the state an op updates, or "".
func updated(op *Op) string {
	if op.Target != "" && updateMethods[op.Name] {
		return op.Target
	}
	if op.Name == "timestamp" && op.Target == "" && len(op.Args) == 1 {
		if id, ok := op.Args[0].(*Ident); ok {
			return id.Name
		}
	}
	return ""
}

func (c *compiler) surveyOp(op *Op) error {
	if op.Target == "" && op.Name == "duplicate" {
		if len(op.Args) != 1 {
			return c.errorf(op.Pos, "duplicate takes the name of the stream it starts: duplicate(alarms)")
		}
		id, ok := op.Args[0].(*Ident)
		if !ok {
			return c.errorf(op.Args[0].ExprPos(), "duplicate takes a name: duplicate(alarms)")
		}
		if id.Name == "pkts" || id.Name == "ctrl" {
			return c.errorf(id.Pos, "%s is a stream of its own: duplicate starts a new one", id.Name)
		}
		if at, ok := c.sym.decls[id.Name]; ok {
			return c.errorf(id.Pos, "%s is declared at %s: a stream needs a name of its own", id.Name, at)
		}
		if first := c.defined[id.Name]; first != nil {
			return c.errorf(id.Pos, "stream %s is started twice (first at %s)", id.Name, first.Pos)
		}
		c.defined[id.Name] = op
		c.streams[id.Name] = true
		return nil
	}
	t := updated(op)
	if t == "" {
		return nil
	}
	st := c.sym.states[t]
	if st == nil {
		if c.sym.keys[t] != nil || c.sym.consts[t] != nil {
			return c.errorf(op.Pos, "%s is not a state variable: %s(...) updates a Counter, Timestamp, HashMap, Sketch or BloomFilter", t, op.describe())
		}
		return c.sym.undeclared(op.Pos, t, "the state variable")
	}
	if op.Name == "reset" || op.Name == "init" {
		if st.kind != kBloom {
			return c.errorf(op.Pos, "%s(): ffpf resets state at the end of each window (window(10s)), not at a step", op.describe())
		}
		return nil // a packet-scoped filter's life, checked in its sequence
	}
	if first := c.updates[t]; first != nil {
		return c.errorf(op.Pos, "%s is updated here and at %s: ffpf keeps a state in one function at one place on the packets' way (a switch reads and writes a register once a packet)", t, first.Pos)
	}
	c.updates[t] = op
	if st.kind == kStore && op.Name == "set" && len(op.Args) == 1 {
		c.storeValue[t] = op.Args[0]
	}
	return nil
}

// surveyScoped finds in a sequence the life of a packet-scoped
// BloomFilter: [init(E) >>] insert() >> ... >> reset(), nothing of it
// outside the sequence.
func (c *compiler) surveyScoped(s *Seq) error {
	for i, step := range s.Steps {
		op, ok := step.(*Op)
		if !ok || op.Name != "reset" || op.Target == "" {
			continue
		}
		st := c.sym.states[op.Target]
		if st == nil || st.kind != kBloom {
			continue
		}
		ins := -1
		for j := 0; j < i; j++ {
			if o, ok := s.Steps[j].(*Op); ok && o.Target == st.name && o.Name == "insert" {
				ins = j
			}
		}
		if ins < 0 {
			return c.errorf(op.Pos, "%s.reset() ends a filter that holds one packet's key: insert it first, in the same sequence", st.name)
		}
		if st.loc == nil {
			return c.errorf(op.Pos, "%s.reset() after each packet: a filter reset that way holds one packet's key, which is a switch's own values (Key(pkt.input_port, switch.id, pkt.output_port)), not a flow key", st.name)
		}
		c.scoped[st.name] = &scoped{}
		// The update survey counted the insert: a scoped filter has none.
		delete(c.updates, st.name)
	}
	return nil
}

// comp compiles a composition fed from in; next is the step after it in
// its sequence (for fusing a match into the update after it). It returns
// where its packets leave and its terms.
func (c *compiler) comp(cp Comp, in point, _ *Op) (point, []lang.Term, error) {
	switch cp := cp.(type) {
	case *Op:
		return c.op(cp, in, nil)
	case *Seq:
		cur := in
		var terms []lang.Term
		for i := 0; i < len(cp.Steps); i++ {
			step := cp.Steps[i]
			if m, ok := step.(*Op); ok && m.Target == "" && m.Name == "match" && i+1 < len(cp.Steps) {
				if u, ok := cp.Steps[i+1].(*Op); ok {
					out, ts, fused, err := c.fuse(m, u, cur)
					if err != nil {
						return point{}, nil, err
					}
					if fused {
						terms = append(terms, ts...)
						cur = out
						i++
						continue
					}
				}
			}
			if p, ok := step.(*Par); ok && i+1 < len(cp.Steps) {
				if err := c.noEmptyBranch(p); err != nil {
					return point{}, nil, err
				}
			}
			out, ts, err := c.comp(step, cur, nil)
			if err != nil {
				return point{}, nil, err
			}
			terms = append(terms, ts...)
			cur = out
		}
		return cur, terms, nil
	case *Par:
		var chains []*lang.Chain
		var outs []int
		var last []lang.Term
		for _, b := range cp.Branches {
			out, ts, err := c.comp(b, in, nil)
			if err != nil {
				return point{}, nil, err
			}
			outs = appendNew(outs, out.outs...)
			if g, ok := ts0(ts).(*lang.Group); ok && len(ts) == 1 && g.Label == "" {
				// (A + B) + C is A + B + C: one group
				chains = append(chains, g.Chains...)
				last = ts
				continue
			}
			if len(ts) > 0 {
				chains = append(chains, &lang.Chain{Terms: ts})
				last = ts
			}
		}
		switch len(chains) {
		case 0:
			return in, nil, nil
		case 1:
			return point{outs: outs, term: last[len(last)-1]}, last, nil
		}
		g := &lang.Group{Chains: chains}
		return point{outs: outs, term: g}, []lang.Term{g}, nil
	}
	return in, nil, nil
}

// noEmptyBranch refuses a + followed by more steps one of whose branches
// compiles to no function: the steps after it would have to be fed both
// by the other branches and by what came before, which a group of ffpf
// cannot say.
func (c *compiler) noEmptyBranch(p *Par) error {
	for _, b := range p.Branches {
		if !c.hasFunction(b) {
			return c.errorf(b.CompPos(), "this branch of + has no step that becomes a function (only duplicate, or a filter's reset), and steps follow the +: move them into the branches")
		}
	}
	return nil
}

func (c *compiler) hasFunction(cp Comp) bool {
	switch cp := cp.(type) {
	case *Seq:
		for _, s := range cp.Steps {
			if c.hasFunction(s) {
				return true
			}
		}
	case *Par:
		for _, b := range cp.Branches {
			if c.hasFunction(b) {
				return true
			}
		}
	case *Op:
		if cp.Name == "duplicate" && cp.Target == "" {
			return false
		}
		if cp.Target != "" && c.scoped[cp.Target] != nil && cp.Name != "read" {
			return false
		}
		return true
	}
	return false
}

func appendNew(a []int, xs ...int) []int {
	for _, x := range xs {
		if !slices.Contains(a, x) {
			a = append(a, x)
		}
	}
	return a
}

// add makes a node for fn fed from in, and returns the point after it.
func (c *compiler) add(fn *lang.Func, in point, at Pos, reads []read, self *state) point {
	c.nodes = append(c.nodes, &node{fn: fn, ins: slices.Clone(in.outs), at: at, reads: reads, self: self})
	id := len(c.nodes) - 1
	if self != nil {
		c.updNode[self.name] = id
	}
	return point{outs: []int{id}, term: fn}
}

// fn builds a function term; an arg with an empty key is bare.
func fn(class string, args ...string) *lang.Func {
	f := &lang.Func{Class: class}
	for i := 0; i+1 < len(args); i += 2 {
		f.Args = append(f.Args, &lang.Arg{Key: args[i], Value: value(args[i+1])})
	}
	return f
}

// value makes a lang value: a number when the text is one, a word when it
// lexes as one, a string otherwise.
func value(s string) lang.Value {
	if r, err := lang.Parse("(x," + s + ")"); err == nil && len(r.Chains) == 1 && len(r.Chains[0].Terms) == 1 {
		if f, ok := r.Chains[0].Terms[0].(*lang.Func); ok && len(f.Args) == 1 && f.Args[0].Key == "" {
			v := f.Args[0].Value
			if v.Text == s || v.Text+v.Unit == s {
				return v
			}
		}
	}
	return lang.Value{Kind: lang.String, Text: s, Raw: strconv.Quote(s)}
}

// op compiles one operation.
func (c *compiler) op(op *Op, in point, _ *Op) (point, []lang.Term, error) {
	if op.Target != "" {
		return c.update(op, in, nil)
	}
	switch op.Name {
	case "match":
		if len(op.Args) != 1 {
			return point{}, nil, c.errorf(op.Pos, "match takes one condition")
		}
		if f, ok, err := c.sampling(op); ok || err != nil {
			if err != nil {
				return point{}, nil, err
			}
			out := c.add(f, in, op.Pos, nil, nil)
			return out, []lang.Term{f}, nil
		}
		x := c.ctx(nil)
		s, err := c.boolean(op.Args[0], x, "match")
		if err != nil {
			return point{}, nil, err
		}
		f := fn("match", "", s)
		out := c.add(f, in, op.Pos, x.reads, nil)
		return out, []lang.Term{f}, nil
	case "tag":
		if len(op.Args) != 2 {
			return point{}, nil, c.errorf(op.Pos, "tag takes a header field and a value: tag(ipv4.tos, 1)")
		}
		fld, ok := op.Args[0].(*Field)
		if !ok {
			return point{}, nil, c.errorf(op.Args[0].ExprPos(), "tag writes a header field (ipv4.tos, ipv4.identification, ipv4.checksum), not %s", shortExpr(op.Args[0]))
		}
		name, ok := fieldName(fld.Name())
		if !ok || !tagFields[name] {
			var ws []string
			for w := range tagFields {
				ws = append(ws, w)
			}
			sort.Strings(ws)
			return point{}, nil, c.errorf(fld.Pos, "tag cannot write %s: it writes %s", fld.Name(), strings.Join(ws, ", "))
		}
		x := c.ctx(nil)
		v, err := c.num(op.Args[1], x, "tag")
		if err != nil {
			return point{}, nil, err
		}
		// MAFIA's tags write their field and nothing else: a checksum
		// updated behind them would destroy what a tag carries in it.
		f := fn("tag", "field", name, "value", v, "checksum", "keep")
		out := c.add(f, in, op.Pos, x.reads, nil)
		return out, []lang.Term{f}, nil
	case "timestamp":
		if len(op.Args) != 1 {
			return point{}, nil, c.errorf(op.Pos, "timestamp takes the Timestamp it writes: timestamp(now)")
		}
		return c.update(op, in, nil)
	case "duplicate":
		name := op.Args[0].(*Ident).Name // survey checked it
		p := in
		if p.term != nil {
			setLabel(p.term, name)
		}
		c.points[name] = &p
		return in, nil, nil
	case "collect":
		return c.collect(op, in)
	}
	return point{}, nil, c.errorf(op.Pos, "unknown step %s", op.Name)
}

// ctx is an expression context for an expression of the state self (nil
// for none).
func (c *compiler) ctx(self *state) *exprCtx {
	return &exprCtx{self: self, pre: map[string]bool{}, holder: func(st *state) string { return c.holder[st.name] }}
}

// sampling compiles match(random([LO:HI]) < R) (or R > random(...)): a
// sample of rate (R−LO)/(HI−LO). ok is false for another condition.
func (c *compiler) sampling(op *Op) (*lang.Func, bool, error) {
	b, isBin := op.Args[0].(*Binary)
	if !isBin {
		if hasRandom(op.Args[0]) {
			return nil, false, c.errorf(randomAt(op.Args[0]), "random(...) is compared with a rate at the top of a match: match(random([0:100]) < 10)")
		}
		return nil, false, nil
	}
	r, rate, lt := b.X, b.Y, b.Op == "<" || b.Op == "<="
	if !isRandom(r) {
		r, rate, lt = b.Y, b.X, b.Op == ">" || b.Op == ">="
	}
	if !isRandom(r) {
		if hasRandom(op.Args[0]) {
			return nil, false, c.errorf(randomAt(op.Args[0]), "random(...) is compared with a rate at the top of a match: match(random([0:100]) < 10)")
		}
		return nil, false, nil
	}
	if !lt {
		return nil, false, c.errorf(b.Pos, "a sample keeps the packets whose random number is below the rate: random(...) < R")
	}
	call := r.(*Call)
	lo, hi := 0.0, 1.0
	switch len(call.Args) {
	case 0:
	case 1, 2:
		var loE, hiE Expr
		if rg, ok := call.Args[0].(*Range); ok && len(call.Args) == 1 {
			loE, hiE = rg.Lo, rg.Hi
		} else if len(call.Args) == 2 {
			loE, hiE = call.Args[0], call.Args[1]
		} else {
			return nil, false, c.errorf(call.Pos, "random takes a range: random([0:100]) (or random(0, 100))")
		}
		l, err := c.sym.number(loE)
		if err != nil {
			return nil, false, err
		}
		h, err := c.sym.number(hiE)
		if err != nil {
			return nil, false, err
		}
		lo, hi = l.f, h.f
	default:
		return nil, false, c.errorf(call.Pos, "random takes a range: random([0:100])")
	}
	if !(hi > lo) {
		return nil, false, c.errorf(call.Pos, "random's range is empty")
	}
	rv, err := c.sym.number(rate)
	if err != nil {
		return nil, false, c.errorf(rate.ExprPos(), "a sampling rate is a number or a numeric constant")
	}
	p := (rv.f - lo) / (hi - lo)
	if p <= 0 || p > 1 || math.IsNaN(p) {
		return nil, false, c.errorf(rate.ExprPos(), "the rate %s is outside random's range [%g:%g): it samples nothing or everything", rv, lo, hi)
	}
	return fn("sample", "rate", strconv.FormatFloat(p, 'f', -1, 64)), true, nil
}

func isRandom(e Expr) bool {
	call, ok := e.(*Call)
	return ok && call.Target == "" && call.Name == "random"
}

// randomAt is the position of the first random(...) in e.
func randomAt(e Expr) Pos {
	switch e := e.(type) {
	case *Call:
		if e.Target == "" && e.Name == "random" {
			return e.Pos
		}
		for _, a := range e.Args {
			if hasRandom(a) {
				return randomAt(a)
			}
		}
	case *Unary:
		return randomAt(e.X)
	case *Binary:
		if hasRandom(e.X) {
			return randomAt(e.X)
		}
		return randomAt(e.Y)
	}
	return e.ExprPos()
}

func hasRandom(e Expr) bool {
	switch e := e.(type) {
	case *Call:
		if e.Target == "" && e.Name == "random" {
			return true
		}
		for _, a := range e.Args {
			if hasRandom(a) {
				return true
			}
		}
	case *Unary:
		return hasRandom(e.X)
	case *Binary:
		return hasRandom(e.X) || hasRandom(e.Y)
	}
	return false
}

// collect compiles collect(ENDPOINT): an export of the packets to a file
// (file:PATH) or to a UDP collector (udp:HOST:PORT), on the host.
func (c *compiler) collect(op *Op, in point) (point, []lang.Term, error) {
	if len(op.Args) != 1 {
		return point{}, nil, c.errorf(op.Pos, "collect takes an endpoint: collect(COLLECTOR), COLLECTOR = \"file:out.pcap\" or \"udp:10.0.0.9:9000\"")
	}
	var ep, name string
	switch a := op.Args[0].(type) {
	case *Str:
		ep = a.Text
	case *Ident:
		name = a.Name
		k := c.sym.consts[a.Name]
		if k == nil {
			return point{}, nil, c.sym.undeclared(a.Pos, a.Name, "the endpoint")
		}
		s, ok := k.Value.(*Str)
		if !ok {
			return point{}, nil, c.errorf(a.Pos, "%s is a number: an endpoint is \"file:PATH\" or \"udp:HOST:PORT\"", a.Name)
		}
		ep = s.Text
	default:
		return point{}, nil, c.errorf(op.Args[0].ExprPos(), "collect takes an endpoint: a string constant (\"file:out.pcap\", \"udp:10.0.0.9:9000\")")
	}
	// Every collect to one endpoint is one export, fed by each.
	if id, ok := c.collectors[ep]; ok {
		n := c.nodes[id]
		n.ins = appendNew(n.ins, in.outs...)
		return point{outs: []int{id}, term: n.fn}, []lang.Term{&lang.Ref{Name: n.fn.Label}}, nil
	}
	var f *lang.Func
	switch {
	case strings.HasPrefix(ep, "file:") && len(ep) > 5:
		f = fn("export", "file", ep[5:])
	case strings.HasPrefix(ep, "udp:") && len(ep) > 4:
		f = fn("export", "to", ep[4:])
	default:
		return point{}, nil, c.errorf(op.Args[0].ExprPos(), "endpoint %q is not \"file:PATH\" (a pcap file) or \"udp:HOST:PORT\" (a collector)", ep)
	}
	if name == "" {
		name = "collect-" + strconv.Itoa(len(c.collectors)+1) // not a MAFIA name
	}
	f.Label = name
	out := c.add(f, in, op.Pos, nil, nil)
	c.collectors[ep] = out.outs[0]
	return out, []lang.Term{f}, nil
}

// fuse compiles match(P) >> U, when P reads the state U updates, into one
// function: the read and the update are one access of the state (a
// switch's read-modify-write), with P as its guard. fused is false when P
// does not read U's state, and the two compile apart.
func (c *compiler) fuse(m *Op, u *Op, in point) (point, []lang.Term, bool, error) {
	t := updated(u)
	st := c.sym.states[t]
	if st == nil || len(m.Args) != 1 || !readsState(m.Args[0], t) || c.scoped[t] != nil {
		return point{}, nil, false, nil
	}
	switch st.kind {
	case kBloom:
		if u.Name != "insert" {
			return point{}, nil, false, nil
		}
		neg, ok := testOf(m.Args[0], t, "test", nil)
		if !ok {
			return point{}, nil, true, c.errorf(m.Args[0].ExprPos(), "a match before %s.insert() that reads %s is its test: match(!%s.test()) passes the packets whose key is new, match(%s.test()) those it held", t, t, t, t)
		}
		pass := map[bool]string{true: "new", false: "member"}[neg]
		return c.bloom(u, st, in, pass)
	case kStore:
		if u.Name != "set" || len(u.Args) != 1 {
			return point{}, nil, false, nil
		}
		neg, ok := testOf(m.Args[0], t, "any", u.Args[0])
		if !ok {
			return point{}, nil, true, c.errorf(m.Args[0].ExprPos(), "a match before %s.set(V) that reads %s is its test: match(!%s.any(V)) passes the packets whose value none of the key's cells held, match(%s.any(V)) the others", t, t, t, t)
		}
		pass := map[bool]string{true: "new", false: "old"}[neg]
		return c.store(u, st, in, pass)
	case kCounter, kMapCounter, kTimestamp, kMapTimestamp:
		// A guarded update: a register whose if= is the match, and the
		// match after it, reading the value before the update.
		g := c.ctx(st)
		g.pre[t] = true
		guard, err := c.boolean(m.Args[0], g, "match")
		if err != nil {
			return point{}, nil, true, err
		}
		f, reads, err := c.register(u, st, guard)
		if err != nil {
			return point{}, nil, true, err
		}
		reads = append(reads, g.reads...)
		out := c.add(f, in, u.Pos, reads, st)
		c.holder[t] = "register"
		after := c.ctx(nil)
		after.pre[t] = true
		cond, err := c.boolean(m.Args[0], after, "match")
		if err != nil {
			return point{}, nil, true, err
		}
		mf := fn("match", "", cond)
		out2 := c.add(mf, out, m.Pos, after.reads, nil)
		return out2, []lang.Term{f, mf}, true, nil
	}
	return point{}, nil, true, c.errorf(m.Pos, "this match reads %s before %s updates it; %s has no guarded update: read it after the update", t, u.describe(), kindNames[st.kind])
}

// testOf recognises P as X.METHOD(V) or !X.METHOD(V) (V given for any).
func testOf(e Expr, x, method string, v Expr) (neg, ok bool) {
	if u, isU := e.(*Unary); isU && u.Op == "!" {
		neg, e = true, u.X
	}
	call, isCall := e.(*Call)
	if !isCall || call.Target != x || call.Name != method {
		return false, false
	}
	if v == nil {
		return neg, len(call.Args) == 0
	}
	return neg, len(call.Args) == 1 && sameExpr(call.Args[0], v)
}

// readsState reports whether e reads the state name.
func readsState(e Expr, name string) bool {
	switch e := e.(type) {
	case *Ident:
		return e.Name == name
	case *Call:
		if e.Target == name {
			return true
		}
		for _, a := range e.Args {
			if readsState(a, name) {
				return true
			}
		}
	case *Unary:
		return readsState(e.X, name)
	case *Binary:
		return readsState(e.X, name) || readsState(e.Y, name)
	}
	return false
}
