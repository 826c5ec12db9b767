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
	"errors"
	"fmt"
	"strings"
	"time"

	p4cfg "github.com/p4lang/p4runtime/go/p4/config/v1"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/p4/controller"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

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
				fs.mu.Lock()
				if fs.err == nil {
					fs.err = err
				}
				cancel := fs.cancel
				fs.mu.Unlock()
				cancel() // the switch went away: the run ends with the reason
				return
			}
		}
	}
}

// sync reads every counter and register of the program into the
// functions' counters and MBufs.
func (fs *Flowspace) sync() error {
	fs.mu.Lock()
	a, c := fs.asm, fs.client
	halves := map[string]*half{}
	for n, h := range fs.halves {
		halves[n.ID] = h
	}
	fs.mu.Unlock()
	if a == nil || c == nil {
		return nil
	}
	for _, l := range a.Lowered {
		cells, err := c.ReadCounter(QualifiedName(a.Prog, l.Acct.Name))
		if err != nil {
			return fmt.Errorf("switch %s: %w", fs.Name(), err)
		}
		account(l.Node, cells)
	}
	for _, ct := range a.Prog.Counters {
		h := halves[ct.Owner]
		if h == nil || h.mbuf == nil || ct.FieldPackets == "" && ct.FieldBytes == "" {
			continue
		}
		cells, err := c.ReadCounter(QualifiedName(a.Prog, ct.Name))
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
		if h == nil || h.mbuf == nil || r.Field == "" {
			continue
		}
		cells, err := c.ReadRegister(QualifiedName(a.Prog, r.Name))
		if err != nil {
			return fmt.Errorf("switch %s: %s's state is in register %s: %w", fs.Name(), r.Owner, r.Name, err)
		}
		for i, v := range cells {
			put(h.mbuf, r.Field, r.Base+i, v)
		}
	}
	return nil
}

// account sets a function's counters from its accounting counter: cell
// 0 the packets that reached it, cell 1 those it passed (a source's one
// cell: the packets that entered at its port, all passed).
func account(n *flowspaces.Node, cells []controller.Cell) {
	if len(cells) == 0 {
		return
	}
	in, out := cells[0].Packets, cells[0].Packets
	if len(cells) > 1 {
		out = min(cells[1].Packets, in)
	}
	c := &n.Counters
	// Out before in: a concurrent reader never sees out > in.
	c.Filtered.Store(in - out)
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

// QualifiedName is the P4Info name of a counter, register, table or
// action of the program: declared inside the control that uses it, as
// p4c names it ("ffpf_ingress.cms_2_row0").
func QualifiedName(p *p4gen.Program, name string) string {
	if usedIn(p.Egress, name) && !usedIn(p.Ingress, name) {
		return "ffpf_egress." + name
	}
	return "ffpf_ingress." + name
}

// usedIn reports whether ss use a register, counter or table of that name.
func usedIn(ss []p4gen.Stmt, name string) bool {
	for _, s := range ss {
		switch s := s.(type) {
		case p4gen.RMW:
			if s.Reg.Name == name {
				return true
			}
		case p4gen.Count:
			if s.Counter.Name == name {
				return true
			}
		case p4gen.Apply:
			if s.Table.Name == name {
				return true
			}
			for _, a := range s.Table.Actions {
				if usedIn(a.Body, name) {
					return true
				}
			}
		case p4gen.Call:
			if usedIn(s.Action.Body, name) {
				return true
			}
		case p4gen.If:
			if usedIn(s.Then, name) || usedIn(s.Else, name) {
				return true
			}
		}
	}
	return false
}

// checkNames says which of the program's counters and registers the
// P4Info lacks under the names QualifiedName gives: the two must agree.
func checkNames(p *p4gen.Program, info *p4cfg.P4Info) error {
	have := map[string]bool{}
	for _, c := range info.GetCounters() {
		have[c.GetPreamble().GetName()] = true
	}
	for _, r := range info.GetRegisters() {
		have[r.GetPreamble().GetName()] = true
	}
	var missing []string
	for _, c := range p.Counters {
		if n := QualifiedName(p, c.Name); !have[n] {
			missing = append(missing, n)
		}
	}
	for _, r := range p.Registers {
		if n := QualifiedName(p, r.Name); !have[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return errors.New("the P4Info lacks " + strings.Join(missing, ", "))
	}
	return nil
}
