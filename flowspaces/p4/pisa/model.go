package pisa

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// Model is one program loaded on the switch's pipeline, with its state:
// register cells, counter cells, installed table entries and clone
// sessions. It is not safe for concurrent use (Device is).
type Model struct {
	prog   *p4gen.Program
	alloc  *p4gen.Allocator
	nslots int
	ones   int // the slot that always holds all ones (operand's constants)

	headers    []*header
	byName     map[string]*header
	states     []pstate
	deparser   []*header
	ingress    []op // the program's, for any packet
	ingressRun op   // seq(ingress)
	egress     []op
	comp       *compiler
	vars       variants        // ingress specialised per set of valid headers
	maxVars    int             // how many variants vars may hold
	splitReads int             // see splitReads
	liveOut    map[string]bool // the metadata egress reads
	// What is zeroed before the parser runs (the slots it reads), and
	// after, per variant (zero: the slots ingress or egress may read
	// that the parser did not write).
	parserReads []int
	egressReads map[string]bool
	varHeaders  []int // the headers with a varbit field
	tables      map[*p4gen.Table]*table
	regs        []*register
	regIdx      map[*p4gen.Register]int
	counts      [][]p4gen.CounterCell
	ctrIdx      map[*p4gen.Counter]int
	sessions    map[uint32]uint16

	// Random gives v1model random's values: a uniform integer in [lo,
	// hi]. Load sets it to p4gen.Switch's default (a PCG seeded with 1),
	// so that a model and the reference draw the same values.
	Random func(lo, hi uint64) uint64

	// standard metadata slots
	sIngressPort, sPacketLength, sIngressTS, sEgressSpec, sEgressPort, sInstance int
	sEnqQ, sDeqQ, sEgressTS, sEnqTS, sDeqDelta                                   int

	csumLast *header   // the IPv4 chunk whose validity says the checksum is updated
	csumHdrs []*header // what it sums
	ipv4csum int

	// per packet
	pk, ck   pkt      // the packet, and a clone being made
	ek       pkt      // an egress-to-egress clone being made
	keys     []uint64 // parser select values
	plans    planner  // the parser's paths (plan.go)
	scratch  []byte
	digs     []digestRec
	dvals    []uint64
	res      Result
	outBufs  [][]byte
	digTypes []*p4gen.DigestType
}

type digestRec struct{ typ, start, end int }

// Result is what one packet did, as p4gen.Result: the packets that left
// and the digests sent. Its slices are the model's and change at the
// next Process; a packet that leaves with the bytes it came with (no
// header written, none reordered) is the arrival's Data itself.
type Result struct {
	Out         []p4gen.Departure
	Digests     []p4gen.DigestMsg
	ParserError string
}

