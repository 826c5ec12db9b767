package translator

import (
	"encoding/binary"
	"fmt"

	"github.com/ffpf-go/ffpf/functions/dta/layout"
)

// Mem is collector memory as plain byte slices, laid out as package
// layout says: the Memory a test compares, or a small collector embeds.
type Mem struct {
	KeyWrite  []byte   // Slots × layout.KeyWriteSlotSize
	Counters  []byte   // Counters × layout.CounterSize
	Postcards []byte   // Chunks × layout.ChunkSize
	Lists     [][]byte // Lists × ListSize × layout.AppendEntrySize
	// Outside counts writes that fell outside a region (never from a
	// Translator of the same Config; possible from records of another).
	Outside uint64
}

// NewMem allocates the memory of cfg.
func NewMem(cfg Config) *Mem {
	m := &Mem{KeyWrite: make([]byte, cfg.Slots*layout.KeyWriteSlotSize),
		Counters:  make([]byte, cfg.Counters*layout.CounterSize),
		Postcards: make([]byte, cfg.Chunks*layout.ChunkSize),
		Lists:     make([][]byte, cfg.Lists)}
	for i := range m.Lists {
		m.Lists[i] = make([]byte, cfg.ListSize*layout.AppendEntrySize)
	}
	return m
}

// Apply implements Memory.
func (m *Mem) Apply(w *Write) {
	var r []byte
	switch w.Region {
	case KeyWrite:
		r = m.KeyWrite
	case KeyIncrement:
		r = m.Counters
	case Postcards:
		r = m.Postcards
	case Append:
		if uint64(w.List) < uint64(len(m.Lists)) {
			r = m.Lists[w.List]
		}
	}
	n := uint64(len(w.Data))
	if w.Data == nil {
		n = layout.CounterSize
	}
	if w.Offset > uint64(len(r)) || n > uint64(len(r))-w.Offset {
		m.Outside++
		return
	}
	if w.Data == nil {
		c := r[w.Offset:]
		binary.LittleEndian.PutUint64(c, binary.LittleEndian.Uint64(c)+w.Add)
		return
	}
	copy(r[w.Offset:], w.Data)
}

// Equal reports the first difference between two memories, or nil.
func (m *Mem) Equal(o *Mem) error {
	cmp := func(name string, a, b []byte) error {
		if len(a) != len(b) {
			return fmt.Errorf("%s: %d bytes and %d", name, len(a), len(b))
		}
		for i := range a {
			if a[i] != b[i] {
				return fmt.Errorf("%s: byte %d is %#02x and %#02x", name, i, a[i], b[i])
			}
		}
		return nil
	}
	if err := cmp("keywrite", m.KeyWrite, o.KeyWrite); err != nil {
		return err
	}
	if err := cmp("counters", m.Counters, o.Counters); err != nil {
		return err
	}
	if err := cmp("postcards", m.Postcards, o.Postcards); err != nil {
		return err
	}
	if len(m.Lists) != len(o.Lists) {
		return fmt.Errorf("%d lists and %d", len(m.Lists), len(o.Lists))
	}
	for i := range m.Lists {
		if err := cmp(fmt.Sprintf("list %d", i), m.Lists[i], o.Lists[i]); err != nil {
			return err
		}
	}
	return nil
}
