// Package monitor is Trumpet's packet monitor (TPM): the engine of the
// trumpet function class, in two phases over the packet clock.
//
// Phase 1, match and scatter, runs per packet: the packet's 5-tuple is
// looked up in the flow table (open addressing, preallocated, the last
// lookup cached); a new flow is matched once against the trigger index (a
// tuple-space search: one hash table per wildcard pattern) and keeps the
// list of the triggers it matched; then the flow's summary for the
// current epoch is updated. A summary keeps only the units (count, sum,
// sum of squares, minimum, maximum of a variable) that some trigger the
// flow matched needs, and it is double-buffered by epoch parity. The
// cost is cache misses, so a flow entry's first cache line holds what a
// packet of a known flow reads, ProcessBatch reads a batch's flow index
// slots, then its entries and summaries together, ahead of processing its
// packets, so that their misses overlap, and the tables are on huge pages
// (huge.go), so that their reads do not miss the TLB as well.
//
// Phase 2, gather, test and report, runs at each epoch's end (a deadline
// on the packet clock): the flow table is walked in memory order and each
// flow's summary gathered into the buckets of its triggers' granularities
// (the reference's sweep over the flow table, receiver/flatreport.c,
// flatreport_sweep and triggertable_update; its other mode walks each
// trigger's list of flows, which visits the flows in no memory order and
// measured twice as slow here); at the end of a trigger's interval each
// bucket's predicate is evaluated and the satisfied ones reported. A flow
// whose triggers all test one summary word against a number with > or >=
// is skipped when its word is below the lowest number (its gate), without
// reading its triggers (Config.Plain tests every pair). The
// sweep of epoch e reads the parity packets of epoch e+1 do not write, so
// it runs in bounded slices between batches (Algorithms 2 and 3), its
// state kept between slices; whatever is left of it when epoch e+1 ends is
// finished then, before any packet of epoch e+2 reaches that parity: a
// report is never later than the end of the epoch after its interval.
//
// The sharp edge: a flow without a packet for a whole epoch is forgotten
// (its entry freed by the sweep, or reset by its next packet), and with it
// its TCP state; this is what keeps the flow table small, as in Trumpet.
// Only its matches are kept, for one more sweep: a flow coming back after
// an idle epoch would match the same triggers, and matching is most of a
// new flow's cost (one probe of the index per pattern).
package monitor

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/trumpet/event"
)

// Config sizes a monitor. All memory is allocated by New.
type Config struct {
	LinkType functions.LinkType
	Epoch    int64 // ns; every trigger's interval is a multiple of it
	Flows    int   // flow table entries
	Buckets  int   // granularity buckets, all triggers together
	// Words is the summary words a flow keeps per epoch parity (the units
	// of the triggers it matches, together); 0 is 16, at most MaxUnits.
	Words int
	// DoS is the bytes a new 5-tuple must have sent, counted in the filter
	// table with the packet at hand, to enter the flow table; 0 admits
	// every flow. The filter table is 4·Flows byte counters (at least
	// 65,536) indexed by the flow's hash (colliding flows add up), each
	// forgotten after two epochs without a new flow's packet: a flood of
	// one-packet 5-tuples never reaches the flow table, the trigger index
	// or the sweep.
	DoS      int
	BurstGap int64 // ns: packets of a flow closer than this are a run
	BurstLen int   // the run length from which a packet is in a burst
	// Clock returns monotonic ns for the sweep's time budget; nil is the
	// machine's clock.
	Clock func() int64
	// Plain makes the sweep test every flow-trigger pair, without a
	// flow's gate, and a packet update its flow's summary through the
	// general code alone: the simple path, kept to measure the fast one
	// against.
	Plain bool
}

// Stats are the monitor's counters.
type Stats struct {
	Packets     uint64 // packets read
	NoKey       uint64 // packets without an IP header
	NewFlows    uint64 // flows that entered the flow table
	Overflow    uint64 // packets of new flows the full flow table had no room for
	DoSFiltered uint64 // packets of new flows the filter table held back
	Unmatched   uint64 // trigger-flow matches dropped for want of summary words or room in the flow's list
	BucketFull  uint64 // flow contributions the full bucket table had no room for
	Reports     uint64
	Sweeps      uint64 // epochs swept to the end
	Late        uint64 // sweeps finished at the next epoch's end rather than between batches
	Slices      uint64 // sweep steps run between batches
	SweepNs     uint64 // work time of the last complete sweep (all its slices)
	SweepMaxNs  uint64 // the longest
}

// Trigger is an installed event.
type Trigger struct {
	Event event.Event
	id    int32
	alive bool
	m     int64 // interval in epochs
	start int64 // first epoch it accumulates
	units uint64
	aggs  []event.Agg
	aggv  []int // the value each aggregate reads
	rep   event.Expr
	// cmp is set for a predicate "aggregate OP number", the most common
	// shape (Table 2's volumes and losses): tested without event.Eval.
	cmp    string
	cmpNum float64
	gran   gran
	stamp  uint64 // match dedupe

	bhead int32 // its buckets
}

// Fields is the trigger's granularity as its reports' keys hold it.
func (t *Trigger) Fields() []event.Field { return t.gran.fields }

// ReportFunc receives a satisfied bucket: the trigger, its interval's
// start, the bucket's key (a flow's key with the fields the granularity
// drops cleared) and the value the report carries.
type ReportFunc func(t *Trigger, start int64, key *Key, value float64)

// trigHot is what the sweep reads of a trigger for each of its flows, in
// one array by trigger id (no pointer to chase per flow-trigger pair): a
// trigger with the 5-tuple granularity, a one-epoch interval and the
// predicate "sum or count OP number" is tested on the flow's summary word
// unit without event.Eval or the aggregate's general code.
type trigHot struct {
	start int64
	num   float64
	units uint64 // the trigger's units, for a flow that keeps its matches
	unit  int8   // the summary unit the test reads; -1: the general test
	op    uint8
}

