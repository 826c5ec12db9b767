package trumpet

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/measure"
	"github.com/ffpf-go/ffpf/functions/record"
	"github.com/ffpf-go/ffpf/functions/trumpet/event"
	"github.com/ffpf-go/ffpf/functions/trumpet/monitor"
)

func init() { functions.Register(class) }

func intParam(name, def string, lo, hi int64, summary string) functions.Param {
	return functions.Param{Name: name, Type: functions.Int, Default: def, Summary: summary,
		Check: func(v functions.Value) error {
			if v.Int < lo || v.Int > hi {
				return fmt.Errorf("%s is %d to %d", name, lo, hi)
			}
			return nil
		}}
}

var params = []functions.Param{
	{Name: "events", Type: functions.String, File: functions.FileRead,
		Summary: "a file of events: YAML (events: [...]) or one event a line"},
	{Name: "event", Type: functions.String, Summary: `one event in the one-line form: "name: filter; predicate; granularity; interval"`},
	{Name: "epoch", Type: functions.Duration, Default: "10ms", Summary: "the sweep period T; every interval is a multiple of it",
		Check: func(v functions.Value) error { return event.CheckEpoch(v.Dur) }},
	intParam("flows", "64K", 16, 1<<24, "flow table entries (5-tuples)"),
	intParam("buckets", "16K", 16, 1<<24, "granularity buckets, all events together"),
	intParam("words", "16", 1, monitor.MaxUnits, "summary words a flow keeps per epoch for the events it matches"),
	{Name: "dos", Type: functions.Size, Default: "0B", Summary: "bytes a new 5-tuple must send (filter table) before it enters the flow table; 0: every flow enters",
		Check: func(v functions.Value) error {
			if v.Int < 0 || v.Int > 1<<30 {
				return errors.New("dos is 0 to 1GB")
			}
			return nil
		}},
	{Name: "burstgap", Type: functions.Duration, Default: "5us", Summary: "packets of a flow closer than this are a run (is_burst)"},
	intParam("burstlen", "5", 1, 1<<16, "a packet is in a burst from the burstlen-th packet of a run on"),
	{Name: "sweep", Type: functions.Duration, Default: "20us", Summary: "time a sweep step may take between two batches when the input runs short",
		Check: func(v functions.Value) error {
			if v.Dur <= 0 {
				return errors.New("a sweep step takes some time")
			}
			return nil
		}},
}

var stateFields = []functions.StateField{
	{Name: "packets", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum, Summary: "packets read"},
	{Name: "nokey", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum, Summary: "packets without an IPv4 or IPv6 header (no flow)"},
	{Name: "mapfull", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum, Summary: "in eBPF: packets of new flows the full flow map of their epoch had no room for"},
	{Name: "flows", Type: buffers.U64, Merge: functions.MergeShared, Summary: "5-tuples in the flow table"},
	{Name: "newflows", Type: buffers.U64, Merge: functions.MergeSum, Summary: "flows that entered the flow table (again, after an idle epoch)"},
	{Name: "overflow", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum, Summary: "packets of new flows the full flow table had no room for"},
	{Name: "dosfiltered", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum, Summary: "packets of new flows the filter table held back (DoS defence)"},
	{Name: "unmatched", Type: buffers.U64, Merge: functions.MergeSum, Summary: "flow-event matches dropped: the flow had no summary words left or 16 events already"},
	{Name: "bucketfull", Type: buffers.U64, Merge: functions.MergeSum, Summary: "flow summaries the full bucket table could not take"},
	{Name: "events", Type: buffers.U64, Merge: functions.MergeShared, Summary: "events installed"},
	{Name: "patterns", Type: buffers.U64, Merge: functions.MergeShared, Summary: "wildcard patterns in the trigger index"},
	{Name: "reports", Type: buffers.U64, Merge: functions.MergeSum, Summary: "satisfied buckets reported"},
	{Name: "lostreports", Type: buffers.U64, Merge: functions.MergeSum, Summary: "reports whose record did not fit a slot"},
	{Name: "sweeps", Type: buffers.U64, Merge: functions.MergeSum, Summary: "epochs swept to the end"},
	{Name: "late", Type: buffers.U64, Merge: functions.MergeSum, Summary: "sweeps finished at the next epoch's end rather than between batches"},
	{Name: "slices", Type: buffers.U64, Merge: functions.MergeSum, Summary: "sweep steps run between batches"},
	{Name: "sweep_ns", Type: buffers.U64, Unit: "ns", Merge: functions.MergeShared, Summary: "work time of the last complete sweep"},
	{Name: "sweepmax_ns", Type: buffers.U64, Unit: "ns", Merge: functions.MergeMax, Summary: "work time of the longest sweep"},
}

