package collector

import (
	"errors"
	"fmt"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/ffpf-go/ffpf/functions/dta/wire"
)

// Reason says why a report was not ingested. The first three are the
// codec's (wire.Reason); the others are the collector's.
type Reason uint8

const (
	ReasonShort             = Reason(wire.ReasonShort)    // shorter than its headers
	ReasonOpcode            = Reason(wire.ReasonOpcode)   // an opcode no primitive has
	ReasonTrailing          = Reason(wire.ReasonTrailing) // longer than its report: a length that lies
	ReasonList       Reason = 4                           // an Append list id the collector does not host
	ReasonRedundancy Reason = 5                           // Key-Write or Key-Increment with N = 0 or N > MaxRedundancy
	ReasonHop        Reason = 6                           // a postcard's hop at or past B
	ReasonValue      Reason = 7                           // a postcard's value outside V
	ReasonDisabled   Reason = 8                           // a primitive the collector was not configured for
	numReasons              = 9
)

// Reasons lists every Reason, for counters and metrics labels.
var Reasons = []Reason{ReasonShort, ReasonOpcode, ReasonTrailing, ReasonList, ReasonRedundancy, ReasonHop, ReasonValue, ReasonDisabled}

func (r Reason) String() string {
	switch r {
	case ReasonShort, ReasonOpcode, ReasonTrailing:
		return wire.Reason(r).String()
	case ReasonList:
		return "list"
	case ReasonRedundancy:
		return "redundancy"
	case ReasonHop:
		return "hop"
	case ReasonValue:
		return "value"
	case ReasonDisabled:
		return "disabled"
	}
	return "unknown"
}

// Primitives names the primitives in opcode order, for counters.
var Primitives = []wire.Opcode{wire.KeyWrite, wire.Append, wire.KeyIncrement, wire.Postcarding}

// counts is what ingest counts: reports accepted by opcode, refused by
// reason, and those that asked for an ACK.
type counts struct {
	reports   [5]uint64 // by opcode; Append counts entries, Postcarding postcards
	dropped   [numReasons]uint64
	immediate uint64
	outside   uint64 // a translator's writes outside the memory (Apply)
}

// Collector is a DTA collector's memory and its counters. Ingest and the
// memory writes may run on several goroutines at once, and queries
// alongside them.
type Collector struct {
	cfg Config
	kw  *keyWrite
	ki  *keyIncrement
	ap  *appendLists
	pc  *postcarding
	n   counts // updated atomically
}

// New allocates the memory cfg describes, all of it at once and touched,
// so that ingest never waits for the kernel to find a page. It refuses a
// configuration larger than half the machine's memory.
func New(cfg Config) (*Collector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.CheckMemory(); err != nil {
		return nil, err
	}
	c := &Collector{cfg: cfg}
	if cfg.KeyWrite.Enabled() {
		c.kw = newKeyWrite(cfg.KeyWrite)
	}
	if cfg.KeyIncrement.Enabled() {
		c.ki = newKeyIncrement(cfg.KeyIncrement)
	}
	if cfg.Append.Enabled() {
		c.ap = newAppendLists(cfg.Append)
	}
	if cfg.Postcarding.Enabled() {
		c.pc = newPostcarding(cfg.Postcarding)
	}
	return c, nil
}

// CheckMemory refuses a configuration larger than half the machine's
// memory, which New would refuse: a command checks it with the rest of
// its flags (a usage error).
func (c *Config) CheckMemory() error {
	if b, lim := c.Bytes(), memLimit(); b > lim {
		return fmt.Errorf("the collector's memory would be %d MiB, more than half of this machine's (%d MiB)", b>>20, lim>>20)
	}
	return nil
}

func memLimit() uint64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 1 << 40
	}
	return uint64(si.Totalram) * uint64(si.Unit) / 2
}

// prefault touches a page in every 4 KiB.
func prefault64(s []uint64) []uint64 {
	for i := 0; i < len(s); i += 512 {
		s[i] = 0
	}
	return s
}

func prefault32(s []uint32) []uint32 {
	for i := 0; i < len(s); i += 1024 {
		s[i] = 0
	}
	return s
}

// Config returns the configuration, defaults filled in.
func (c *Collector) Config() Config { return c.cfg }

// Ingest writes one decoded report into memory, as a translator in front
// of the collector would, and counts it: accepted, or refused for a
// reason (returned; 0 when accepted).
func (c *Collector) Ingest(r *wire.Report) Reason {
	why := c.apply(r)
	c.n.count(r, why)
	return why
}

func (n *counts) count(r *wire.Report, why Reason) {
	if why != 0 {
		atomic.AddUint64(&n.dropped[why], 1)
		return
	}
	atomic.AddUint64(&n.reports[r.Op], 1)
	if r.Immediate {
		atomic.AddUint64(&n.immediate, 1)
	}
}

// IngestPayload decodes the report a UDP payload holds and ingests it;
// a payload that is no report is counted by its reason.
func (c *Collector) IngestPayload(b []byte) Reason {
	var r wire.Report
	if why := decode(b, &r); why != 0 {
		atomic.AddUint64(&c.n.dropped[why], 1)
		return why
	}
	return c.Ingest(&r)
}