const (
	opLT = iota + 1
	opLE
	opGT
	opGE
	opEQ
	opNE
)

func holds(op uint8, v, num float64) bool {
	switch op {
	case opLT:
		return v < num
	case opLE:
		return v <= num
	case opGT:
		return v > num
	case opGE:
		return v >= num
	case opEQ:
		return v == num
	}
	return v != num
}

func opOf(cmp string) uint8 {
	switch cmp {
	case "<":
		return opLT
	case "<=":
		return opLE
	case ">":
		return opGT
	case ">=":
		return opGE
	case "==":
		return opEQ
	}
	return opNE
}

type bucket struct {
	key  Key
	hash uint64
	trig int32
	next int32
}

// Monitor is a Trumpet packet monitor. It is not safe for concurrent use:
// the flowspace serialises Process, Tick and handlers.
type Monitor struct {
	cfg    Config
	report ReportFunc
	ft     flowTable
	sums   []float64 // per flow, per parity, MaxUnits words
	ix     index
	trigs  []*Trigger
	hot    []trigHot // by trigger id
	ntrig  int

	btab    []int32 // bucket+1
	bmask   uint64
	buckets []bucket
	bvals   []float64
	bfree   []int32

	dosCount []uint32
	dosStamp []uint32

	// idle lists the flows the sweeps of the last two epochs (by parity)
	// found dead and kept for their matches; kept counts them while they
	// are. A kept flow is evicted when a new flow finds no room.
	idle [2][]idleRef
	kept int

	started bool
	ended   bool  // End has reported the last interval
	cur     int64 // current epoch
	seq     uint64

	// last lookup
	lastIdx int32
	lastGen uint32
	lastKey Key

	sw sweepState

	pkt      Packet
	bb       batchBuf
	evalT    *Trigger
	evalMask uint64
	evalW    []float64
	evalFn   func(event.Agg) float64
	matchFn  func(int32)
	matchF   int32

	Stats Stats
}

type idleRef struct {
	idx int32
	gen uint32
}

type sweepState struct {
	on       bool
	e        int64
	fi       int // the next flow entry
	ti       int // the next trigger to test, once the flows are gathered
	work     int64
	deadline int64
}

// New returns a monitor reporting through report.
func New(cfg Config, report ReportFunc) (*Monitor, error) {
	if cfg.Epoch <= 0 {
		return nil, errors.New("the epoch must be positive")
	}
	if cfg.Flows < 1 || cfg.Buckets < 1 {
		return nil, errors.New("the flow and bucket tables need room")
	}
	if cfg.Words == 0 {
		cfg.Words = 16
	}
	if cfg.Words < 1 || cfg.Words > MaxUnits {
		return nil, fmt.Errorf("a flow keeps 1 to %d summary words", MaxUnits)
	}
	if cfg.Clock == nil {
		base := time.Now()
		cfg.Clock = func() int64 { return int64(time.Since(base)) }
	}
	if cfg.BurstLen < 1 {
		cfg.BurstLen = 1
	}
	m := &Monitor{cfg: cfg, report: report, lastIdx: -1}
	m.ft = newFlowTable(m, cfg.Flows)
	m.sums = hugeSlice[float64](m, 2*cfg.Words*cfg.Flows)
	m.idle = [2][]idleRef{make([]idleRef, 0, cfg.Flows), make([]idleRef, 0, cfg.Flows)}
	size := 1
	for size < 2*cfg.Buckets {
		size <<= 1
	}
	m.btab, m.bmask = make([]int32, size), uint64(size-1)
	m.buckets = make([]bucket, cfg.Buckets)
	m.bvals = make([]float64, cfg.Buckets*cfg.Words)
	m.bfree = make([]int32, cfg.Buckets)
	for i := range m.bfree {
		m.bfree[i] = int32(cfg.Buckets - 1 - i)
	}
	if cfg.DoS > 0 {
		n := 1 << 16
		for n < 4*cfg.Flows {
			n <<= 1
		}
		m.dosCount = make([]uint32, n)
		m.dosStamp = make([]uint32, n)
	}
	m.evalFn = m.aggOf
	m.matchFn = m.matchOne
	m.trigs = make([]*Trigger, 0, 64)
	return m, nil
}

// Flows is how many flows the table holds, not counting the dead ones it
// keeps only for their matches.
func (m *Monitor) Flows() int { return m.ft.len() - m.kept }

// Triggers is how many triggers are installed.
func (m *Monitor) Triggers() int { return m.ntrig }

// Patterns is how many wildcard patterns the trigger index holds.
func (m *Monitor) Patterns() int { return m.ix.patterns() }

// Buckets is how many granularity buckets are open.
func (m *Monitor) Buckets() int { return len(m.buckets) - len(m.bfree) }

// Epoch is the current epoch's number (its start is Epoch()·epoch).
func (m *Monitor) Epoch() int64 { return m.cur }

// Events lists the installed events, in sweep order.
func (m *Monitor) Events() []*Trigger {
	var out []*Trigger
	for _, t := range m.trigs {
		if t != nil && t.alive {
			out = append(out, t)
		}
	}
	return out
}

// Check reports whether an event can be installed on a monitor of this
// epoch whose flows keep words summary words: its interval is a multiple
// of the epoch, its aggregates are known and fit, its filters are sound.
func Check(ev *event.Event, epoch int64, words int) error {
	_, err := compile(ev, epoch, words)
	return err
}