var state = &functions.State{Fields: stateFields}

var class = &functions.Class{
	Name:      "trumpet",
	Summary:   "Trumpet's packet monitor: events (filter, predicate, granularity, interval) reported as records",
	MinInputs: 1, MaxInputs: -1,
	Params:  params,
	State:   &functions.State{Fields: stateFields},
	Targets: []functions.Target{functions.TargetUser, functions.TargetKernel, functions.TargetXDP},
	Runs: func(t functions.Target, p functions.Params) error {
		if t != functions.TargetUser {
			return ebpfRuns(p)
		}
		return nil
	},
	Code:     functions.EBPFCode(ebpfCode),
	Produces: func(functions.Params) bool { return true },
	Validate: validate,
	New:      func(ctx *functions.Context) (functions.Function, error) { return New(ctx) },
}

// ebpfRuns says whether phase 1 can run in eBPF, on per-CPU flow
// summaries (ebpf.go); the error is the placement's reason for keeping
// the function in userspace.
func ebpfRuns(p functions.Params) error {
	if p.Int("dos") > 0 {
		return errors.New("trumpet's DoS defence (dos=) counts each new flow's packets in the filter table as they come, which per-CPU flow summaries in eBPF cannot, so it runs in userspace")
	}
	if ep := p.Duration("epoch"); ep < MinEBPFEpoch {
		return fmt.Errorf("an epoch of %v is shorter than the %v trumpet's Go half needs to drain and sweep an epoch's flows from eBPF, so it runs in userspace", ep, MinEBPFEpoch)
	}
	evs, err := loadEvents(p)
	if err != nil {
		return err
	}
	for i := range evs {
		if err := monitor.Summarisable(&evs[i]); err != nil {
			return fmt.Errorf("trumpet runs in userspace: %v", err)
		}
	}
	return nil
}

func validate(ctx *functions.Context) error {
	if err := measure.CheckLinkType(ctx); err != nil {
		return err
	}
	_, err := loadEvents(ctx.Params)
	return err
}

// Trumpet is a function of the trumpet class.
type Trumpet struct {
	id    string
	m     *monitor.Monitor
	mbuf  *buffers.MBuf
	off   []int
	out   *record.Out
	sweep int64
	epoch time.Duration
	// ebpf is set when phase 1 runs in eBPF: the monitor is fed the
	// flows' summaries (Drain), and the first nSlots fields of the MBuf
	// are the eBPF code's counters.
	ebpf bool
	sc   scratch
	// present is, in eBPF, the packet clock the flowspace last gave
	// (Present): the epoch a handler's event starts after.
	present int64
	// the batch at hand, and at reading its i-th packet for
	// monitor.ProcessBatch (a method value made once)
	cur *buffers.Batch
	at  func(i int) ([]byte, int64, uint32)
}

// New instantiates a trumpet function with the events its parameters give.
func New(ctx *functions.Context) (*Trumpet, error) {
	p := ctx.Params
	mb, err := state.NewMBuf(functions.TargetUser, p)
	if err != nil {
		return nil, err
	}
	t := &Trumpet{id: ctx.ID, mbuf: mb, out: record.NewOut(2048), sweep: int64(p.Duration("sweep")), epoch: p.Duration("epoch"),
		ebpf: ctx.Target == functions.TargetKernel || ctx.Target == functions.TargetXDP, present: math.MinInt64}
	for _, f := range stateFields {
		t.off = append(t.off, functions.FieldOf(mb, f.Name).Offset)
	}
	t.at = t.packet
	t.m, err = monitor.New(monitor.Config{LinkType: ctx.LinkType, Epoch: int64(t.epoch), Flows: int(p.Int("flows")),
		Buckets: int(p.Int("buckets")), Words: int(p.Int("words")), DoS: int(p.Int("dos")),
		BurstGap: int64(p.Duration("burstgap")), BurstLen: int(p.Int("burstlen"))}, t.report)
	if err != nil {
		return nil, err
	}
	evs, err := loadEvents(p)
	if err != nil {
		return nil, err
	}
	for _, ev := range evs {
		if err := t.m.Add(ev); err != nil {
			return nil, err
		}
	}
	t.publish()
	return t, nil
}