// decode is wire.Decode for the datapath: a payload it refuses is
// classified first, so that a flood of bad payloads allocates no error.
func decode(b []byte, r *wire.Report) Reason {
	if len(b) < wire.BaseLen {
		return ReasonShort
	}
	probe := wire.Report{Op: wire.Opcode(b[0])}
	switch n := probe.Len(); {
	case n == 0:
		return ReasonOpcode
	case len(b) < n:
		return ReasonShort
	case len(b) > n:
		return ReasonTrailing
	}
	if err := wire.Decode(b, r); err != nil {
		var e *wire.Error
		if errors.As(err, &e) {
			return Reason(e.Reason)
		}
		return ReasonShort
	}
	return 0
}

// apply is the translation of one report into memory writes.
func (c *Collector) apply(r *wire.Report) Reason {
	switch r.Op {
	case wire.KeyWrite:
		if c.kw == nil {
			return ReasonDisabled
		}
		if r.Redundancy == 0 || r.Redundancy > MaxRedundancy {
			return ReasonRedundancy
		}
		c.kw.write(r.Key, r.Data, int(r.Redundancy))
	case wire.KeyIncrement:
		if c.ki == nil {
			return ReasonDisabled
		}
		if r.Redundancy == 0 || r.Redundancy > MaxRedundancy {
			return ReasonRedundancy
		}
		c.ki.add(r.Key, r.Counter, int(r.Redundancy))
	case wire.Append:
		if c.ap == nil {
			return ReasonDisabled
		}
		if r.List >= c.cfg.Append.Lists {
			return ReasonList
		}
		c.ap.write1(r.List, r.Data)
	case wire.Postcarding:
		if c.pc == nil {
			return ReasonDisabled
		}
		if int(r.Hop) >= c.pc.hops {
			return ReasonHop
		}
		if r.Data >= c.pc.values {
			return ReasonValue
		}
		c.pc.writeHop(r.Key, int(r.Hop), r.Data)
	default:
		return ReasonOpcode
	}
	return 0
}

// Ingester ingests on one goroutine: it counts in its own counters, which
// Flush adds to the collector's, so that cores ingesting side by side do
// not contend for the counters' cache line on every report.
type Ingester struct {
	c *Collector
	n counts
}

// NewIngester returns an ingester for one goroutine.
func (c *Collector) NewIngester() *Ingester { return &Ingester{c: c} }

// Ingest is Collector.Ingest, counted locally.
func (in *Ingester) Ingest(r *wire.Report) Reason {
	why := in.c.apply(r)
	if why != 0 {
		in.n.dropped[why]++
		return why
	}
	in.n.reports[r.Op]++
	if r.Immediate {
		in.n.immediate++
	}
	return 0
}

// IngestPayload is Collector.IngestPayload, counted locally.
func (in *Ingester) IngestPayload(b []byte) Reason {
	var r wire.Report
	if why := decode(b, &r); why != 0 {
		in.n.dropped[why]++
		return why
	}
	return in.Ingest(&r)
}

func (in *Ingester) truncated() { in.n.dropped[ReasonTrailing]++ }

// Flush adds the ingester's counts to the collector's and zeroes them.
func (in *Ingester) Flush() {
	for i, v := range in.n.reports {
		if v != 0 {
			atomic.AddUint64(&in.c.n.reports[i], v)
		}
	}
	for i, v := range in.n.dropped {
		if v != 0 {
			atomic.AddUint64(&in.c.n.dropped[i], v)
		}
	}
	if in.n.immediate != 0 {
		atomic.AddUint64(&in.c.n.immediate, in.n.immediate)
	}
	in.n = counts{}
}

// Stats are the collector's counters.
type Stats struct {
	// Reports is the reports ingested, by primitive (Append's entries,
	// Postcarding's postcards, written by reports or by the translator's
	// writes).
	Reports map[string]uint64 `json:"reports"`
	// Dropped is the reports refused, by reason; a server adds "socket",
	// the datagrams its sockets' queues overflowed with.
	Dropped   map[string]uint64 `json:"dropped"`
	Immediate uint64            `json:"immediate"` // reports that asked for an ACK (none is sent)
	Datagrams uint64            `json:"datagrams,omitempty"`
	// Outside is a translator's writes (Apply) that fit no slot, counter,
	// chunk or list of the memory: dropped.
	Outside uint64 `json:"outside,omitempty"`
}

// Total is the reports ingested, all primitives.
func (s *Stats) Total() (n uint64) {
	for _, v := range s.Reports {
		n += v
	}
	return n
}

// Stats reads the counters.
func (c *Collector) Stats() Stats {
	s := Stats{Reports: map[string]uint64{}, Dropped: map[string]uint64{}, Immediate: atomic.LoadUint64(&c.n.immediate)}
	for _, op := range Primitives {
		s.Reports[op.String()] = atomic.LoadUint64(&c.n.reports[op])
	}
	for _, r := range Reasons {
		s.Dropped[r.String()] = atomic.LoadUint64(&c.n.dropped[r])
	}
	s.Outside = atomic.LoadUint64(&c.n.outside)
	return s
}