func compile(ev *event.Event, epoch int64, words int) (*Trigger, error) {
	if ev.Interval <= 0 || int64(ev.Interval)%epoch != 0 {
		return nil, fmt.Errorf("the interval %v of event %s is not a multiple of the epoch %v", ev.Interval, ev.Name, time.Duration(epoch))
	}
	if ev.Predicate == nil {
		return nil, fmt.Errorf("event %s has no predicate", ev.Name)
	}
	t := &Trigger{Event: *ev, alive: true, m: int64(ev.Interval) / epoch, bhead: -1,
		aggs: event.Aggregates(ev.Predicate), rep: event.Reported(ev.Predicate), gran: compileGran(ev.Granularity)}
	for _, a := range t.aggs {
		u, err := aggUnits(a)
		if err != nil {
			return nil, fmt.Errorf("event %s: %v", ev.Name, err)
		}
		v, _ := aggSpec(a)
		t.units |= u
		t.aggv = append(t.aggv, v)
	}
	if b, ok := ev.Predicate.(event.Binary); ok {
		_, aggL := b.L.(event.Agg)
		num, numR := b.R.(event.Num)
		switch b.Op {
		case "<", "<=", ">", ">=", "==", "!=":
			if aggL && numR && len(t.aggs) == 1 {
				t.cmp, t.cmpNum = b.Op, float64(num)
			}
		}
	}
	if n := bits.OnesCount64(t.units); n > words {
		return nil, fmt.Errorf("event %s needs %d summary words, more than the %d a flow keeps", ev.Name, n, words)
	}
	for _, f := range ev.Filters {
		if f.SrcIP.IsValid() && f.DstIP.IsValid() && f.SrcIP.Addr().Is4() != f.DstIP.Addr().Is4() {
			return nil, fmt.Errorf("event %s: a filter mixes IPv4 and IPv6 addresses", ev.Name)
		}
	}
	if len(t.Event.Filters) == 0 {
		t.Event.Filters = []event.Filter{{SrcPort: event.AnyPort, DstPort: event.AnyPort, Proto: -1}}
	} else {
		t.Event.Filters = append([]event.Filter(nil), t.Event.Filters...)
	}
	return t, nil
}

// Add installs an event. It starts with the first whole interval after
// the current epoch (at once before the first packet), and the flows
// already in the table that its filters match join it.
func (m *Monitor) Add(ev event.Event) error { return m.AddAt(ev, math.MinInt64) }

// AddAt is Add when the present, now, may be past the current epoch: a
// monitor fed summaries after their epochs lags the packet clock. The
// event starts with the first whole interval after the later of the two.
func (m *Monitor) AddAt(ev event.Event, now int64) error {
	for _, t := range m.trigs {
		if t != nil && t.alive && t.Event.Name == ev.Name {
			return fmt.Errorf("event %s is already installed", ev.Name)
		}
	}
	t, err := compile(&ev, m.cfg.Epoch, m.cfg.Words)
	if err != nil {
		return err
	}
	t.start = math.MinInt64
	if m.started {
		cur := max(m.cur, floorDiv(now, m.cfg.Epoch))
		t.start = (cur/t.m + 1) * t.m
	}
	// A slot is never reused, so that a flow's list of triggers needs no
	// generation: a removed trigger's slot stays nil.
	t.id = int32(len(m.trigs))
	m.trigs = append(m.trigs, t)
	h := trigHot{start: t.start, units: t.units, unit: -1}
	if t.gran.five && t.m == 1 && t.cmp != "" {
		if v := t.aggv[0]; v < 0 {
			h.unit, h.op, h.num = unitCount, opOf(t.cmp), t.cmpNum
		} else if a := t.aggs[0]; a.Func == "sum" && v < SAck {
			h.unit, h.op, h.num = unitOf[v][sSum], opOf(t.cmp), t.cmpNum
		}
	}
	m.hot = append(m.hot, h)
	m.ntrig++
	for i := range t.Event.Filters {
		m.ix.add(t.id, &t.Event.Filters[i])
	}
	// The flows already here, the dead ones too: they keep their matches
	// for their return.
	for i := 0; m.ft.len() > 0 && i < len(m.ft.pool); i++ {
		f := &m.ft.pool[i]
		if !f.used {
			continue
		}
		m.seq++
		for j := range t.Event.Filters {
			if matchFilter(&t.Event.Filters[j], &f.key) {
				m.join(t, int32(i))
				break
			}
		}
		if f.last == m.cur && !m.dead(f) && f.units != 0 {
			// Its next packet in the epoch takes the fast path, which
			// needs the epoch's summary ready (a flow that had no unit).
			m.epochWords(f, int32(i))
		}
	}
	return nil
}

// Remove uninstalls the event named name; the others keep their state.
func (m *Monitor) Remove(name string) error {
	for i, t := range m.trigs {
		if t == nil || !t.alive || t.Event.Name != name {
			continue
		}
		m.ix.remove(t.id)
		for b := t.bhead; b >= 0; {
			next := m.buckets[b].next
			m.freeBucket(b)
			b = next
		}
		t.alive = false
		m.trigs[i] = nil
		m.ntrig--
		return nil
	}
	return fmt.Errorf("no event named %s is installed", name)
}

// Deadline is the end of the current epoch; before the first packet it is
// due at once, so the first tick starts the epoch clock.
func (m *Monitor) Deadline() int64 {
	if !m.started {
		return math.MinInt64
	}
	return (m.cur + 1) * m.cfg.Epoch
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if q*b > a {
		q--
	}
	return q
}