// Add installs an event on the running function. In eBPF, an event the
// flow summaries cannot serve is refused.
func (t *Trumpet) Add(ev event.Event) error {
	if t.ebpf {
		if err := monitor.Summarisable(&ev); err != nil {
			return fmt.Errorf("%v: this trumpet's phase 1 runs in eBPF", err)
		}
	}
	if err := t.m.AddAt(ev, t.present); err != nil {
		return err
	}
	t.publish()
	return nil
}

// Present implements functions.Presenter: in eBPF the monitor's epoch,
// which its drains move, lags the present by up to an epoch and the
// grace; an event added now starts with the interval after the present
// one, as in userspace, not with the one being drained.
func (t *Trumpet) Present(now int64) { t.present = now }

// Remove uninstalls the event named name.
func (t *Trumpet) Remove(name string) error {
	if err := t.m.Remove(name); err != nil {
		return err
	}
	t.publish()
	return nil
}

// Process implements functions.Function: it reads the batch's packets
// into the monitor and, when the batch is short of full (the input queue
// has run short, Algorithm 2), runs a step of the pending sweep. Its
// output is records, so it passes no packet.
func (t *Trumpet) Process(b *buffers.Batch) {
	t.cur = b
	t.m.ProcessBatch(b.N, t.at)
	t.cur = nil
	if b.N < buffers.MaxBatch && t.m.Pending() {
		t.m.Sweep(t.sweep)
	}
	b.N = 0
	t.out.Flush()
	t.publish()
}

// packet is the batch's i-th packet as the monitor reads it.
func (t *Trumpet) packet(i int) ([]byte, int64, uint32) {
	b := t.cur
	s := b.E[i].Slot
	m := b.PBuf.Meta(s)
	return b.PBuf.Data(s), m.Timestamp, m.WireLen
}

// Deadline implements functions.Clocked: the current epoch's end.
func (t *Trumpet) Deadline() int64 { return t.m.Deadline() }

// Tick implements functions.Clocked: the epoch ends, the unfinished sweep
// is finished and the next begins.
func (t *Trumpet) Tick(now int64) {
	t.m.Tick(now)
	t.out.Flush()
	t.publish()
}

// Flush implements functions.Flusher: at the end of the input the last
// interval of each event, which the input ended before its end, is swept
// and reported on the packets it saw (Monitor.End). In eBPF the flowspace
// has drained the epoch the capture ended in before.
func (t *Trumpet) Flush(now int64) {
	t.m.End(now)
	t.out.Flush()
	t.publish()
}

// SetEmit implements functions.Producer.
func (t *Trumpet) SetEmit(f func(*buffers.Batch)) { t.out.SetEmit(f) }

// Records implements functions.Producer.
func (t *Trumpet) Records() uint64 { return t.out.Records() }

// MBuf implements functions.Stateful.
func (t *Trumpet) MBuf() *buffers.MBuf { return t.mbuf }

func (t *Trumpet) publish() {
	s := &t.m.Stats
	for i, v := range [...]uint64{s.Packets, s.NoKey, 0, uint64(t.m.Flows()), s.NewFlows, s.Overflow, s.DoSFiltered,
		s.Unmatched, s.BucketFull, uint64(t.m.Triggers()), uint64(t.m.Patterns()), s.Reports, t.out.Lost(),
		s.Sweeps, s.Late, s.Slices, s.SweepNs, s.SweepMaxNs} {
		if t.ebpf && i < nSlots {
			continue // the eBPF code's counters, which the flowspace syncs
		}
		t.mbuf.Store64(t.off[i], v)
	}
}