// Load compiles prog (which must Validate) for a switch with profile
// prof: a program whose units do not fit the profile's stages is
// refused with the reason.
func Load(prog *p4gen.Program, prof p4gen.Profile) (*Model, error) {
	if err := prog.Validate(); err != nil {
		return nil, err
	}
	alloc, err := p4gen.Allocate(prog, prof)
	if err != nil {
		return nil, fmt.Errorf("the program does not fit the switch: %v", err)
	}
	m := &Model{prog: prog, alloc: alloc, byName: map[string]*header{}, tables: map[*p4gen.Table]*table{},
		regIdx: map[*p4gen.Register]int{}, ctrIdx: map[*p4gen.Counter]int{}, sessions: map[uint32]uint16{}}
	pcg := rand.New(rand.NewPCG(1, 0))
	m.Random = func(lo, hi uint64) uint64 {
		if hi-lo == ^uint64(0) {
			return pcg.Uint64()
		}
		return lo + pcg.Uint64N(hi-lo+1)
	}
	c := &compiler{m: m, slots: map[string]int{}, actions: map[*p4gen.Action]*action{}, tables: m.tables,
		regs: m.regIdx, ctrs: m.ctrIdx, digs: map[*p4gen.DigestType]int{}, hdr: map[int]bool{}, used: map[int]bool{}}
	newSlot := func(name string) int {
		s := m.nslots
		m.nslots++
		c.slots[name] = s
		return s
	}
	for i, h := range prog.Headers {
		hd := &header{name: h.Name, index: i, varIdx: -1}
		off := 0
		for _, f := range h.Type.Fields {
			if f.Var {
				hd.varMax, hd.varAt, hd.varIdx, hd.varName = f.Bits, off, len(hd.fields), f.Name
				continue
			}
			hd.fields = append(hd.fields, hfield{slot: newSlot("hdr." + h.Name + "." + f.Name), off: off, bits: f.Bits, afterVar: hd.varIdx >= 0})
			c.hdr[hd.fields[len(hd.fields)-1].slot] = true
			off += f.Bits
		}
		hd.fixed = off
		m.headers = append(m.headers, hd)
		m.byName[h.Name] = hd
	}
	for _, f := range prog.Metadata {
		newSlot("meta." + f.Name)
	}
	for _, f := range p4gen.StdMeta {
		newSlot("standard_metadata." + f.Name)
	}
	m.ones = m.nslots // no name: never zeroed, never written
	m.nslots++
	std := func(n string) int { return c.slots["standard_metadata."+n] }
	m.sIngressPort, m.sPacketLength, m.sIngressTS = std("ingress_port"), std("packet_length"), std("ingress_global_timestamp")
	m.sEgressSpec, m.sEgressPort, m.sInstance = std("egress_spec"), std("egress_port"), std("instance_type")
	m.sEnqQ, m.sDeqQ, m.sEgressTS = std("enq_qdepth"), std("deq_qdepth"), std("egress_global_timestamp")
	m.sEnqTS, m.sDeqDelta = std("enq_timestamp"), std("deq_timedelta")
	if prog.UpdateIPv4Checksum {
		// As p4gen.Switch: over the IPv4 chunks and options that are
		// valid, when the last chunk is.
		last := m.byName[p4gen.IPv4Chunks[len(p4gen.IPv4Chunks)-1]]
		s, ok := c.slots[p4gen.IPv4ChecksumField.Path]
		if last != nil && ok {
			m.csumLast, m.ipv4csum = last, s
			c.used[s] = true
			for _, h := range append(slices.Clone(p4gen.IPv4Chunks), "ipv4_opts") {
				if hd := m.byName[h]; hd != nil {
					m.csumHdrs = append(m.csumHdrs, hd)
				}
			}
		}
	}
	for i, r := range prog.Registers {
		m.regIdx[r] = i
		m.regs = append(m.regs, newRegister(r))
	}
	for i, ct := range prog.Counters {
		m.ctrIdx[ct] = i
		m.counts = append(m.counts, make([]p4gen.CounterCell, ct.Size))
	}
	for i, d := range prog.Digests {
		c.digs[d] = i
		m.digTypes = append(m.digTypes, d)
	}
	for _, t := range prog.Tables {
		tb, err := c.table(t)
		if err != nil {
			return nil, err
		}
		m.tables[t] = tb
	}
	if err := c.parser(prog); err != nil {
		return nil, err
	}
	for _, h := range m.headers {
		h.pos = -1
	}
	for i, h := range prog.Deparse {
		m.deparser = append(m.deparser, m.byName[h])
		if m.byName[h].pos < 0 {
			m.byName[h].pos = i
		}
	}
	if m.ingress, err = c.stmts(prog.Ingress, nil); err != nil {
		return nil, fmt.Errorf("ingress: %v", err)
	}
	m.ingressRun = seq(m.ingress)
	if m.egress, err = c.stmts(prog.Egress, nil); err != nil {
		return nil, fmt.Errorf("egress: %v", err)
	}
	for _, h := range m.headers {
		for i := range h.fields {
			h.fields[i].used = c.used[h.fields[i].slot]
			if h.fields[i].used {
				h.used = append(h.used, h.fields[i])
			}
		}
	}
	m.wholeStates()
	m.comp, m.liveOut, m.maxVars, m.splitReads = c, liveOut(prog), maxVariants, splitReads
	m.egressReads = map[string]bool{}
	readsAll(prog.Egress, m.egressReads, map[*p4gen.Action]bool{})
	// A state's select runs after it extracted its headers, its varbit
	// length after all but the last: what it reads of those is the
	// packet's, not a slot to zero.
	parserReads := map[string]bool{}
	for _, s := range prog.Parser {
		r := map[string]bool{}
		for _, x := range s.Select {
			reads(x, r)
		}
		own := s.Extract
		if s.VarBits != nil {
			for path := range r {
				if !ownField(path, own) {
					parserReads[path] = true
				}
			}
			r = map[string]bool{}
			reads(s.VarBits, r)
			own = own[:len(own)-1]
		}
		for path := range r {
			if !ownField(path, own) {
				parserReads[path] = true
			}
		}
	}
	for path := range parserReads {
		if s, ok := c.slots[path]; ok {
			m.parserReads = append(m.parserReads, s)
		}
	}
	slices.Sort(m.parserReads)
	for _, h := range m.headers {
		if h.varMax > 0 {
			m.varHeaders = append(m.varHeaders, h.index)
		}
	}
	m.pk, m.ck, m.ek = m.newPkt(), m.newPkt(), m.newPkt()
	return m, nil
}