// Tick ends the epochs that end at or before now: the unfinished sweep is
// finished, and the sweep of the epoch that ended begins.
func (m *Monitor) Tick(now int64) {
	ne := floorDiv(now, m.cfg.Epoch)
	if !m.started {
		m.started, m.cur = true, ne
		return
	}
	if ne <= m.cur {
		return
	}
	if m.sw.on {
		m.Stats.Late++
		m.finish()
	}
	m.startSweep(m.cur)
	if ne > m.cur+1 {
		// Epochs without packets: the sweep of the last one with packets
		// ends now, and intervals that ended in the gap are reported.
		m.finish()
		for _, t := range m.trigs {
			if t == nil || t.bhead < 0 {
				continue
			}
			end := (m.cur/t.m + 1) * t.m // first interval end after epoch cur
			if end <= ne {
				m.evaluate(t, end-t.m)
			}
		}
	}
	m.cur = ne
}

// Flush ends the epochs that end at or before now (as Tick) and finishes
// the pending sweep: the reports due by now are out. It reports nothing
// of the epoch now is in; End does, at the end of the input.
func (m *Monitor) Flush(now int64) {
	if m.started && now >= m.Deadline() {
		m.Tick(now)
	}
	m.finish()
}

// End ends the input at now. The epochs that ended by now are swept as
// Tick sweeps them; then the last epoch, the one now is in, which the
// input did not see to its end, is swept as if it had ended, and every
// interval that holds it is tested on the packets it saw and reported,
// its report's time its start, as the other windowed classes report their
// last window. A monitor fed summaries (Summarise) whose drains have
// ended that epoch already reports the intervals it did not end. After
// End the monitor reports nothing more: a second End does nothing.
func (m *Monitor) End(now int64) {
	if !m.started || m.ended {
		return
	}
	m.ended = true
	if last := floorDiv(now, m.cfg.Epoch); last >= m.cur {
		m.Flush((last + 1) * m.cfg.Epoch)
	} else {
		m.finish()
	}
	e := m.cur - 1 // the last epoch, swept
	for _, t := range m.trigs {
		if t != nil && t.bhead >= 0 {
			m.evaluate(t, floorDiv(e, t.m)*t.m)
		}
	}
}

// Pending says whether a sweep waits for time between batches.
func (m *Monitor) Pending() bool { return m.sw.on }

// Sweep runs the pending sweep for about budget ns (at least one step);
// it reports whether the sweep is done.
func (m *Monitor) Sweep(budget int64) bool {
	if !m.sw.on {
		return true
	}
	m.Stats.Slices++
	t0 := m.cfg.Clock()
	m.sw.deadline = t0 + budget
	done := m.step(true)
	m.sw.work += m.cfg.Clock() - t0
	if done {
		m.endSweep()
	}
	return done
}

func (m *Monitor) finish() {
	if !m.sw.on {
		return
	}
	t0 := m.cfg.Clock()
	m.step(false)
	m.sw.work += m.cfg.Clock() - t0
	m.endSweep()
}

func (m *Monitor) startSweep(e int64) {
	m.sw = sweepState{on: true, e: e}
	// The flows the sweep of e-2 kept are gone (freed by the sweep of
	// e-1, or back and reset).
	m.idle[e&1] = m.idle[e&1][:0]
}

func (m *Monitor) endSweep() {
	m.sw.on = false
	m.Stats.Sweeps++
	m.Stats.SweepNs = uint64(m.sw.work)
	m.Stats.SweepMaxNs = max(m.Stats.SweepMaxNs, uint64(m.sw.work))
}

// dead says whether a flow has had no packet for a whole epoch before
// the current one: its state is forgotten.
func (m *Monitor) dead(f *flow) bool { return f.last < m.cur-1 }

func (m *Monitor) words(idx int32, parity int64) []float64 {
	n := m.cfg.Words
	o := (int(idx)*2 + int(parity&1)) * n
	return m.sums[o : o+n : o+n]
}

// step runs the sweep; bounded, it returns at the budget with its state
// kept, and reports whether it is done. It walks the flow table in order
// (memory order: the summaries stream through the cache), and gathers
// each flow's summary into the triggers it matched; then it tests the
// triggers whose interval ends with the epoch. A flow without a packet in
// the epoch is dead: the first sweep to find it so keeps it for its
// matches (a flow that comes back after an idle epoch is forgotten, but
// matching it again against the trigger index is most of a new flow's
// cost), the next one frees it.
func (m *Monitor) step(bounded bool) bool {
	sw := &m.sw
	n := 0
	for ; sw.fi < len(m.ft.pool); sw.fi++ {
		if n++; bounded && n&63 == 0 && m.cfg.Clock() >= sw.deadline {
			return false
		}
		f := &m.ft.pool[sw.fi]
		if !f.used {
			continue
		}
		if f.last < sw.e { // no packet in the epoch: dead
			if f.kept || f.last < sw.e-1 { // (after epochs without a sweep)
				m.forget(int32(sw.fi))
			} else {
				f.kept = true
				m.kept++
				m.idle[sw.e&1] = append(m.idle[sw.e&1], idleRef{int32(sw.fi), f.gen})
			}
			continue
		}
		if f.stamp[sw.e&1] != sw.e {
			continue
		}
		w := m.words(int32(sw.fi), sw.e)
		if f.gateUnit >= 0 && !m.cfg.Plain {
			// None of its triggers can hold: its triggers' line is not
			// read.
			if v := w[bits.OnesCount64(f.units&(1<<f.gateUnit-1))]; v < f.gate || v == f.gate && f.gateOp == opGT {
				continue
			}
		}
		k := 0
		for i, id := range f.tl[:f.ntl] {
			t := m.trigs[id]
			if t == nil {
				continue // removed: forgotten here
			}
			if k != i || m.cfg.Plain {
				f.tl[k] = id // written only when it moves: a clean line is not written back
			}
			k++
			h := &m.hot[id]
			switch {
			case sw.e < h.start:
			case h.unit >= 0:
				if v := w[bits.OnesCount64(f.units&(1<<h.unit-1))]; holds(h.op, v, h.num) {
					m.Stats.Reports++
					if m.report != nil {
						m.report(t, sw.e*m.cfg.Epoch, &f.key, v)
					}
				}
			default:
				m.gather(t, f, w)
			}
		}
		if k != int(f.ntl) || m.cfg.Plain {
			f.ntl = uint8(k)
		}
	}
	for ; sw.ti < len(m.trigs); sw.ti++ {
		t := m.trigs[sw.ti]
		if t == nil || sw.e < t.start || (sw.e+1)%t.m != 0 || t.bhead < 0 {
			continue
		}
		m.evaluate(t, sw.e+1-t.m)
		if n += 64; bounded && m.cfg.Clock() >= sw.deadline {
			sw.ti++
			return false
		}
	}
	return true
}

