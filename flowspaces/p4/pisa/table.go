package pisa

import (
	"fmt"
	"slices"

	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// table is a compiled match-action table: its key expressions and its
// installed entries, looked up exactly through a hash index when every
// key is exact, else in priority order (the longest prefix first for a
// table with an LPM key), as p4gen.Switch chooses.
type table struct {
	t       *p4gen.Table
	keys    []expr
	types   []p4gen.Type
	lpm     bool
	exact   bool
	acts    map[*p4gen.Action]*action
	entries []centry // in the order installed
	order   []int32  // lookup order (not exact)
	index   map[uint64][]int32
	def     *action
	defArgs []uint64
	vals    []uint64 // the packet's key values
	// masked: for a table whose keys are none a range and fit one word
	// together (each at its shift in it), its entries in lookup order as
	// a mask and the value under it, so that an entry is one compare.
	masked []maskedEntry
	packed bool
	slots  []int // each key's slot when it is a field, else -1
	shifts []uint
	tmasks []uint64 // each key's type mask
	// direct: a packed table of fields whose actions only set metadata
	// to their parameters or constants (hll's rank): what each entry
	// writes is made when it is installed (writes, defWrites), and an
	// application writes it with no call of the action.
	direct    bool
	sets      map[*p4gen.Action][]aset
	defWrites []slotWrite
}

// aset is an assignment of a direct table's action: to slot, its
// parameter param (masked to it), or k when param is negative.
type aset struct {
	slot, param int
	mask, k     uint64
}

// slotWrite is a value an entry writes into a slot.
type slotWrite struct {
	slot int
	v    uint64
}

// writesOf is what action a with arguments args writes (direct).
func (tb *table) writesOf(a *p4gen.Action, args []uint64) []slotWrite {
	var ws []slotWrite
	for _, st := range tb.sets[a] {
		v := st.k
		if st.param >= 0 {
			v = args[st.param] & st.mask
		}
		ws = append(ws, slotWrite{st.slot, v})
	}
	return ws
}

// directSets returns what action a sets, when its body only assigns
// parameters or constants to fields that are not a header's.
func (c *compiler) directSets(a *p4gen.Action) ([]aset, bool) {
	var sets []aset
	for _, st := range a.Body {
		as, ok := st.(p4gen.Assign)
		if !ok {
			return nil, false
		}
		d, ok := c.slots[as.Dst.Path]
		if !ok || c.hdr[d] {
			return nil, false
		}
		c.used[d] = true
		switch x := as.X.(type) {
		case p4gen.Const:
			sets = append(sets, aset{slot: d, param: -1, k: x.Value})
		case p4gen.Ref:
			i := slices.IndexFunc(a.Params, func(f p4gen.Field) bool { return f.Name == x.Path })
			if i < 0 {
				return nil, false
			}
			sets = append(sets, aset{slot: d, param: i, mask: p4gen.Bit(a.Params[i].Bits).Mask()})
		default:
			return nil, false
		}
	}
	return sets, true
}

type maskedEntry struct {
	mask, val uint64
	entry     int32
}

// centry is an installed entry made ready for lookups.
type centry struct {
	e      p4gen.Entry
	act    *action
	args   []uint64
	writes []slotWrite // direct: what it writes
	masks  []uint64    // per key: the ternary mask, the LPM prefix's mask
	plen   int
}

func (c *compiler) table(t *p4gen.Table) (*table, error) {
	tb := &table{t: t, exact: true, acts: map[*p4gen.Action]*action{}, index: map[uint64][]int32{}}
	for _, k := range t.Keys {
		e, err := c.expr(k.X, nil)
		if err != nil {
			return nil, fmt.Errorf("table %s: %v", t.Name, err)
		}
		tb.keys = append(tb.keys, e)
		tb.types = append(tb.types, k.X.Type())
		tb.lpm = tb.lpm || k.Match == p4gen.LPM
		tb.exact = tb.exact && k.Match == p4gen.Exact
	}
	tb.vals = make([]uint64, len(t.Keys))
	width := 0
	tb.packed = !tb.exact
	for _, k := range t.Keys {
		slot, ok := c.refSlot(k.X, nil)
		if !ok {
			slot = -1
		}
		tb.slots, tb.shifts = append(tb.slots, slot), append(tb.shifts, uint(width))
		tb.tmasks = append(tb.tmasks, k.X.Type().Mask())
		width += max(1, k.X.Type().Bits)
		tb.packed = tb.packed && k.Match != p4gen.Range
	}
	tb.packed = tb.packed && width <= 64
	tb.direct = tb.packed && !slices.Contains(tb.slots, -1)
	tb.sets = map[*p4gen.Action][]aset{}
	for _, a := range append(slices.Clone(t.Actions), t.Default) {
		ca, err := c.action(a)
		if err != nil {
			return nil, err
		}
		tb.acts[a] = ca
		sets, ok := c.directSets(a)
		tb.direct = tb.direct && ok
		tb.sets[a] = sets
	}
	if err := tb.setDefault(t.Default, t.DefaultArgs); err != nil {
		return nil, err
	}
	if t.Const {
		if err := tb.set(t.Entries); err != nil {
			return nil, err
		}
	}
	return tb, nil
}

func (tb *table) setDefault(a *p4gen.Action, args []uint64) error {
	ca := tb.acts[a]
	if ca == nil {
		return fmt.Errorf("table %s has no action %s", tb.t.Name, a.Name)
	}
	if len(args) != len(a.Params) {
		return fmt.Errorf("table %s: %s takes %d arguments, not %d", tb.t.Name, a.Name, len(a.Params), len(args))
	}
	tb.def, tb.defArgs = ca, slices.Clone(args)
	tb.defWrites = tb.writesOf(a, args)
	return nil
}

// set installs es in place of the table's entries.
func (tb *table) set(es []p4gen.Entry) error {
	entries := make([]centry, 0, len(es))
	for i, e := range es {
		ce := centry{e: e, act: tb.acts[e.Action], args: slices.Clone(e.Args)}
		if ce.act == nil {
			return fmt.Errorf("table %s: entry %d runs %v, not one of its actions", tb.t.Name, i, e.Action)
		}
		if len(e.Match) != len(tb.keys) || len(e.Args) != len(e.Action.Params) {
			return fmt.Errorf("table %s: entry %d has %d matches for %d keys and %d arguments for %d parameters",
				tb.t.Name, i, len(e.Match), len(tb.keys), len(e.Args), len(e.Action.Params))
		}
		ce.writes = tb.writesOf(e.Action, e.Args)
		for j, m := range e.Match {
			w := tb.types[j]
			mask := w.Mask()
			switch tb.t.Keys[j].Match {
			case p4gen.Ternary:
				mask = m.Mask
			case p4gen.LPM:
				if m.PrefixLen < w.Bits {
					mask = w.Mask() &^ p4gen.Bit(w.Bits-m.PrefixLen).Mask()
					if m.PrefixLen == 0 {
						mask = 0
					}
				}
				ce.plen += m.PrefixLen
			}
			ce.masks = append(ce.masks, mask)
		}
		entries = append(entries, ce)
	}
	tb.entries = entries
	tb.order = tb.order[:0]
	clear(tb.index)
	for i := range entries {
		if tb.exact {
			h := tb.hashOf(entries[i].e.Match)
			tb.index[h] = append(tb.index[h], int32(i))
		} else {
			tb.order = append(tb.order, int32(i))
		}
	}
	slices.SortStableFunc(tb.order, func(a, b int32) int {
		ea, eb := &entries[a], &entries[b]
		if tb.lpm {
			return eb.plen - ea.plen
		}
		switch {
		case ea.e.Priority > eb.e.Priority:
			return -1
		case ea.e.Priority < eb.e.Priority:
			return 1
		}
		return 0
	})
	tb.masked = tb.masked[:0]
	if tb.packed {
		for _, i := range tb.order {
			tb.masked = append(tb.masked, tb.pack(&entries[i], i))
		}
	}
	return nil
}

// pack is entry e (number i) of a packed table as one mask and value.
func (tb *table) pack(e *centry, i int32) maskedEntry {
	me := maskedEntry{entry: i}
	for j, m := range e.e.Match {
		tm := tb.tmasks[j]
		// A value the key cannot hold (bits past its width, under the
		// mask for a ternary or LPM key) is never matched.
		if out := m.Value &^ tm; tb.t.Keys[j].Match == p4gen.Exact && out != 0 || m.Value&e.masks[j]&^tm != 0 {
			return maskedEntry{mask: 0, val: 1, entry: i}
		}
		me.mask |= e.masks[j] & tm << (tb.shifts[j] & 63)
		me.val |= m.Value & e.masks[j] & tm << (tb.shifts[j] & 63)
	}
	return me
}

func (tb *table) hashOf(ms []p4gen.Match) uint64 {
	var h uint64 = 14695981039346656037
	for _, m := range ms {
		h = mix(h, m.Value)
	}
	return h
}

func mix(h, v uint64) uint64 {
	h ^= v
	h *= 0x9E3779B97F4A7C15
	return h ^ h>>29
}

// lookup returns the action to run for the packet, and its arguments.
func (tb *table) lookup(p *pkt) (*action, []uint64) {
	if tb.packed {
		// The loop of a select's packed keys (parse): written out in
		// both, since a function of it is not inlined (70 instructions
		// a packet more on BenchmarkModel).
		var key uint64
		for i, k := range tb.keys {
			var v uint64
			if sl := tb.slots[i]; sl >= 0 {
				v = p.at(sl)
			} else {
				v = k(p)
			}
			key |= v & tb.tmasks[i] << (tb.shifts[i] & 63)
		}
		return tb.findPacked(key)
	}
	for i, k := range tb.keys {
		tb.vals[i] = k(p)
	}
	return tb.find(tb.vals)
}

// findPacked returns the action to run for the key values packed in
// key, in a packed table.
func (tb *table) findPacked(key uint64) (*action, []uint64) {
	for i := range tb.masked {
		if me := &tb.masked[i]; key&me.mask == me.val {
			e := &tb.entries[me.entry]
			return e.act, e.args
		}
	}
	return tb.def, tb.defArgs
}

// find returns the action to run for key values vals, and its arguments.
func (tb *table) find(vals []uint64) (*action, []uint64) {
	if tb.exact {
		var h uint64 = 14695981039346656037
		for _, v := range vals {
			h = mix(h, v)
		}
		var best *centry
	cand:
		for _, i := range tb.index[h] {
			e := &tb.entries[i]
			for j, m := range e.e.Match {
				if vals[j] != m.Value {
					continue cand
				}
			}
			if best == nil || e.e.Priority > best.e.Priority {
				best = e
			}
		}
		if best == nil {
			return tb.def, tb.defArgs
		}
		return best.act, best.args
	}
	if tb.packed {
		var key uint64
		for i, v := range vals {
			key |= v & tb.tmasks[i] << (tb.shifts[i] & 63)
		}
		return tb.findPacked(key)
	}
next:
	for _, i := range tb.order {
		e := &tb.entries[i]
		for j, m := range e.e.Match {
			v := vals[j]
			switch tb.t.Keys[j].Match {
			case p4gen.Exact:
				if v != m.Value {
					continue next
				}
			case p4gen.Range:
				if v < m.Lo || v > m.Hi {
					continue next
				}
			default:
				if v&e.masks[j] != m.Value&e.masks[j] {
					continue next
				}
			}
		}
		return e.act, e.args
	}
	return tb.def, tb.defArgs
}

// applyDirect applies a direct table: the packed key, the first entry
// whose mask and value it matches (else the default), its writes.
func (tb *table) applyDirect(p *pkt) {
	var key uint64
	for i, sl := range tb.slots {
		key |= p.at(sl) & tb.tmasks[i] << (tb.shifts[i] & 63)
	}
	ws := tb.defWrites
	for i := range tb.masked {
		if me := &tb.masked[i]; key&me.mask == me.val {
			ws = tb.entries[me.entry].writes
			break
		}
	}
	for _, w := range ws {
		p.put(w.slot, w.v)
	}
}