// ErrDisabled is a query or write of a primitive the collector does not
// host.
var ErrDisabled = errors.New("the collector does not host this primitive")

func (c *Collector) redundancy(what string, n, def int) (int, error) {
	if n == 0 {
		return def, nil
	}
	if n < 1 || n > MaxRedundancy {
		return 0, fmt.Errorf("%s redundancy %d: 1 to %d", what, n, MaxRedundancy)
	}
	return n, nil
}

// KeyWrite queries Key-Write for key over n slots (0: the configured
// redundancy), a value needing at least consensus votes (0: 1, the
// plurality).
func (c *Collector) KeyWrite(key uint32, n, consensus int) (KeyWriteAnswer, error) {
	if c.kw == nil {
		return KeyWriteAnswer{}, fmt.Errorf("keywrite: %w", ErrDisabled)
	}
	n, err := c.redundancy("keywrite", n, c.kw.n)
	if err != nil {
		return KeyWriteAnswer{}, err
	}
	if consensus < 0 || consensus > n {
		return KeyWriteAnswer{}, fmt.Errorf("keywrite consensus %d: 1 to the redundancy, %d", consensus, n)
	}
	return c.kw.query(key, n, max(consensus, 1)), nil
}

// KeyIncrement queries Key-Increment: the minimum of key's n counters (0:
// the configured redundancy), never less than the key's sum of increments.
func (c *Collector) KeyIncrement(key uint32, n int) (uint64, error) {
	if c.ki == nil {
		return 0, fmt.Errorf("keyincrement: %w", ErrDisabled)
	}
	n, err := c.redundancy("keyincrement", n, c.ki.n)
	if err != nil {
		return 0, err
	}
	return c.ki.query(key, n), nil
}

// Postcard queries Postcarding for the path of flow key.
func (c *Collector) Postcard(key uint32) (PostcardAnswer, error) {
	if c.pc == nil {
		return PostcardAnswer{}, fmt.Errorf("postcarding: %w", ErrDisabled)
	}
	return c.pc.query(key, c.pc.n), nil
}

func (c *Collector) list(l uint32) error {
	if c.ap == nil {
		return fmt.Errorf("append: %w", ErrDisabled)
	}
	if l >= c.cfg.Append.Lists {
		return fmt.Errorf("append: no list %d (lists are 0 to %d)", l, c.cfg.Append.Lists-1)
	}
	return nil
}

// AppendLast returns list l's last n entries (fewer if it holds fewer),
// oldest first, and how many it was ever given.
func (c *Collector) AppendLast(l uint32, n int) (entries []uint32, total uint64, err error) {
	if err := c.list(l); err != nil {
		return nil, 0, err
	}
	total = c.ap.total(l)
	from := total - min(total, uint64(max(n, 0)))
	entries, _, _ = c.ap.read(l, from, n, nil)
	return entries, total, nil
}

// AppendRead reads list l in order as a consumer does: the entries from
// position from (0 is the list's first entry ever) on, at most max,
// appended to dst; next is the position to read from next time, lost the
// entries from position from on that the ring overwrote before they were
// read.
func (c *Collector) AppendRead(l uint32, from uint64, max int, dst []uint32) (entries []uint32, next, lost uint64, err error) {
	if err := c.list(l); err != nil {
		return dst, from, 0, err
	}
	entries, next, lost = c.ap.read(l, from, max, dst)
	return entries, next, lost, nil
}

// The translator's writes: what a translator in front of the collector
// (the reference's Tofino pipeline; here the dta translator function)
// writes after its own aggregation.

// AppendBatch writes a batch of entries at list l's head in one write, as
// the translator's Append batching emits B entries at once.
func (c *Collector) AppendBatch(l uint32, entries []uint32) error {
	if err := c.list(l); err != nil {
		return err
	}
	c.ap.write(l, entries)
	atomic.AddUint64(&c.n.reports[wire.Append], uint64(len(entries)))
	return nil
}

// WritePath writes a flow's path as the translator's postcard cache
// emits it: values[i] is hop i's value, or Blank for a hop not collected;
// hops past len(values) are blank.
func (c *Collector) WritePath(key uint32, values []uint32) error {
	if c.pc == nil {
		return fmt.Errorf("postcarding: %w", ErrDisabled)
	}
	if len(values) > c.pc.hops {
		return fmt.Errorf("postcarding: a path of %d hops, B is %d", len(values), c.pc.hops)
	}
	n := 0
	for _, v := range values {
		if v != Blank {
			if v >= c.pc.values {
				return fmt.Errorf("postcarding: value %d is outside V (0 to %d)", v, c.pc.values-1)
			}
			n++
		}
	}
	c.pc.writePath(key, values)
	atomic.AddUint64(&c.n.reports[wire.Postcarding], uint64(n))
	return nil
}