// gather adds a flow's epoch summary to its bucket of t (or, for a 5-tuple
// granularity and a one-epoch interval, tests it at once).
func (m *Monitor) gather(t *Trigger, f *flow, w []float64) {
	if t.gran.five && t.m == 1 {
		m.test(t, m.sw.e*m.cfg.Epoch, &f.key, f.units, w)
		return
	}
	k := t.gran.bucket(&f.key)
	b := m.bucketOf(t, &k)
	if b < 0 {
		m.Stats.BucketFull++
		return
	}
	o := int(b) * m.cfg.Words
	mergeUnits(t.units, m.bvals[o:o+m.cfg.Words], f.units, w)
}

// aggOf is the value of one of the trigger's aggregates, for event.Eval.
func (m *Monitor) aggOf(a event.Agg) float64 {
	t := m.evalT
	for i := range t.aggs {
		if t.aggs[i] == a {
			return aggValue(a, t.aggv[i], m.evalMask, m.evalW)
		}
	}
	return math.NaN()
}

// test evaluates t's predicate on the words w (of units mask) and reports
// a satisfied bucket.
func (m *Monitor) test(t *Trigger, start int64, k *Key, mask uint64, w []float64) {
	if t.cmp != "" {
		v := aggValue(t.aggs[0], t.aggv[0], mask, w)
		if holds(opOf(t.cmp), v, t.cmpNum) {
			m.Stats.Reports++
			if m.report != nil {
				m.report(t, start, k, v)
			}
		}
		return
	}
	m.evalT, m.evalMask, m.evalW = t, mask, w
	if event.Eval(t.Event.Predicate, m.evalFn) != 0 {
		m.Stats.Reports++
		if m.report != nil {
			m.report(t, start, k, event.Eval(t.rep, m.evalFn))
		}
	}
}

// evaluate tests t's buckets of the interval starting at epoch startEpoch
// and empties them.
func (m *Monitor) evaluate(t *Trigger, startEpoch int64) {
	start := startEpoch * m.cfg.Epoch
	for b := t.bhead; b >= 0; {
		bk := &m.buckets[b]
		next := bk.next
		o := int(b) * m.cfg.Words
		m.test(t, start, &bk.key, t.units, m.bvals[o:o+m.cfg.Words])
		m.freeBucket(b)
		b = next
	}
	t.bhead = -1
}

func (m *Monitor) bucketOf(t *Trigger, k *Key) int32 {
	h := k.hash() ^ uint64(t.id)*0x9e3779b97f4a7c15
	i := h & m.bmask
	for ; m.btab[i] != 0; i = (i + 1) & m.bmask {
		b := m.btab[i] - 1
		if bk := &m.buckets[b]; bk.hash == h && bk.trig == t.id && bk.key == *k {
			return b
		}
	}
	if len(m.bfree) == 0 {
		return -1
	}
	b := m.bfree[len(m.bfree)-1]
	m.bfree = m.bfree[:len(m.bfree)-1]
	m.btab[i] = b + 1
	m.buckets[b] = bucket{key: *k, hash: h, trig: t.id, next: t.bhead}
	t.bhead = b
	o := int(b) * m.cfg.Words
	resetUnits(t.units, m.bvals[o:o+m.cfg.Words])
	return b
}

func (m *Monitor) freeBucket(b int32) {
	h := m.buckets[b].hash
	i := h & m.bmask
	for m.btab[i] != b+1 {
		i = (i + 1) & m.bmask
	}
	m.btab[i] = 0
	for j := (i + 1) & m.bmask; m.btab[j] != 0; j = (j + 1) & m.bmask {
		home := m.buckets[m.btab[j]-1].hash & m.bmask
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			m.btab[i], m.btab[j] = m.btab[j], 0
			i = j
		}
	}
	m.bfree = append(m.bfree, b)
}

// join adds t to flow idx's triggers and t's units to its summary.
func (m *Monitor) join(t *Trigger, idx int32) {
	if t.stamp == m.seq {
		return // another filter of t matched already
	}
	t.stamp = m.seq
	f := &m.ft.pool[idx]
	units := f.units | t.units
	if bits.OnesCount64(units) > m.cfg.Words || int(f.ntl) == len(f.tl) {
		m.Stats.Unmatched++
		return
	}
	f.tl[f.ntl] = t.id
	f.ntl++
	m.narrow(f, t.id, f.ntl == 1)
	if units != f.units {
		for p := range int64(2) {
			if f.stamp[p] >= m.cur-1 {
				relayout(f.units, units, m.words(idx, p))
			}
		}
		m.ft.setUnits(idx, units)
		f.vars = varsOf(units)
	}
}