// ownField reports whether path is a field of one of headers hs.
func ownField(path string, hs []string) bool {
	for _, h := range hs {
		if strings.HasPrefix(path, "hdr."+h+".") {
			return true
		}
	}
	return false
}

// newPkt returns a packet's state sized for the program.
func (m *Model) newPkt() pkt {
	v := make([]uint64, m.nslots)
	v[m.ones] = ^uint64(0)
	return pkt{v: v, vbits: make([]uint64, (len(m.headers)+63)/64),
		hdrAt: make([]int32, len(m.headers)), varOff: make([]int32, len(m.headers)), visits: make([]visit, 0, 16),
		varLen: make([]int32, len(m.headers)), varSet: make([]int32, 0, len(m.varHeaders)), clones: make([]uint32, 0, 8), e2e: make([]e2eReq, 0, 4)}
}

func (m *Model) header(name string) *header { return m.byName[name] }

// Program returns the program the model runs.
func (m *Model) Program() *p4gen.Program { return m.prog }

// Report returns the resources the program takes on the switch.
func (m *Model) Report() p4gen.Report { return m.alloc.Report() }

// Counter returns the cells of counter c (the model's own).
func (m *Model) Counter(c *p4gen.Counter) []p4gen.CounterCell {
	if i, ok := m.ctrIdx[c]; ok {
		return m.counts[i]
	}
	return nil
}

// Entries returns the entries installed in table t.
func (m *Model) Entries(t *p4gen.Table) []p4gen.Entry {
	tb := m.tables[t]
	if tb == nil {
		return nil
	}
	out := make([]p4gen.Entry, len(tb.entries))
	for i, e := range tb.entries {
		out[i] = e.e
	}
	return out
}

// SetEntries installs es as table t's entries, in place of those it had.
func (m *Model) SetEntries(t *p4gen.Table, es []p4gen.Entry) error {
	tb := m.tables[t]
	if tb == nil {
		return fmt.Errorf("no table %s", t.Name)
	}
	m.vars.reset()
	m.comp.shared = nil
	return tb.set(es)
}

// Default returns the action table t runs on a miss, and its arguments.
func (m *Model) Default(t *p4gen.Table) (*p4gen.Action, []uint64) {
	tb := m.tables[t]
	if tb == nil {
		return nil, nil
	}
	return tb.def.a, slices.Clone(tb.defArgs)
}

// SetDefault makes a, with args, the action table t runs on a miss.
func (m *Model) SetDefault(t *p4gen.Table, a *p4gen.Action, args []uint64) error {
	tb := m.tables[t]
	if tb == nil {
		return fmt.Errorf("no table %s", t.Name)
	}
	m.vars.reset()
	m.comp.shared = nil
	return tb.setDefault(a, args)
}

// SetSession makes clone session id send its copies to port; port < 0
// deletes the session.
func (m *Model) SetSession(id uint32, port int) {
	if port < 0 {
		delete(m.sessions, id)
		return
	}
	m.sessions[id] = uint16(port)
}

// Sessions returns the clone sessions: session id → egress port.
func (m *Model) Sessions() map[uint32]uint16 {
	out := make(map[uint32]uint16, len(m.sessions))
	for k, v := range m.sessions {
		out[k] = v
	}
	return out
}