// Summary implements functions.Summarizer: the state as its fields give it.
func (t *Trumpet) Summary() map[string]any { return t.mbuf.Snapshot() }

// Drain implements functions.Drainer: in eBPF, the flows of epoch e, each
// merged over the CPUs into a summary, are fed to the monitor in the
// order of their first packets, as the packets would have been, and the
// epoch ends: its sweep reports as in userspace. An epoch without a flow
// ends too, as an idle live source moves the packet clock in userspace:
// the monitor's epoch follows the present, and an event added through a
// handler starts with the interval after the present one, not after the
// last epoch that had flows (which would report packets the present
// epoch saw before the event was added).
func (t *Trumpet) Drain(e int64, keys, values []byte, n, cpus int) {
	t.sc.summaries(e, keys, values, n, cpus)
	ep := int64(t.epoch)
	if t.m.Deadline() <= e*ep {
		t.m.Tick(e * ep)
	}
	t.m.Flush(e * ep) // a sweep left pending ends
	for _, o := range t.sc.order {
		t.m.Summarise(&t.sc.keys[o.i], &t.sc.sums[o.i])
	}
	t.m.Flush((e + 1) * ep)
	t.out.Flush()
	t.publish()
}

// report writes a satisfied bucket as a record: the event, the bucket's
// key (an object of its granularity's fields) and the value.
func (t *Trumpet) report(tr *monitor.Trigger, start int64, k *monitor.Key, v float64) {
	o := t.out
	o.Start(record.Event, start, t.id)
	o.String("event", tr.Event.Name)
	o.Begin("key")
	writeKey(&o.Builder, tr.Fields(), k)
	o.End()
	o.F64("value", v)
	o.Commit()
}

func writeKey(b *record.Builder, fields []event.Field, k *monitor.Key) {
	fam := k.Family()
	sp, dp, ports := k.Ports()
	for _, f := range fields {
		switch f.Name {
		case "srcip", "dstip":
			hi, lo := k[1], k[2]
			if f.Name == "dstip" {
				hi, lo = k[3], k[4]
			}
			var a [16]byte
			n := 16
			if fam == 4 {
				n = 4
			}
			for i := range 8 {
				a[i], a[8+i] = byte(hi>>(56-8*i)), byte(lo>>(56-8*i))
			}
			if kept := monitor.Kept(f.Bits, fam); kept < 8*n {
				b.Prefix(f.Name, a[:n], kept)
			} else {
				b.Addr(f.Name, a[:n])
			}
		case "srcport", "dstport":
			if !ports {
				b.Null(f.Name)
			} else if f.Name == "srcport" {
				b.U64(f.Name, uint64(sp))
			} else {
				b.U64(f.Name, uint64(dp))
			}
		case "proto":
			switch pr := k.Proto(); pr {
			case 6:
				b.String(f.Name, "tcp")
			case 17:
				b.String(f.Name, "udp")
			case 1:
				b.String(f.Name, "icmp")
			default:
				b.U64(f.Name, uint64(pr))
			}
		}
	}
}

// Handlers implements functions.Handlers: add, remove and list events on
// the running function.
func (t *Trumpet) Handlers() []functions.Handler {
	return []functions.Handler{
		{Name: "add", Summary: `install an event given in the one-line form ("name: filter; predicate; granularity; interval"); it starts with the next whole interval`,
			Call: t.addHandler},
		{Name: "remove", Summary: "uninstall the event of this name; the others keep their state",
			Call: func(arg string) (any, error) { return nil, t.Remove(strings.TrimSpace(arg)) }},
		{Name: "list", Summary: "the installed events, in the one-line form",
			Call: func(string) (any, error) { return t.List(), nil }},
	}
}

var (
	_ functions.Clocked   = (*Trumpet)(nil)
	_ functions.Flusher   = (*Trumpet)(nil)
	_ functions.Producer  = (*Trumpet)(nil)
	_ functions.Stateful  = (*Trumpet)(nil)
	_ functions.Handlers  = (*Trumpet)(nil)
	_ functions.Drainer   = (*Trumpet)(nil)
	_ functions.Presenter = (*Trumpet)(nil)
)