// narrow narrows f's gate to the trigger id that joined it (first: the
// only one). The gate holds while every trigger of the flow is a fast test
// "unit > number" or ">=" of one unit: its number is the lowest of
// theirs. A removed trigger leaves it lower than it could be, never higher.
func (m *Monitor) narrow(f *flow, id int32, first bool) {
	h := &m.hot[id]
	switch {
	case h.unit < 0 || h.op != opGT && h.op != opGE:
		f.gateUnit = -1
	case first:
		f.gate, f.gateUnit, f.gateOp = h.num, h.unit, h.op
	case f.gateUnit != h.unit:
		f.gateUnit = -1
	default:
		f.gate = min(f.gate, h.num)
		if h.op == opGE {
			f.gateOp = opGE
		}
	}
}

func (m *Monitor) matchOne(trig int32) { m.join(m.trigs[trig], m.matchF) }

// Process reads one packet (captured bytes pkt, its time and wire
// length) into the monitor.
func (m *Monitor) Process(pkt []byte, ts int64, wirelen uint32) {
	m.Stats.Packets++
	p := &m.pkt
	if !Parse(m.cfg.LinkType, pkt, ts, wirelen, p) {
		m.Stats.NoKey++
		return
	}
	m.Packet(p)
}

// BatchMax is how many packets ProcessBatch looks up together.
const BatchMax = 64

// batchBuf is ProcessBatch's staging: the packets parsed, their hashes
// and the flow index slots their lookups start at.
type batchBuf struct {
	p      [BatchMax]Packet
	h      [BatchMax]uint64
	e      [BatchMax]uint64
	hashed [BatchMax]bool
	sink   uint64
}

// ProcessBatch reads n packets, the i-th given by at(i), exactly as n
// calls of Process in order would. It works in groups of BatchMax: it
// parses and hashes a group and reads each packet's flow index slot, then
// the flow entries' first lines those slots point to, then the current
// summaries of those that keep one, and only then processes the packets one by one. The reads of a
// group do not depend on each other, so their cache misses overlap
// instead of coming one per packet; the processing then finds the lines
// in the cache.
func (m *Monitor) ProcessBatch(n int, at func(i int) (pkt []byte, ts int64, wirelen uint32)) {
	bb := &m.bb
	for base := 0; base < n; base += BatchMax {
		k := 0
		for i := base; i < min(n, base+BatchMax); i++ {
			data, ts, wl := at(i)
			m.Stats.Packets++
			p := &bb.p[k]
			var ok bool
			if plainIPv4(m.cfg.LinkType, data) { // Parse, a call shorter
				ok = parseIPv4(data, ts, wl, p)
			} else {
				ok = parse(m.cfg.LinkType, data, ts, wl, p)
			}
			if !ok {
				m.Stats.NoKey++
				continue
			}
			// The packet after one of its flow finds the last lookup.
			if bb.hashed[k] = k == 0 || !p.Key.eq(&bb.p[k-1].Key); bb.hashed[k] {
				h := p.Key.hash()
				bb.h[k], bb.e[k] = h, m.ft.tab[h&m.ft.mask]
			}
			k++
		}
		// bb.e becomes the entry the slot points to, +1 (0: none). With
		// the entry's line, the summary's of a flow that keeps one: the
		// bitmap says so, so that the two misses overlap (Plain: the
		// summaries after the entries, whose units say).
		var sink uint64
		words, par := m.cfg.Words, int(m.cur&1)
		for j := range k {
			if e := bb.e[j]; bb.hashed[j] && e>>32 == bb.h[j]&0xffffffff && e != 0 {
				idx := uint32(e) - 1
				bb.e[j] = uint64(idx + 1)
				sink += uint64(m.ft.pool[idx].last)
				if !m.cfg.Plain && m.ft.keepsSummary(idx) {
					sink += math.Float64bits(m.sums[(int(idx)*2+par)*words])
				}
			} else {
				bb.e[j] = 0
			}
		}
		for j := range k {
			if e := int(bb.e[j]); m.cfg.Plain && e != 0 && m.ft.pool[e-1].units != 0 {
				sink += math.Float64bits(m.sums[((e-1)*2+par)*words])
			}
		}
		bb.sink += sink
		for j := range k {
			m.packet(&bb.p[j], bb.h[j], bb.hashed[j])
		}
	}
}

// Packet processes a parsed packet. A packet of a flow already seen in
// the epoch reads the flow entry's first line and its summary words; the
// flow's first packet in an epoch takes the slow path (forgetting an idle
// flow, emptying the epoch's summary).
func (m *Monitor) Packet(p *Packet) { m.packet(p, 0, false) }

// packet is Packet with the key's hash h when hashed.
func (m *Monitor) packet(p *Packet, h uint64, hashed bool) {
	var idx int32
	fresh := false
	if m.lastIdx >= 0 && p.Key.eq(&m.lastKey) && m.ft.pool[m.lastIdx].gen == m.lastGen {
		idx = m.lastIdx
	} else {
		if !hashed {
			h = p.Key.hash()
		}
		idx = m.ft.find(&p.Key, h)
		if idx < 0 {
			if idx = m.newFlow(p, h); idx < 0 {
				return
			}
			fresh = true
		}
		m.lastIdx, m.lastGen, m.lastKey = idx, m.ft.pool[idx].gen, p.Key
	}
	f := &m.ft.pool[idx]
	// f.last == m.cur says the summary of the epoch is ready (stamped by
	// epochWords), except for a flow set up just now.
	if (f.last != m.cur || fresh) && !m.firstOfEpoch(f, idx, p) {
		return
	}
	if p.TCP && p.Flags&FlagACK != 0 && f.rev >= 0 {
		m.ackRTT(f, p)
	}
	if f.units != 0 {
		m.update(f, m.words(idx, m.cur), p)
	}
}

