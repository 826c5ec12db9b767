package pisa

import (
	"encoding/binary"
	"math"
	"slices"
	"unsafe"

	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// The parser's plans. Most packets of a trace take one of a few paths
// through the parser's states (Ethernet, IPv4, TCP), and on one path
// every header starts at the same bit: the parser's work for a path (the
// fields to load and where, the headers made valid, where each was
// extracted, whether they came in the deparser's order, where the
// payload starts) can be done once, by the first packet that takes it,
// and then copied, a plan. The paths are a tree: a node is a parser
// state with a select, reached by one path, with the bytes a packet
// must hold for the headers up to it, its select's key as loads from
// the packet (the fields the path loaded before the select) or slots
// (the rest: metadata, a header the path does not extract), and what
// follows each of its cases (the next node or a plan), filled in as
// packets take them. A state with no select has no node of its own: its
// headers are the next node's or plan's to check.
//
// A packet walks the tree from the root: at each node, a length check,
// the key's loads and the compares of the general parser's cases (two
// cases a node's packets took first, when no case before them overlaps
// them, with no scan); at a plan, a length check and its loads, in one
// loop. A packet too short for the headers of a node or plan, or at a
// node for a state a plan cannot take (a varbit field, a select too wide
// for a word or not of fields and metadata, a packet too short for its
// 8-byte loads) takes the plan of its path up to the last node it passed
// (the node's prefix plan), and the general parser goes on from there
// (rejecting it as short, extracting the headers it holds, or taking
// the varbit field). A packet at a case no packet took yet goes through
// the general parser from the start, which records its path for the
// tree (learn), while the tree has room.

// maxPlanNodes bounds the nodes of the tree, and maxPlans its plans.
const (
	maxPlanNodes = 256
	maxPlans     = 2 * maxPlanNodes
)

// maxPlanSteps bounds the states on a planned path.
const maxPlanSteps = 64

// planner is a model's tree of parser paths. What a packet walking it
// reads is apart from what learning reads, in a cache line or two a node
// (one a plan), in arrays, so that the few nodes of a trace's paths stay
// in the cache.
type planner struct {
	nodes  []pnode // nodes[0] is the root; none: every packet takes the general parser
	cold   []pcold // per node
	plans  []plan
	places [][]hplace // per plan: where each header was extracted, in bits from the packet's start
	ends   []eload    // the plans' loads, offsets from the packet's start (see plan)
	loads  []fload
	trace  []pstep // the general parser's path, while it is recorded
}

// pstep is a state the general parser went through: at bit at, it took
// case c (its cases' count for the default).
type pstep struct{ st, at, c int32 }

// What follows a node's case: a node (its index, >= 0), nothing yet,
// or a plan (planOf).
const notTaken = -1

func planOf(i int) int32   { return int32(-2 - i) }
func planAt(t int32) int32 { return -2 - t }

// pnode is a state reached by one path. Its size is two cache lines,
// the first all a packet of the node's first case reads
// (TestPlanSizes).
type pnode struct {
	need int32 // bytes the packet holds for the path's headers; math.MaxInt32: the general parser runs
	kind uint8
	// hot0 follows case0 and hot1 case1, the first cases taken that no
	// case before them overlaps, which a packet takes with no scan of the
	// cases (notTaken and never for none; noSelect: hot0 follows).
	hot0 int32
	// rawSelect: the select's keys are in the 8 bytes at w0 and w1.
	w0, w1 uintptr
	case0  rawCase
	hot1   int32
	case1  rawCase
	_      [24]byte
}

// Kinds of node: how a node's select finds its case.
const (
	noSelect = iota // the root, or a state a packet was too short for
	rawSelect
	keySelect
)

// pcold is the rest of a node.
type pcold struct {
	st    int
	raw   []rawCase // rawSelect: each case a mask and value of the 8 bytes at w0 and at w1
	alone []bool    // per case, no case before it overlaps it
	// keySelect: the select's key packed from keys, each case a mask and
	// value of it.
	keys  []pkey
	cases []pmv
	next  []int32 // what follows each case, then the default
	// For a packet that goes no further by plans, the plan of the path
	// up to the state's headers (-1: none), after which the general
	// parser selects, the state the path's steps'th, its headers from
	// bit start to bit.
	pre, steps, start, bit int32
}

// pkey is one expression of a select: the 8 bytes at boff shifted right
// by rsh (slot's own value when boff < 0), masked, at shift in the key.
type pkey struct {
	boff, slot int32
	rsh, shift uint64
	mask       uint64
}

type pmv struct{ m, v uint64 }

type rawCase struct{ m0, v0, m1, v1 uint64 }

// never is a rawCase no bytes match.
var never = rawCase{m0: 0, v0: 1}

// plan is a path's parsing, done by its first packet. Its size is a
// cache line (TestPlanSizes).
type plan struct {
	// Its loads, in m.plans' arrays (or the arrays they were when the
	// plan was made): ne at ends (the fields that end on a byte, by the
	// 8 bytes they end), nl at loads (the others).
	ends, loads unsafe.Pointer
	ne, nl      int32
	need        int32 // bytes the packet holds for the path's headers; math.MaxInt32: not planned
	visit       int32 // the visit that stands for its extractions (locate)
	payload     int32
	// The path's headers are in the deparser's order among themselves
	// (inOrder), the first's and last's positions; none when !any.
	firstPos, lastPos    int32
	any, inOrder, reject bool
	// vbits |= v, vbits having at most two words (a model of more
	// headers plans nothing).
	v [2]uint64
}

// eload is a field's load from the 8 bytes it ends, at boff, masked.
type eload struct {
	boff, slot int32
	mask       uint64
}

// pathAt is a field loaded on a path: its bit offset from the packet's
// start.
type pathAt struct{ off, bits int }

// path is what a path through the parser did so far, as learn walks it.
type path struct {
	start, bit, steps int            // start: where the last state entered starts
	at                map[int]pathAt // per slot, its last load's
	loads             []hfield       // offsets from the packet's start
	places            []hplace
	vwords            []vword
	any, inOrder      bool
	firstPos, lastPos int
}

// enter adds state st's extraction to the path.
func (pa *path) enter(m *Model, st int) {
	s := &m.states[st]
	pa.start = pa.bit
	for _, f := range s.loads {
		f.off += pa.bit
		for i := range pa.loads {
			if pa.loads[i].slot == f.slot {
				pa.loads = append(pa.loads[:i], pa.loads[i+1:]...)
				break
			}
		}
		pa.loads = append(pa.loads, f)
		pa.at[f.slot] = pathAt{f.off, f.bits}
	}
	for _, h := range s.places {
		pa.places = append(pa.places, hplace{index: h.index, off: pa.bit + h.off})
	}
	for _, w := range s.vwords {
		pa.vwords = addVword(pa.vwords, w)
	}
	if len(s.extract) > 0 {
		if !pa.any {
			pa.any, pa.inOrder, pa.firstPos = true, s.inOrder, s.firstPos
		} else if !s.inOrder || s.firstPos <= pa.lastPos {
			pa.inOrder = false
		}
		pa.lastPos = s.lastPos
	}
	pa.bit += s.bits
	pa.steps++
}

func addVword(ws []vword, w vword) []vword {
	for i := range ws {
		if ws[i].i == w.i {
			ws[i].bits |= w.bits
			return ws
		}
	}
	return append(ws, w)
}

// windows places fields (bit offsets from the packet's start, and
// widths) in 8-byte loads within the first need bytes of a packet: each
// field's load starts at its first byte, or at the last 8 of need when
// that would pass them, and holds as many of the fields after it as it
// can. It returns each field's load (an index in boffs) and right shift,
// and ok false when a field does not fit a load (need < 8, or more than
// 57 bits off a byte).
func windows(fs []pathAt, need int) (boffs []int32, in []int, rsh []uint64, ok bool) {
	order := make([]int, len(fs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return fs[a].off - fs[b].off })
	in, rsh = make([]int, len(fs)), make([]uint64, len(fs))
	for _, i := range order {
		f := fs[i]
		n := len(boffs)
		if n == 0 || f.off+f.bits > 8*int(boffs[n-1])+64 {
			w := min(f.off>>3, need-8)
			if w < 0 || f.off-8*w+f.bits > 64 {
				return nil, nil, nil, false
			}
			boffs = append(boffs, int32(w))
			n++
		}
		in[i], rsh[i] = n-1, uint64(8*int(boffs[n-1])+64-f.off-f.bits)
	}
	return boffs, in, rsh, true
}

// addNode adds a node to the tree and returns its index.
func (pl *planner) addNode(n pnode, c pcold) int32 {
	pl.nodes, pl.cold = append(pl.nodes, n), append(pl.cold, c)
	return int32(len(pl.nodes) - 1)
}

// node adds the node of state st, the path having entered it.
func (m *Model) node(st int, pa *path) int32 {
	s := &m.states[st]
	n := pnode{need: int32(min((pa.bit+7)/8, math.MaxInt32)), kind: noSelect,
		hot0: notTaken, hot1: notTaken, case0: never, case1: never}
	c := pcold{st: st, next: make([]int32, len(s.cases)+1), pre: -1, steps: int32(pa.steps),
		start: int32(min(pa.start, math.MaxInt32)), bit: int32(min(pa.bit, math.MaxInt32))}
	for i := range c.next {
		c.next[i] = notTaken
	}
	m.selectOf(&n, &c, pa)
	if n.need < math.MaxInt32 && len(m.plans.plans) < maxPlans {
		if t := m.leaf(pa, nil); m.plans.plans[planAt(t)].need < math.MaxInt32 {
			c.pre = planAt(t)
		}
	}
	return m.plans.addNode(n, c)
}

// selectOf sets how node n (of state c.st, on path pa) finds its case,
// or makes it a node where the general parser runs.
func (m *Model) selectOf(n *pnode, c *pcold, pa *path) {
	s := &m.states[c.st]
	if !s.whole || len(s.sel) > 0 && !s.packed || slices.Contains(s.selSlots, -1) {
		n.need = math.MaxInt32
		return
	}
	if len(s.sel) == 0 {
		return
	}
	// The keys the path loaded before (from the packet), the others
	// from their slots.
	var fs []pathAt
	var fk []int
	n.kind = keySelect
	for i, slot := range s.selSlots {
		k := pkey{boff: -1, slot: int32(slot), shift: uint64(s.shifts[i]), mask: s.masks[i]}
		if f, ok := pa.at[slot]; ok {
			fs, fk = append(fs, f), append(fk, i)
			k.mask &= p4gen.Bit(f.bits).Mask()
		}
		c.keys = append(c.keys, k)
	}
	boffs, in, rsh, ok := windows(fs, int(n.need))
	if !ok {
		n.need = math.MaxInt32
		return
	}
	for j, i := range fk {
		c.keys[i].boff, c.keys[i].rsh = boffs[in[j]], rsh[j]
	}
	for i, sc := range s.cases {
		c.cases = append(c.cases, pmv{sc.pm, sc.pv})
		alone := sc.pv&^sc.pm == 0
		for _, b := range s.cases[:i] {
			if b.pv&^b.pm == 0 && (b.pv^sc.pv)&b.pm&sc.pm == 0 {
				alone = false // b's and sc's values can be one key's
			}
		}
		c.alone = append(c.alone, alone)
	}
	if len(fk) < len(c.keys) || len(boffs) > 2 {
		return
	}
	// Every key from at most two loads: a case is a mask and value of
	// each, its key's bits where the packet has them.
	n.kind, n.w0, n.w1 = rawSelect, uintptr(boffs[0]), uintptr(boffs[len(boffs)-1])
	for _, cs := range c.cases {
		var r [2]pmv
		nope := cs.v&^cs.m != 0
		for j, i := range fk {
			k := c.keys[i]
			cm, cv := cs.m>>k.shift&k.mask<<rsh[j], cs.v>>k.shift&k.mask<<rsh[j]
			w := &r[in[j]]
			nope = nope || (w.v^cv)&w.m&cm != 0 // one field, two values
			w.m, w.v = w.m|cm, w.v|cv
		}
		rc := rawCase{r[0].m, r[0].v, r[1].m, r[1].v}
		if len(boffs) == 1 {
			rc.m1, rc.v1 = 0, 0
		}
		if nope {
			rc = never
		}
		c.raw = append(c.raw, rc)
	}
}

// leaf adds the plan of path pa, which the parser ends with err, and
// returns what follows the case that ends it.
func (m *Model) leaf(pa *path, err error) int32 {
	need := (pa.bit + 7) / 8
	pl := plan{need: int32(min(need, math.MaxInt32)), payload: int32(min(pa.bit/8, math.MaxInt32)),
		firstPos: int32(pa.firstPos), lastPos: int32(pa.lastPos), any: pa.any, inOrder: pa.inOrder, reject: err == errReject}
	ok := (len(m.headers)+63)/64 <= len(pl.v) && need < math.MaxInt32
	for _, w := range pa.vwords {
		pl.v[w.i%len(pl.v)] |= w.bits
	}
	var fs []pathAt
	var rest []hfield
	ends := len(m.plans.ends)
	for _, f := range pa.loads {
		if end := f.off + f.bits; end&7 == 0 && end >= 64 {
			m.plans.ends = append(m.plans.ends, eload{boff: int32(end/8 - 8), slot: int32(f.slot), mask: p4gen.Bit(f.bits).Mask()})
			continue
		}
		fs, rest = append(fs, pathAt{f.off, f.bits}), append(rest, f)
	}
	boffs, in, rsh, fits := windows(fs, need)
	if !ok || !fits {
		m.plans.ends = m.plans.ends[:ends]
		pl = plan{need: math.MaxInt32}
	} else {
		loads := len(m.plans.loads)
		for i, f := range rest {
			m.plans.loads = append(m.plans.loads, fload{slot: int32(f.slot), boff: boffs[in[i]], rsh: rsh[i], mask: p4gen.Bit(f.bits).Mask()})
		}
		if pl.ne = int32(len(m.plans.ends) - ends); pl.ne > 0 {
			pl.ends = unsafe.Pointer(&m.plans.ends[ends])
		}
		if pl.nl = int32(len(m.plans.loads) - loads); pl.nl > 0 {
			pl.loads = unsafe.Pointer(&m.plans.loads[loads])
		}
	}
	pl.visit = int32(len(m.states) + len(m.plans.plans))
	m.plans.plans = append(m.plans.plans, pl)
	m.plans.places = append(m.plans.places, pa.places)
	return planOf(len(m.plans.plans) - 1)
}

// initPlans starts the tree: its root, state start's node.
func (m *Model) initPlans() {
	pa := path{at: map[int]pathAt{}}
	pa.enter(m, 0)
	m.plans = planner{nodes: make([]pnode, 0, 16), trace: make([]pstep, 0, maxPlanSteps)}
	m.node(0, &pa)
}

// Results of planned.
const (
	planDone    = iota // the packet was parsed by a plan
	planResumed        // it was parsed by a plan of its path's start and the general parser
	planGeneral        // its path goes where plans do not (or the model has no plans)
	planNew            // it takes a case of a node that no packet took
)

// planned parses p by the plan of its path, if the tree holds it, or by
// the plan of the path up to the last node it passed (whose prefix
// plan) and the general parser from there (planResumed).
func (m *Model) planned(p *pkt) (int, error) {
	data := p.data
	d := unsafe.Pointer(unsafe.SliceData(data))
	nodes := m.plans.nodes
	if len(nodes) == 0 {
		return planGeneral, nil // no plans
	}
	i, last := int32(0), int32(-1)
	var pl *plan
	for {
		n := &nodes[i]
		if len(data) < int(n.need) {
			break // at node i, which the general parser takes on
		}
		last = i
		// A node's loads are within its need (windows), and a slot is
		// the model's.
		switch n.kind {
		case rawSelect:
			r0, r1 := load64(d, n.w0), load64(d, n.w1)
			if h := &n.case0; r0&h.m0 == h.v0 && r1&h.m1 == h.v1 {
				i = n.hot0
			} else if h := &n.case1; r0&h.m0 == h.v0 && r1&h.m1 == h.v1 {
				i = n.hot1
			} else {
				i = m.plans.rawCase(i, r0, r1)
			}
		case keySelect:
			i = m.plans.keyCase(i, p, d)
		default:
			i = n.hot0
		}
		if i < 0 {
			if i == notTaken {
				return planNew, nil
			}
			if pl = &m.plans.plans[planAt(i)]; len(data) >= int(pl.need) {
				last = -1
			}
			i = -1
			break
		}
	}
	if last >= 0 {
		if pl = nil; m.plans.cold[last].pre >= 0 {
			pl = &m.plans.plans[m.plans.cold[last].pre]
		}
	}
	if pl == nil {
		return planGeneral, nil
	}
	// The packet holds the plan's need: each load (windows).
	v := unsafe.Pointer(unsafe.SliceData(p.v))
	// Two at a time: half the loop's own instructions.
	for k := int32(0); k+1 < pl.ne; k += 2 {
		f := (*[2]eload)(unsafe.Add(pl.ends, uintptr(k)*unsafe.Sizeof(eload{})))
		*(*uint64)(unsafe.Add(v, uintptr(f[0].slot)*8)) = load64(d, uintptr(f[0].boff)) & f[0].mask
		*(*uint64)(unsafe.Add(v, uintptr(f[1].slot)*8)) = load64(d, uintptr(f[1].boff)) & f[1].mask
	}
	if pl.ne&1 != 0 {
		f := (*eload)(unsafe.Add(pl.ends, uintptr(pl.ne-1)*unsafe.Sizeof(eload{})))
		*(*uint64)(unsafe.Add(v, uintptr(f.slot)*8)) = load64(d, uintptr(f.boff)) & f.mask
	}
	for k := range pl.nl {
		f := (*fload)(unsafe.Add(pl.loads, uintptr(k)*unsafe.Sizeof(fload{})))
		w := load64(d, uintptr(f.boff)) >> (f.rsh & 63)
		*(*uint64)(unsafe.Add(v, uintptr(f.slot)*8)) = w & f.mask
	}
	switch vb := p.vbits; len(vb) {
	case 2:
		vb[0], vb[1] = vb[0]|pl.v[0], vb[1]|pl.v[1]
	case 1:
		vb[0] |= pl.v[0]
	}
	p.visits = append(p.visits, visit{st: pl.visit})
	if pl.any {
		if !pl.inOrder || int(pl.firstPos) <= p.lastPos {
			p.ordered = false
		}
		p.lastPos = int(pl.lastPos)
	}
	if last >= 0 {
		// From node i's state when it follows last's (no state with
		// headers between them), else from last's select.
		c := &m.plans.cold[last]
		if i >= 0 && m.plans.cold[i].start == c.bit {
			c = &m.plans.cold[i]
			return planResumed, m.general(p, c.st, int(c.start), int(c.steps)-1, false)
		}
		switch next, _ := m.choose(p, &m.states[c.st]); next {
		case nextAccept, nextReject:
			// The state after last's is the end: a plan the packet
			// is too short for, or one not made.
			p.payload = int(c.bit) / 8
			if next == nextReject {
				return planResumed, errReject
			}
			return planResumed, nil
		default:
			return planResumed, m.general(p, next, int(c.bit), int(c.steps), false)
		}
	}
	p.payload = int(pl.payload)
	if pl.reject {
		return planDone, errReject
	}
	return planDone, nil
}

// rawCase is what follows node i for a packet whose bytes at its w0
// and w1 are r0 and r1.
func (pl *planner) rawCase(i int32, r0, r1 uint64) int32 {
	c := &pl.cold[i]
	raw := c.raw
	for j := range raw {
		if r := &raw[j]; r0&r.m0 == r.v0 && r1&r.m1 == r.v1 {
			return c.next[j]
		}
	}
	return c.next[len(raw)]
}

// keyCase is what follows node i for packet p (its bytes at d).
func (pl *planner) keyCase(i int32, p *pkt, d unsafe.Pointer) int32 {
	c := &pl.cold[i]
	var key uint64
	for _, k := range c.keys {
		var x uint64
		if k.boff >= 0 {
			x = load64(d, uintptr(k.boff)) >> (k.rsh & 63)
		} else {
			x = p.v[k.slot]
		}
		key |= x & k.mask << (k.shift & 63)
	}
	for j, cs := range c.cases {
		if key&cs.m == cs.v {
			return c.next[j]
		}
	}
	return c.next[len(c.cases)]
}

// load64 is the 8 bytes at d+off, big-endian.
func load64(d unsafe.Pointer, off uintptr) uint64 {
	return binary.BigEndian.Uint64((*[8]byte)(unsafe.Add(d, off))[:])
}

// learn adds the path the general parser recorded (in m.plans.trace),
// which ended with err, to the tree, as far as there is room: to a plan
// when the path ended by accept or reject, else to a node for the state
// the parser stopped in (so that a packet too short for it stops there).
func (m *Model) learn(err error) {
	tr := m.plans.trace
	if len(tr) == 0 || len(tr) > maxPlanSteps {
		return
	}
	pa := path{at: map[int]pathAt{}}
	pa.enter(m, 0)
	// cur is the node of the step's state (-1: a state with no node,
	// whose headers the next node or plan checks); what follows the
	// last node's case is pending.
	cur, ln, lc := int32(0), int32(0), int32(0)
	for j, s := range tr {
		st := &m.states[s.st]
		if cur >= 0 {
			c := &m.plans.cold[cur]
			if m.plans.nodes[cur].need == math.MaxInt32 || c.st != int(s.st) || int(s.c) >= len(c.next) {
				return
			}
			ln, lc = cur, s.c
		} else if len(st.sel) > 0 || !st.whole {
			return
		}
		to := st.def
		if len(st.sel) > 0 && int(s.c) < len(st.cases) {
			to = st.cases[s.c].next
		}
		end, last := to == nextAccept || to == nextReject, j+1 == len(tr)
		stopped := false
		switch {
		case end:
			if !last || err != nil && err != errReject {
				return // not the path the general parser took
			}
		case !last:
			if int(tr[j+1].st) != to || int(tr[j+1].at) != pa.bit {
				return
			}
			pa.enter(m, to)
		default:
			// The parser stopped in state to (a packet too short for
			// its headers).
			if err == nil || err == errReject {
				return
			}
			pa.enter(m, to)
			stopped = true
		}
		t := m.plans.cold[ln].next[lc]
		if end {
			if t == notTaken && len(m.plans.plans) < maxPlans {
				m.follow(ln, lc, m.leaf(&pa, err))
			}
			return
		}
		skip := !stopped && m.states[to].whole && len(m.states[to].sel) == 0
		switch {
		case t == notTaken && skip:
			cur = -1
			continue
		case t == notTaken:
			if len(m.plans.nodes) >= maxPlanNodes {
				return
			}
			t = m.node(to, &pa)
			m.follow(ln, lc, t)
		case t < 0:
			return // a plan where the path goes on
		case m.plans.cold[t].st != to:
			if !skip {
				return
			}
			cur = -1
			continue
		}
		if stopped {
			return
		}
		cur = t
	}
}

// follow makes t what follows case c of node i.
func (m *Model) follow(i, c, t int32) {
	cd, n := &m.plans.cold[i], &m.plans.nodes[i]
	cd.next[c] = t
	switch {
	case n.kind == noSelect:
		n.hot0 = t
	case n.kind != rawSelect || int(c) >= len(cd.alone) || !cd.alone[c]:
	case n.hot0 == notTaken:
		n.hot0, n.case0 = t, cd.raw[c]
	case n.hot1 == notTaken:
		n.hot1, n.case1 = t, cd.raw[c]
	}
}