// arrive starts packet p: the standard metadata it enters with, its
// bytes, no header valid, the slots zeroed (all of them when full,
// else those the parser reads: the rest are zeroed once its variant is
// known). Where a header was extracted (hdrAt) is read only while it is
// valid, and set (by locate) when it becomes so.
func (m *Model) arrive(p *pkt, a p4gen.Arrival, full bool) { m.arriveAt(p, &a, full) }

// arriveAt is arrive of *a (ingressOf's: no copy of the arrival).
func (m *Model) arriveAt(p *pkt, a *p4gen.Arrival, full bool) {
	if full {
		clear(p.v)
		p.v[m.ones] = ^uint64(0)
	} else {
		for _, s := range m.parserReads {
			p.v[s] = 0
		}
	}
	for _, i := range p.varSet {
		p.varLen[i], p.varOff[i] = 0, 0
	}
	p.varSet = p.varSet[:0]
	switch vb := p.vbits; len(vb) { // no call to clear a word or two
	case 1:
		vb[0] = 0
	case 2:
		vb[0], vb[1] = 0, 0
	default:
		clear(vb)
	}
	p.data, p.payload, p.err = a.Data, -1, nil
	p.dirty, p.ordered, p.lastPos = false, true, -1
	p.clones = p.clones[:0]
	p.visits, p.located = p.visits[:0], false
	p.v[m.sIngressPort] = uint64(a.Port) & 0x1ff
	p.v[m.sPacketLength] = uint64(len(a.Data)) & 0xffffffff
	p.v[m.sIngressTS] = a.Time & p4gen.Bit(48).Mask()
}

// Process runs one packet through the switch as p4gen.Switch.Process
// does, and returns what it did.
func (m *Model) Process(a p4gen.Arrival) (*Result, error) {
	m.begin()
	p := &m.pk
	perr, err := m.ingressOf(p, a)
	m.res.ParserError = perr
	if err != nil {
		return &m.res, err
	}
	if len(p.clones) == 0 && len(m.egress) == 0 {
		// The common case: one instance at most, and no egress to run
		// (egressOf's first lines).
		if spec := p.v[m.sEgressSpec]; spec != p4gen.DropPort {
			p.e2e = p.e2e[:0]
			m.depart(p, uint16(spec), p4gen.InstanceNormal)
		}
		m.end()
		return &m.res, nil
	}
	q := egressMeta{enqQ: a.QDepth, deqQ: a.QDepth, now: a.Time}
	if len(p.clones) == 0 {
		// One instance at most: no call through instances' function.
		if spec := p.v[m.sEgressSpec]; spec != p4gen.DropPort {
			if err := m.egressOf(p, uint16(spec), p4gen.InstanceNormal, q); err != nil {
				return &m.res, err
			}
		}
	} else if err := m.instances(p, a, func(p *pkt, port uint16, instance uint32) error {
		return m.egressOf(p, port, instance, q)
	}); err != nil {
		return &m.res, err
	}
	m.end()
	return &m.res, nil
}

// instances calls f with each copy of the packet that leaves ingress:
// the packet itself unless dropped (egress_spec the drop port), then a
// fresh parse of it for each clone session it named that exists. Clones
// named in egress go nowhere, as in v1model.
func (m *Model) instances(p *pkt, a p4gen.Arrival, f func(p *pkt, port uint16, instance uint32) error) error {
	spec := p.v[m.sEgressSpec]
	clones := len(p.clones)
	if spec != p4gen.DropPort {
		if err := f(p, uint16(spec), p4gen.InstanceNormal); err != nil {
			return err
		}
	}
	for _, sess := range p.clones[:clones] {
		port, ok := m.sessions[sess]
		if !ok {
			continue
		}
		c := &m.ck
		m.arrive(c, a, true)
		_ = m.parse(c)
		if err := f(c, port, p4gen.InstanceCloneI2E); err != nil {
			return err
		}
	}
	return nil
}

// begin empties the per-packet results.
func (m *Model) begin() {
	m.res.Out = m.res.Out[:0]
	m.res.Digests = m.res.Digests[:0]
	m.res.ParserError = ""
	m.digs = m.digs[:0]
	m.dvals = m.dvals[:0]
}