// firstOfEpoch readies a flow for its first packet of the epoch; it
// reports false when the flow came back from the dead and the filter
// table holds the packet back.
func (m *Monitor) firstOfEpoch(f *flow, idx int32, p *Packet) bool {
	if m.dead(f) {
		// Idle for a whole epoch: forgotten, a new flow but for its
		// matches, and as a new flow it passes the filter table.
		if !m.admit(f.hash, p.WireLen) {
			m.forget(idx)
			m.lastIdx = -1
			return false
		}
		m.reset(idx)
		m.lastGen = f.gen
	}
	f.last = m.cur
	if f.units != 0 {
		m.epochWords(f, idx)
	}
	return true
}

// admit counts a new flow's packet in the filter table and reports
// whether the flow has sent enough to enter the flow table.
func (m *Monitor) admit(h uint64, wirelen uint32) bool {
	if m.dosCount == nil {
		return true
	}
	i := h & uint64(len(m.dosCount)-1)
	if uint32(m.cur)-m.dosStamp[i] > 1 {
		m.dosCount[i] = 0
	}
	m.dosStamp[i] = uint32(m.cur)
	m.dosCount[i] = min(m.dosCount[i]+wirelen, 1<<30)
	if m.dosCount[i] < uint32(m.cfg.DoS) {
		m.Stats.DoSFiltered++
		return false
	}
	return true
}

// forget frees a flow's entry.
func (m *Monitor) forget(idx int32) {
	if m.ft.pool[idx].kept {
		m.kept--
	}
	m.ft.remove(idx)
}

// evict frees a dead flow kept for its matches, to make room; it reports
// whether there was one.
func (m *Monitor) evict() bool {
	for p := range m.idle {
		l := m.idle[p]
		for len(l) > 0 {
			r := l[len(l)-1]
			l = l[:len(l)-1]
			if f := &m.ft.pool[r.idx]; f.used && f.gen == r.gen && f.kept {
				m.idle[p] = l
				m.forget(r.idx)
				return true
			}
		}
		m.idle[p] = l
	}
	return false
}

func (m *Monitor) newFlow(p *Packet, h uint64) int32 {
	if !m.admit(h, p.WireLen) {
		return -1
	}
	idx := m.ft.insert(&p.Key, h)
	if idx < 0 && m.evict() {
		idx = m.ft.insert(&p.Key, h)
	}
	if idx < 0 {
		m.Stats.Overflow++
		return -1
	}
	m.Stats.NewFlows++
	m.setup(idx)
	return idx
}

// setup links a new flow to its other direction and matches it against
// the triggers.
func (m *Monitor) setup(idx int32) {
	m.link(idx)
	m.seq++
	m.matchF = idx
	m.ix.match(&m.ft.pool[idx].key, m.matchFn)
}

// link links a new (or reset) flow and the flow of its other direction.
func (m *Monitor) link(idx int32) {
	f := &m.ft.pool[idx]
	f.last = m.cur
	rk := f.key.reverse()
	if r := m.ft.find(&rk, rk.hash()); r >= 0 && r != idx {
		rf := &m.ft.pool[r]
		f.rev, f.revGen = r, rf.gen
		rf.rev, rf.revGen = idx, f.gen
	}
}

// reset forgets a flow that came back after an idle epoch: new state, the
// same matches. They are what matching it again would give, since Add
// joins the dead flows too; the triggers removed meanwhile leave, with
// their units.
func (m *Monitor) reset(idx int32) {
	f := &m.ft.pool[idx]
	if f.kept {
		m.kept--
	}
	tl, ntl := f.tl, f.ntl
	*f = flow{key: f.key, hash: f.hash, gen: f.gen + 1, used: true, rev: -1, stamp: [2]int64{-1 << 62, -1 << 62}}
	var units uint64
	for _, id := range tl[:ntl] {
		if m.trigs[id] != nil {
			f.tl[f.ntl] = id
			f.ntl++
			m.narrow(f, id, f.ntl == 1)
			units |= m.hot[id].units
		}
	}
	m.ft.setUnits(idx, units)
	f.vars = varsOf(units)
	m.Stats.NewFlows++
	m.link(idx)
}

func unwrap(last uint64, v uint32) uint64 { return last + uint64(int64(int32(v-uint32(last)))) }

// update computes the flow's values of the packet and adds them to the
// current epoch's summary.
func (m *Monitor) update(f *flow, w []float64, p *Packet) {
	vars := f.vars
	if vars&^plainVars == 0 && !m.cfg.Plain {
		// Only values every packet defines (volume, ttl, ecn): each unit
		// takes its value straight from the packet; the volume's sum (and
		// the count), the most common summary, at once.
		switch f.units {
		case unitsVolume:
			w[0] += float64(p.Payload)
			return
		case unitsCountVolume:
			w[0]++
			w[1] += float64(p.Payload)
			return
		}
		i := 0
		for u := f.units; u != 0; u &= u - 1 {
			if k := bits.TrailingZeros64(u); k == unitCount {
				w[i]++
			} else {
				d := units[k]
				x := float64(p.Payload)
				switch d.v {
				case VTTL:
					x = float64(p.TTL)
				case VECN:
					x = 0
					if p.ECN == 3 {
						x = 1
					}
				}
				add(&w[i], int(d.s), x)
			}
			i++
		}
		return
	}
	var val [nValues]float64
	val[VVolume], val[VTTL] = float64(p.Payload), float64(p.TTL)
	if p.ECN == 3 {
		val[VECN] = 1
	}
	def := uint32(1<<VVolume | 1<<VECN | 1<<VTTL)
	if vars&(1<<VBurst|1<<VECNBurst|1<<VLostBurst) != 0 {
		if f.burstInit && p.TS-f.burstLast < m.cfg.BurstGap {
			f.burstRun++
		} else {
			f.burstRun = 1
		}
		f.burstInit, f.burstLast = true, p.TS
		if int(f.burstRun) >= m.cfg.BurstLen {
			val[VBurst] = 1
		}
		def |= 1<<VBurst | 1<<VECNBurst
		val[VECNBurst] = val[VECN] * val[VBurst]
	}
	if p.TCP {
		m.tcp(f, p, vars, &val, &def)
	}
	if def&(1<<VLost) != 0 {
		def |= 1 << VECNLost
		val[VECNLost] = val[VECN] * val[VLost]
		if def&(1<<VBurst) != 0 {
			def |= 1 << VLostBurst
			val[VLostBurst] = val[VLost] * val[VBurst]
		}
	}
	i := 0
	for u := f.units; u != 0; u &= u - 1 {
		k := bits.TrailingZeros64(u)
		if k == unitCount {
			w[i]++
			i++
			continue
		}
		d := units[k]
		switch d.s {
		case sLast:
			w[i] = m.state(f, int(d.v))
		case sPrev:
		default:
			if def&(1<<d.v) != 0 {
				add(&w[i], int(d.s), val[d.v])
			}
		}
		i++
	}
}

