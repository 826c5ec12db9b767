package kernel

// State sync. A function's counters (in, out) and scalar state live in
// slots of one per-CPU array map shared by the flowspace's programs, its
// larger state in maps of its own (statemap.go); a goroutine merges the
// CPUs' copies into the nodes' counters and MBufs every 100 ms, and once
// more when the flowspace stops.

import (
	"fmt"
	"time"

	"github.com/cilium/ebpf"

	"github.com/ffpf-go/ffpf/bridges/afxdp"
	"github.com/ffpf-go/ffpf/bridges/ringbuf"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
)

// allocSlots hands out need consecutive counter slots, reusing those of
// removed functions (zeroed first); fs.mu is held.
func (fs *Flowspace) allocSlots(need int) (int, error) {
	for i, r := range fs.free {
		if r.need < need {
			continue
		}
		zero := make([]uint64, ebpf.MustPossibleCPU())
		for s := r.slot; s < r.slot+need; s++ {
			if err := fs.counters.Update(uint32(s), zero, ebpf.UpdateAny); err != nil {
				return 0, fmt.Errorf("cannot reset counter slot %d: %w", s, err)
			}
		}
		if r.need == need {
			fs.free = append(fs.free[:i], fs.free[i+1:]...)
		} else {
			fs.free[i] = slotRange{r.slot + need, r.need - need}
		}
		return r.slot, nil
	}
	if fs.slots+need > counterSlots {
		return 0, fmt.Errorf("%s has no counter slots left", fs.Name())
	}
	fs.slots += need
	return fs.slots - need, nil
}

// slotRange is a run of free counter slots.
type slotRange struct{ slot, need int }

// counterSlots is the size of the counter map.
const counterSlots = 4096

// maps creates the counter map, the ring buffer and (XDP) the AF_XDP
// socket map once; fs.mu is held.
func (fs *Flowspace) maps() error {
	if fs.counters != nil {
		return nil
	}
	var err error
	fs.counters, err = ebpf.NewMap(&ebpf.MapSpec{Name: "ffpf_counters", Type: ebpf.PerCPUArray,
		KeySize: 4, ValueSize: 8, MaxEntries: counterSlots})
	if err != nil {
		return fmt.Errorf("%s: cannot create its counter map: %w", fs.Name(), err)
	}
	// fail closes the maps made so far (the budget's belongs to the budget).
	fail := func(err error) error {
		closeRings(fs.rings, fs.ringOf)
		for _, m := range []*ebpf.Map{fs.counters, fs.clock, fs.sent} {
			if m != nil {
				m.Close()
			}
		}
		fs.counters, fs.ring, fs.rings, fs.ringOf, fs.clock, fs.sent = nil, nil, nil, nil, nil, nil
		return err
	}
	if fs.rings, fs.ringOf, err = ringbuf.NewRings(fs.ringCount()); err != nil {
		return fail(fmt.Errorf("%s: cannot create its ring buffers: %w", fs.Name(), err))
	}
	fs.ring = fs.rings[0]
	// The packet clock (window.go) and its one offset.
	if fs.clock, fs.offset, err = newClockMap(); err != nil {
		return fail(fmt.Errorf("%s: %w", fs.Name(), err))
	}
	// Per CPU, when it last sent a clock-only record (prog.go clockOnly).
	fs.sent, err = ebpf.NewMap(&ebpf.MapSpec{Name: "ffpf_clock_sent", Type: ebpf.PerCPUArray,
		KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		return fail(fmt.Errorf("%s: cannot create its clock-only record map: %w", fs.Name(), err))
	}
	if fs.budgetM, err = fs.budgetMap(); err != nil {
		return fail(err)
	}
	if fs.opts.Kind == flowspaces.KindXDP {
		if fs.xsks, err = afxdp.NewMap(); err != nil {
			return fail(fmt.Errorf("%s: cannot create its AF_XDP socket map: %w", fs.Name(), err))
		}
	}
	return nil
}

// syncLoop syncs every 100 ms until Stop, closes the windows of the
// functions here as they end (window.go), and ends the capture when an
// interface it captures on has disappeared; with a packet limit it looks
// every 5 ms whether the limit is spent, and then ends the capture. At
// the end it syncs a last time, closes the windows that ended, and
// flushes the Go halves (the report of the last window, or of the run).
func (fs *Flowspace) syncLoop() {
	defer fs.synced.Done()
	nextSync := time.Now().Add(syncEvery)
	t := time.NewTimer(fs.wait(nextSync))
	defer t.Stop()
	for {
		select {
		case <-t.C:
			end := false
			if err := fs.windows(fs.now()-int64(grace), false); err != nil {
				end = fs.fail(err)
			}
			if !time.Now().Before(nextSync) {
				fs.sync()
				nextSync = time.Now().Add(syncEvery)
				fs.mu.Lock()
				if err := fs.gone(); err != nil && fs.err == nil {
					fs.err, end = err, true
				}
				fs.mu.Unlock()
			}
			if end || fs.budget.Spent() {
				fs.mu.Lock()
				cancel := fs.cancel
				fs.mu.Unlock()
				cancel() // Stop, in a goroutine of its own, stops this loop
			}
			t.Reset(fs.wait(nextSync))
		case <-fs.stopSync:
			// The programs are detached: what ended has ended, no grace,
			// and the epoch of now is drained whole.
			now := fs.now()
			if err := fs.windows(now, true); err != nil {
				fs.fail(err)
			}
			fs.sync()
			fs.flush(now)
			return
		}
	}
}

// syncEvery is how often the counters are read while the capture runs.
const syncEvery = 100 * time.Millisecond

// now is the packet clock of live packets: what the programs compute
// from bpf_ktime_get_ns and the clock map, in ns since the Unix epoch.
func (fs *Flowspace) now() int64 { return monotonic() + fs.offset }

// wait is how long syncLoop sleeps: until the next sync, the next window
// that ends (and its grace), or 5 ms with a packet limit.
func (fs *Flowspace) wait(nextSync time.Time) time.Duration {
	d := time.Until(nextSync)
	if fs.budget != nil {
		d = min(d, 5*time.Millisecond)
	}
	fs.mu.Lock()
	now := fs.now()
	for _, k := range fs.nodes {
		if w := k.win; w != nil && k.started.Load() {
			d = min(d, time.Duration((w.open+1)*w.interval-now)+grace)
		}
	}
	fs.mu.Unlock()
	return max(d, 0)
}

// fail ends the capture with err unless it ended for another reason.
func (fs *Flowspace) fail(err error) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.err == nil {
		fs.err = err
	}
	return true
}