// end makes the digests of the packet the result's.
func (m *Model) end() {
	for _, d := range m.digs {
		m.res.Digests = append(m.res.Digests, p4gen.DigestMsg{Type: m.digTypes[d.typ], Values: m.dvals[d.start:d.end:d.end]})
	}
}

// ingressOf parses a into p and runs ingress: the parser's error ("" for
// none) and a runtime error (an index past a register's end).
func (m *Model) ingressOf(p *pkt, a p4gen.Arrival) (string, error) {
	full := m.vars.n >= m.maxVars
	m.arriveAt(p, &a, full)
	perr := ""
	if err := m.parse(p); err != nil {
		perr = err.Error()
	}
	v := m.vars.find(p.vbits) // the variant made for its valid headers
	if v == nil && !full {
		v = m.newVariant(p)
	}
	if v == nil {
		m.ingressRun(p)
		return perr, p.err
	}
	if !full {
		for _, s := range v.zero {
			p.v[s] = 0
		}
	}
	v.run(p)
	return perr, p.err
}

// depart adds p, leaving on port, to the result, deparsed, and returns
// its bytes.
func (m *Model) depart(p *pkt, port uint16, instance uint32) []byte {
	var data []byte
	if !p.dirty && p.ordered && p.payload >= 0 && (m.csumLast == nil || !p.valid(m.csumLast)) {
		// The packet leaves as it came (what deparse would copy, no
		// checksum to update): its own bytes, not a copy.
		data = p.data
	} else {
		// A buffer per departure of the result (those that left as their
		// own bytes leave theirs unused).
		n := len(m.res.Out)
		for n >= len(m.outBufs) {
			m.outBufs = append(m.outBufs, make([]byte, 0, 2048))
		}
		m.outBufs[n] = m.deparse(p, m.outBufs[n])
		data = m.outBufs[n]
	}
	m.res.Out = append(m.res.Out, p4gen.Departure{Port: port, Data: data, Instance: instance})
	return data
}

// egressMeta is what the queue tells egress.
type egressMeta struct {
	enqQ, deqQ      uint32
	enqTS, deqDelta uint32
	now             uint64
}

// egressOf runs egress on p, an instance leaving on port, and deparses
// it into the result unless egress drops it.
func (m *Model) egressOf(p *pkt, port uint16, instance uint32, q egressMeta) error {
	p.e2e = p.e2e[:0]
	if len(m.egress) == 0 {
		// Nothing reads the standard metadata egress sees: only
		// whether the port is the drop port (a clone session's may be).
		if uint64(port)&0x1ff == p4gen.DropPort {
			return nil
		}
	} else {
		p.v[m.sEgressPort] = uint64(port) & 0x1ff
		p.v[m.sEgressSpec] = uint64(port) & 0x1ff
		p.v[m.sInstance] = uint64(instance)
		p.v[m.sEnqQ] = uint64(q.enqQ) & 0x7ffff
		p.v[m.sDeqQ] = uint64(q.deqQ) & 0x7ffff
		p.v[m.sEnqTS] = uint64(q.enqTS)
		p.v[m.sDeqDelta] = uint64(q.deqDelta)
		p.v[m.sEgressTS] = q.now & p4gen.Bit(48).Mask()
		run(m.egress, p)
		if p.err != nil {
			return p.err
		}
		if p.v[m.sEgressSpec] == p4gen.DropPort {
			return nil // mark_to_drop in egress
		}
	}
	data := m.depart(p, port, instance)
	if instance != p4gen.InstanceNormal || len(p.e2e) == 0 {
		return nil // a clone makes no clone of its own
	}
	// Egress-to-egress clones: the packet as it left, its egress run
	// again with the preserved metadata (p4gen.Clone).
	for _, req := range p.e2e {
		cport, ok := m.sessions[req.session]
		if !ok {
			continue
		}
		c := &m.ek
		m.arrive(c, p4gen.Arrival{Data: data, Port: uint16(p.v[m.sIngressPort]), Time: p.v[m.sIngressTS]}, true)
		_ = m.parse(c)
		for _, i := range req.preserve {
			c.v[i] = p.v[i]
		}
		if err := m.egressOf(c, cport, p4gen.InstanceCloneE2E, q); err != nil {
			return err
		}
	}
	return nil
}