// plainVars are the values every packet defines, from its headers alone.
const plainVars = 1<<VVolume | 1<<VTTL | 1<<VECN

// The units of a flow whose triggers sum the volume (and count packets):
// Trumpet's heavy hitters, and the most common summary (set with units).
var unitsVolume, unitsCountVolume uint64

func add(w *float64, s int, x float64) {
	switch s {
	case sN:
		*w++
	case sSum:
		*w += x
	case sSq:
		*w += x * x
	case sMin:
		*w = min(*w, x)
	case sMax:
		*w = max(*w, x)
	}
}

// epochWords returns the flow's summary of the current epoch, emptied at
// its first use in the epoch, when the state variables' previous values
// are taken.
func (m *Monitor) epochWords(f *flow, idx int32) []float64 {
	w := m.words(idx, m.cur)
	if f.stamp[m.cur&1] != m.cur {
		resetUnits(f.units, w)
		f.stamp[m.cur&1] = m.cur
		i := 0
		for u := f.units; u != 0; u &= u - 1 {
			if d := units[bits.TrailingZeros64(u)]; d.s == sPrev {
				w[i] = m.state(f, int(d.v))
			}
			i++
		}
	}
	return w
}

// state is the current value of a state variable, NaN before the flow
// had it.
func (m *Monitor) state(f *flow, v int) float64 {
	switch {
	case v == SSeq && f.seqInit:
		return float64(f.seqMax)
	case v == SAck && f.ackInit:
		return float64(f.ackLast)
	case v == SDup && f.ackInit:
		return float64(f.dup)
	}
	return math.NaN()
}

const seqVars = 1<<VSeq | 1<<VLost | 1<<VRTT | 1<<SSeq | 1<<VECNLost | 1<<VLostBurst

func (m *Monitor) tcp(f *flow, p *Packet, vars uint32, val *[nValues]float64, def *uint32) {
	if vars&(1<<VRwnd) != 0 {
		if p.Flags&FlagSYN != 0 {
			f.wscale = max(p.WScale, 0)
			val[VRwnd] = float64(p.Win)
		} else {
			val[VRwnd] = float64(uint64(p.Win) << uint(f.wscale))
		}
		*def |= 1 << VRwnd
	}
	if vars&seqVars != 0 {
		s := uint64(p.Seq)
		if f.seqInit {
			s = unwrap(f.seqLast, p.Seq)
			f.seqMax = max(f.seqMax, s)
		} else {
			f.seqMax = s
		}
		f.seqInit, f.seqLast = true, s
		val[VSeq] = float64(s)
		lost := false
		if p.Payload > 0 {
			end := s + uint64(p.Payload)
			lost = f.maxEnd != 0 && s < f.maxEnd
			f.maxEnd = max(f.maxEnd, end)
			if vars&(1<<VRTT) != 0 {
				switch {
				case lost && f.rttOn && int32(uint32(s)-f.rttEnd) < 0:
					f.rttOn = false // Karn: a retransmission spoils the sample
				case !lost && !f.rttOn:
					f.rttOn, f.rttEnd, f.rttTS = true, uint32(end), p.TS
				}
			}
		}
		if lost {
			val[VLost] = 1
		}
		*def |= 1<<VSeq | 1<<VLost
	}
	if p.Flags&FlagACK != 0 && vars&(1<<VAck|1<<VDup|1<<SAck|1<<SDup) != 0 {
		a := uint64(p.Ack)
		if f.ackInit {
			a = unwrap(f.ackLast, p.Ack)
			pure := p.Payload == 0 && p.Flags&(FlagSYN|FlagFIN|FlagRST) == 0
			switch {
			case a == f.ackLast && pure:
				f.dup += 1460
			case a > f.ackLast:
				f.dup -= min(f.dup, a-f.ackLast)
			}
		}
		f.ackInit, f.ackLast = true, max(a, f.ackLast)
		val[VAck], val[VDup] = float64(a), float64(f.dup)
		*def |= 1<<VAck | 1<<VDup
	}
}

// ackRTT takes an RTT sample for the other direction's timed segment when
// p acknowledges all of it.
func (m *Monitor) ackRTT(f *flow, p *Packet) {
	ri := f.rev
	r := &m.ft.pool[ri]
	if r.gen != f.revGen || !r.used || !r.rttOn || m.dead(r) || int32(p.Ack-r.rttEnd) < 0 {
		return
	}
	r.rttOn = false
	r.last = m.cur // a flow with a sample is alive in the epoch
	x := float64(p.TS - r.rttTS)
	w := m.epochWords(r, ri)
	i := 0
	for u := r.units; u != 0; u &= u - 1 {
		if d := units[bits.TrailingZeros64(u)]; d.v == VRTT {
			add(&w[i], int(d.s), x)
		}
		i++
	}
}
