package p4

// State sync: every SyncEvery, and a last time when the run stops, the
// controller reads the switch's counters and registers; the accounting
// counters become the functions' in, out and filtered, and the counters
// and registers that hold a function's state (Counter.FieldPackets,
// Register.Field) are copied into its Go half's MBuf, value Base+i of
// the field for cell i, so --json, handlers and readers above see the
// state as from any flowspace.

import (
	"context"
	"fmt"
	"time"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/p4/controller"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// fail ends the run with err, the first such.
func (fs *Flowspace) fail(err error) {
	fs.mu.Lock()
	if fs.err == nil {
		fs.err = err
	}
	cancel := fs.cancel
	fs.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// syncLoop reads the state every SyncEvery until ctx ends.
func (fs *Flowspace) syncLoop(ctx context.Context) {
	defer fs.synced.Done()
	t := time.NewTicker(SyncEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := fs.sync(); err != nil {
				fs.fail(err) // the switch went away: the run ends with the reason
				return
			}
		}
	}
}

// sync reads every counter and register of the program into the
// functions' counters and MBufs.
func (fs *Flowspace) sync() error {
	fs.mu.Lock()
	a, c, out := fs.asm, fs.client, fs.out
	halves := map[string]*half{}
	for n, h := range fs.halves {
		halves[n.ID] = h
	}
	fs.mu.Unlock()
	if a == nil || c == nil || out == nil {
		return nil
	}
	name := out.Printed.Name
	for _, l := range a.Lowered {
		cells, err := c.ReadCounter(name(l.Acct))
		if err != nil {
			return fmt.Errorf("switch %s: %w", fs.Name(), err)
		}
		var lost uint64
		if l.Builder != nil && l.Builder.Window != nil {
			// A packet its window's half was not clean for is not measured.
			d, err := c.ReadCounter(name(l.Builder.Window.Dropped))
			if err != nil {
				return fmt.Errorf("switch %s: %w", fs.Name(), err)
			}
			if len(d) > 0 {
				lost = d[0].Packets
			}
		}
		account(l.Node, cells, lost)
	}
	// A windowed function's state (of one half, Half) is read when its
	// window ends (window.go), not here.
	for _, ct := range a.Prog.Counters {
		h := halves[ct.Owner]
		if h == nil || h.mbuf == nil || ct.FieldPackets == "" && ct.FieldBytes == "" || ct.Half != p4gen.HalfAll || windowedOwner(a, ct.Owner) {
			continue
		}
		cells, err := c.ReadCounter(name(ct))
		if err != nil {
			return fmt.Errorf("switch %s: %w", fs.Name(), err)
		}
		for i, cell := range cells {
			put(h.mbuf, ct.FieldPackets, ct.Base+i, cell.Packets)
			put(h.mbuf, ct.FieldBytes, ct.Base+i, cell.Bytes)
		}
	}
	for _, r := range a.Prog.Registers {
		h := halves[r.Owner]
		if h == nil || h.mbuf == nil || r.Field == "" || r.Half != p4gen.HalfAll || windowedOwner(a, r.Owner) {
			continue
		}
		cells, err := c.ReadRegister(name(r))
		if err != nil {
			return fmt.Errorf("switch %s: %s's state is in register %s: %w", fs.Name(), r.Owner, r.Name, err)
		}
		for i, v := range cells {
			put(h.mbuf, r.Field, r.Base+i, v)
		}
	}
	return nil
}

// windowedOwner reports whether the function id has a window.
func windowedOwner(a *Assembly, id string) bool {
	for _, l := range a.Lowered {
		if l.Node.ID == id {
			return l.Builder != nil && l.Builder.Window != nil
		}
	}
	return false
}

// account sets a function's counters from its accounting counter: cell
// 0 the packets it filtered, cell 1 those it passed (a source's one cell:
// the packets that entered at its port, all passed).
// A packet the function's window did not measure (lost) is its dropped.
func account(n *flowspaces.Node, cells []controller.Cell, lost uint64) {
	if len(cells) == 0 {
		return
	}
	in, out := cells[0].Packets, cells[0].Packets
	if len(cells) > 1 {
		out = cells[1].Packets
		in = cells[0].Packets + out
	}
	lost = min(lost, in-out)
	c := &n.Counters
	// Out before in: a concurrent reader never sees out > in.
	c.Dropped.Store(lost)
	c.Filtered.Store(in - out - lost)
	c.Out.Store(out)
	c.In.Store(in)
}

// put writes value i of the MBuf field named field ("" for none).
func put(m *buffers.MBuf, field string, i int, v uint64) {
	if field == "" {
		return
	}
	for _, f := range m.Fields() {
		if f.Name == field && i < max(f.Count, 1) {
			m.Put(f, i, v)
			return
		}
	}
}

// zero writes zeros into every cell of n's counters and registers on the
// switch (its reset handler), its accounting left as it is.
func (fs *Flowspace) zero(n *flowspaces.Node) error {
	fs.mu.Lock()
	a, c, out := fs.asm, fs.client, fs.out
	fs.mu.Unlock()
	if a == nil || c == nil || out == nil {
		return fmt.Errorf("%s is not on a running switch", n.ID)
	}
	for _, ct := range a.Prog.Counters {
		if ct.Owner == n.ID && (ct.FieldPackets != "" || ct.FieldBytes != "") {
			if err := c.ZeroCounter(out.Printed.Name(ct)); err != nil {
				return err
			}
		}
	}
	for _, r := range a.Prog.Registers {
		if r.Owner == n.ID {
			if err := c.ZeroRegister(out.Printed.Name(r), r.Width); err != nil {
				return err
			}
		}
	}
	return nil
}
