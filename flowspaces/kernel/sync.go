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
	fs.ring, err = ringbuf.NewMap()
	if err != nil {
		fs.counters.Close()
		fs.counters = nil
		return fmt.Errorf("%s: cannot create its ring buffer: %w", fs.Name(), err)
	}
	// Per CPU, when it last sent a clock-only record (prog.go clockOnly).
	fs.clockM, err = ebpf.NewMap(&ebpf.MapSpec{Name: "ffpf_clock", Type: ebpf.PerCPUArray,
		KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		fs.ring.Close()
		fs.counters.Close()
		fs.ring, fs.counters = nil, nil
		return fmt.Errorf("%s: cannot create its clock map: %w", fs.Name(), err)
	}
	fs.offset = ringbuf.Offset()
	if fs.budgetM, err = fs.budgetMap(); err != nil {
		fs.ring.Close()
		fs.counters.Close()
		fs.ring, fs.counters = nil, nil
		return err
	}
	if fs.opts.Kind == flowspaces.KindXDP {
		fs.xsks, err = afxdp.NewMap()
		if err != nil {
			fs.ring.Close()
			fs.counters.Close()
			fs.ring, fs.counters = nil, nil
			return fmt.Errorf("%s: cannot create its AF_XDP socket map: %w", fs.Name(), err)
		}
	}
	return nil
}

// syncLoop syncs every 100 ms until Stop, and ends the capture when an
// interface it captures on has disappeared; with a packet limit it looks
// every 5 ms whether the limit is spent, and then ends the capture.
func (fs *Flowspace) syncLoop() {
	defer fs.synced.Done()
	every := time.Duration(syncEvery)
	if fs.budget != nil {
		every = 5 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for i := 1; ; i++ {
		select {
		case <-t.C:
			end := false
			if every*time.Duration(i) >= syncEvery {
				fs.sync()
				i = 0
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
		case <-fs.stopSync:
			fs.sync()
			return
		}
	}
}

// syncEvery is how often the counters are read while the capture runs.
const syncEvery = 100 * time.Millisecond

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
		var per []uint64
		if err := m.Lookup(uint32(slot), &per); err != nil {
			failed = true
			return 0
		}
		var s uint64
		for _, v := range per {
			s += v
		}
		return s
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
		in := sum(k.slot)
		var state []uint64
		if k.mbuf != nil {
			for i := range min(len(k.mbuf.Fields()), k.need-2) {
				state = append(state, sum(k.slot+2+i))
			}
		}
		if failed {
			return // a map that cannot be read (closed) must not zero what was read before
		}
		k.Counters.Out.Store(out)
		k.Counters.Filtered.Store(in - min(in, out))
		k.Counters.In.Store(in)
		for i, v := range state {
			k.mbuf.Store64(k.mbuf.Fields()[i].Offset, v)
		}
		for _, s := range k.maps {
			if s.read(k.mbuf) != nil {
				return // closed: keep what was read before
			}
		}
	}
}