// windows closes the windows of the functions here that ended at or
// before now (window.go); last, at the end of the run, drains the epoch
// of now as well.
func (fs *Flowspace) windows(now int64, last bool) error {
	fs.mu.Lock()
	nodes, m := append([]*node(nil), fs.nodes...), fs.counters
	fs.mu.Unlock()
	if m == nil {
		return nil
	}
	for _, k := range nodes {
		if k.win == nil || !k.started.Load() {
			continue
		}
		h, step := k.half(m), (*halfState).advance
		if last {
			step = (*halfState).end
		}
		if err := step(h, now); err != nil {
			return fmt.Errorf("%s: its window could not be closed: %w", k.ID, err)
		}
	}
	return nil
}

// flush ends the Go halves at the end of the capture: the report of the
// last window, or of the whole run.
func (fs *Flowspace) flush(now int64) {
	fs.mu.Lock()
	nodes := append([]*node(nil), fs.nodes...)
	fs.mu.Unlock()
	for _, k := range nodes {
		if f, ok := k.gofn.(functions.Flusher); ok && k.started.Load() {
			k.goMu.Lock()
			f.Flush(now)
			k.goMu.Unlock()
		}
	}
}

// startWindows opens the windows of the functions here not yet started,
// and starts their Go halves' clocks, before their programs see a packet;
// fs.mu is held.
func (fs *Flowspace) startWindows(nodes []*node) error {
	now := fs.now()
	for _, k := range nodes {
		if k.gofn == nil || k.started.Load() {
			continue
		}
		if err := k.half(fs.counters).start(now); err != nil {
			return fmt.Errorf("%s: cannot open its window: %w", k.ID, err)
		}
		k.started.Store(true)
	}
	return nil
}

// sync sums the per-CPU counters into the nodes' counters and MBufs.
func (fs *Flowspace) sync() {
	fs.mu.Lock()
	nodes, m := append([]*node(nil), fs.nodes...), fs.counters
	fs.mu.Unlock()
	if m == nil {
		return
	}
	failed := false
	sum := func(slot int) uint64 {
		v, err := sumSlot(m, slot)
		if err != nil {
			failed = true
		}
		return v
	}
	for _, k := range nodes {
		if k.iface == "" {
			continue
		}
		// Packets of its stream the ring buffer had no room for entered
		// the bridge and were dropped there.
		if l := sum(k.slot + slotLost); !failed && l > k.lost {
			fs.mu.Lock()
			if fs.sending != nil {
				fs.sending.Lose(int(l - k.lost))
			}
			fs.mu.Unlock()
			k.lost = l
		}
	}
	for _, k := range nodes {
		// Read out before in: a packet counted in but not yet out is
		// filtered for a moment, never the reverse.
		out := sum(k.slot + 1)
		var late uint64
		h := 0
		if w := k.win; w != nil && k.started.Load() {
			late = sum(k.slot + w.lateSlot())
			if w.flow == nil {
				h = int(w.open & 1)
			}
		}
		in := sum(k.slot)
		if failed {
			return // a map that cannot be read (closed) must not zero what was read before
		}
		k.Counters.Out.Store(out)
		k.Counters.Dropped.Store(late)
		k.Counters.Filtered.Store(in - min(in, out+late))
		k.Counters.In.Store(in)
		if !k.half(m).load(h) {
			return // closed: keep what was read before
		}
	}
}
