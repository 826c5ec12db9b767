package functions

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/ffpf-go/ffpf/buffers"
)

// State declares the persistent state a function of a class keeps: the
// layout of its MBuf, known without instantiating a function. 'ffpf classes'
// prints it, the class's README documents the same fields, and a function
// that reads another's state by its label can be compiled against the
// writer's layout before the writer exists.
//
// Names, types, units and merges are fixed by the class; only the length of
// an array may follow from the parameters (a sketch's depth × width), so a
// layout needs the function's Params but no instance of it.
type State struct {
	// Order is the byte order of the MBuf; nil means buffers.Native, the
	// machine's own, in which the datapath updates values atomically.
	// State that leaves the machine as it is (a DTA report) may declare
	// another.
	Order  binary.ByteOrder
	Fields []StateField

	// As, when set, names the target whose layout the state takes in a
	// flowspace of target t with parameters p (a sketch asked for a
	// switch's positions keeps the switch's layout in userspace too);
	// unset, it is t.
	As func(t Target, p Params) Target
}

// StateField declares one named field of a class's state.
type StateField struct {
	Name    string            // as 'ffpf run --json' shows it
	Type    buffers.FieldType // of one value
	Unit    string            // of one value: "packets", "bytes"; empty for none
	Merge   Merge             // how an eBPF flowspace's per-CPU copies combine
	Summary string            // one line, for 'ffpf classes'

	// Len makes the field an array of Len values (a histogram); LenOf
	// makes it an array whose length follows from the parameters (a
	// count-min sketch's depth × width, a HyperLogLog's 2^precision
	// registers), and LenDoc says how, for 'ffpf classes' ("depth×width").
	// Neither: the field is one value.
	Len    int
	LenOf  func(p Params) int
	LenDoc string

	// Parity keeps the field twice, one copy per epoch parity, as a
	// window double-buffers: the copy of the current epoch's parity is
	// written while the other, the last complete epoch, is read and then
	// swept. The two copies follow one another, the even epochs' first.
	Parity bool

	// Targets, when set, are the only kinds of flowspace in which a
	// function has the field (the verdict counts of an eBPF hook);
	// otherwise it has it wherever it runs.
	Targets []Target
}

// Merge is how the per-CPU copies of a field that an eBPF flowspace keeps
// combine into the one value a reader sees.
type Merge uint8

const (
	MergeSum    Merge = iota + 1 // a counter: the copies add up
	MergeMax                     // a register (HyperLogLog): the largest copy
	MergeOr                      // bits (a Bloom filter): set in any copy
	MergeShared                  // no per-CPU copies: one value every CPU updates atomically (a gauge, a structure the datapath itself tests)
)

// String returns the merge's name: sum, max, or, shared.
func (m Merge) String() string {
	switch m {
	case MergeSum:
		return "sum"
	case MergeMax:
		return "max"
	case MergeOr:
		return "or"
	case MergeShared:
		return "shared"
	}
	return fmt.Sprintf("Merge(%d)", uint8(m))
}

// TypeName describes the field's type with its length: "u64", "u32[16]",
// "u32[depth×width]", and "2×u64[width]" for a field kept per epoch parity.
func (f *StateField) TypeName() string {
	s := f.Type.String()
	switch {
	case f.LenOf != nil:
		s += "[" + f.LenDoc + "]"
	case f.Len > 0:
		s += fmt.Sprintf("[%d]", f.Len)
	}
	if f.Parity {
		s = "2×" + s
	}
	return s
}

// In reports whether a function running in a flowspace of target t has the
// field.
func (f *StateField) In(t Target) bool { return len(f.Targets) == 0 || slices.Contains(f.Targets, t) }

// OrderName names the declared byte order: native, big-endian or
// little-endian.
func (s *State) OrderName() string { return orderName(s.order()) }

func (s *State) order() binary.ByteOrder {
	if s.Order == nil {
		return buffers.Native
	}
	return s.Order
}

func orderName(o binary.ByteOrder) string {
	switch o {
	case buffers.Native:
		return "native"
	case binary.BigEndian:
		return "big-endian"
	case binary.LittleEndian:
		return "little-endian"
	}
	return o.String()
}

// Validate checks the declaration itself, whatever the parameters.
func (s *State) Validate() error {
	if s == nil {
		return nil
	}
	if len(s.Fields) == 0 {
		return errors.New("state declares no field: leave Class.State nil")
	}
	seen := map[string]*StateField{}
	for i := range s.Fields {
		f := &s.Fields[i]
		switch {
		case f.Name == "":
			return fmt.Errorf("state field %d has no name", i)
		case seen[f.Name] != nil && !disjoint(seen[f.Name], f):
			return fmt.Errorf("state field %s is declared twice", f.Name)
		case !slices.Contains([]buffers.FieldType{buffers.U8, buffers.U32, buffers.U64, buffers.I64, buffers.F64}, f.Type):
			return fmt.Errorf("state field %s has no type", f.Name)
		case f.Merge < MergeSum || f.Merge > MergeShared:
			return fmt.Errorf("state field %s does not say how per-CPU copies merge", f.Name)
		case f.Merge == MergeOr && (f.Type == buffers.I64 || f.Type == buffers.F64):
			return fmt.Errorf("state field %s: bits are unsigned, not %v", f.Name, f.Type)
		case f.Len < 0:
			return fmt.Errorf("state field %s has a negative length", f.Name)
		case f.LenOf != nil && f.Len != 0:
			return fmt.Errorf("state field %s has both a fixed length and a length from its parameters", f.Name)
		case f.LenOf != nil && f.LenDoc == "":
			return fmt.Errorf("state field %s: LenDoc must say how its length follows from the parameters", f.Name)
		}
		seen[f.Name] = f
	}
	return nil
}

// disjoint reports whether two fields are in no flowspace together: a
// name may be declared once per target (a structure laid out otherwise
// on a switch).
func disjoint(a, b *StateField) bool {
	if len(a.Targets) == 0 || len(b.Targets) == 0 {
		return false
	}
	for _, t := range a.Targets {
		if b.In(t) {
			return false
		}
	}
	return true
}

// Layout is the MBuf of a function with parameters p that runs in a
// flowspace of target t: its fields at their offsets, and its size in
// bytes. Fields follow one another in declaration order, each aligned to
// the size of its type, and the size is a whole number of 8-byte words.
// No field (size 0): the function keeps no state there.
func (s *State) Layout(t Target, p Params) (fields []buffers.Field, size int, err error) {
	if s == nil {
		return nil, 0, nil
	}
	if err := s.Validate(); err != nil {
		return nil, 0, err
	}
	if s.As != nil {
		t = s.As(t, p)
	}
	for i := range s.Fields {
		f := &s.Fields[i]
		if !f.In(t) {
			continue
		}
		n := f.Len
		if f.LenOf != nil {
			if n = f.LenOf(p); n < 1 {
				return nil, 0, fmt.Errorf("state field %s would hold %d values (%s)", f.Name, n, f.LenDoc)
			}
		}
		if f.Parity {
			n = 2 * max(n, 1)
		}
		sz := f.Type.Size()
		size = (size + sz - 1) / sz * sz
		fields = append(fields, buffers.Field{Name: f.Name, Type: f.Type, Offset: size, Count: n})
		size += max(n, 1) * sz
	}
	return fields, (size + 7) / 8 * 8, nil
}

// CheckState reports whether x, a function or source of the class with
// parameters p that runs in a flowspace of target t, keeps the state the
// class declares there: an MBuf of the declared byte order, size and
// fields, or no state when the class declares none. The flowgraph checks
// every function it instantiates, so a class whose code drifts from its
// declaration fails at once, with the difference named.
func (c *Class) CheckState(t Target, p Params, x any) error {
	want, size, err := c.State.Layout(t, p)
	if err != nil {
		return fmt.Errorf("class %s: %v", c.Name, err)
	}
	st, ok := x.(Stateful)
	var m *buffers.MBuf
	if ok {
		m = st.MBuf()
	}
	switch {
	case m == nil && len(want) == 0:
		return nil
	case m == nil:
		return fmt.Errorf("class %s declares state (%s) but the function keeps none", c.Name, want[0].Name)
	case len(want) == 0:
		return fmt.Errorf("class %s declares no state in %s, but the function keeps an MBuf of %d bytes", c.Name, t, len(m.Bytes()))
	}
	if got := orderName(m.Order()); got != c.State.OrderName() {
		return fmt.Errorf("class %s declares %s state, but the function's MBuf is %s", c.Name, c.State.OrderName(), got)
	}
	if len(m.Bytes()) != size {
		return fmt.Errorf("class %s declares %d bytes of state, but the function's MBuf has %d", c.Name, size, len(m.Bytes()))
	}
	got := m.Fields()
	for i := range max(len(got), len(want)) {
		switch {
		case i >= len(got):
			return fmt.Errorf("class %s declares state field %s, which the function's MBuf lacks", c.Name, want[i].Name)
		case i >= len(want):
			return fmt.Errorf("class %s does not declare the field %s of the function's MBuf", c.Name, got[i].Name)
		case got[i] != want[i]:
			return fmt.Errorf("class %s declares state field %d as %s, but the function's MBuf has %s", c.Name, i, describe(want[i]), describe(got[i]))
		}
	}
	return nil
}

func describe(f buffers.Field) string {
	s := f.Name + " " + f.Type.String()
	if f.Count > 0 {
		s += fmt.Sprintf("[%d]", f.Count)
	}
	return fmt.Sprintf("%s at byte %d", s, f.Offset)
}

// Readable is a function whose state others read by its label (named
// state, DESIGN.md §11): Read returns how to get the value named name, for
// a packet (a sketch's estimate for the packet's key) or for none (a
// total). A reader calls it at instantiation and the Reader per packet,
// under the reader's lock, not the writer's: a Reader reads the writer's
// state atomically. Values are float64, exact for integers below 2^53.
type Readable interface {
	Read(name string) (Reader, error)
	// ReadNames lists the names Read knows, for messages and docs.
	ReadNames() []string
}

// Reader gives a value of a function's state for one packet.
type Reader func(p *buffers.PBuf, slot uint32) float64

// Summarizer is a function whose state, as 'ffpf run --json' shows it, is
// computed from its MBuf rather than its fields one by one (a
// HyperLogLog's estimate from its registers; a sketch's arrays are left
// out). Summary reads the MBuf atomically: it runs while the datapath does.
type Summarizer interface {
	Summary() map[string]any
}

// NewMBuf allocates the MBuf of a function with parameters p that runs in
// a flowspace of target t, laid out as the declaration says.
func (s *State) NewMBuf(t Target, p Params) (*buffers.MBuf, error) {
	fields, size, err := s.Layout(t, p)
	if err != nil {
		return nil, err
	}
	return buffers.NewMBuf(size, s.order(), fields...), nil
}

// NewMBuf allocates the MBuf of the function ctx instantiates, laid out as
// s declares for its target (userspace when none) and parameters: in
// ctx.Memory when the flowspace gives memory of its own (a plugin's state,
// shared with ffpf), on the heap otherwise. A class that may run out of
// process allocates its state with it.
func (ctx *Context) NewMBuf(s *State) (*buffers.MBuf, error) {
	t := ctx.Target
	if t == "" {
		t = TargetUser
	}
	if ctx.Memory == nil {
		return s.NewMBuf(t, ctx.Params)
	}
	fields, size, err := s.Layout(t, ctx.Params)
	if err != nil {
		return nil, err
	}
	mem, err := ctx.Memory(size)
	if err != nil {
		return nil, err
	}
	if len(mem) != size {
		return nil, fmt.Errorf("functions: %s: %d bytes of memory for a state of %d", ctx.ID, len(mem), size)
	}
	return buffers.NewMBufOn(mem, s.order(), fields...), nil
}

// FieldOf returns the field of m named name; it panics if there is none,
// which is a class whose code does not follow its declaration.
func FieldOf(m *buffers.MBuf, name string) buffers.Field {
	for _, f := range m.Fields() {
		if f.Name == name {
			return f
		}
	}
	panic("functions: MBuf has no field " + name)
}

// IntReadable is a Readable whose values are integers that a float64 would
// round (a timestamp in ns, a tag's 64 bits): ReadInt gives them exactly,
// and a reader that computes on integers (match) prefers it. It knows the
// same names as Read, or fewer.
type IntReadable interface {
	ReadInt(name string) (IntReader, error)
}

// IntReader gives an integer value of a function's state for one packet.
type IntReader func(p *buffers.PBuf, slot uint32) int64

// ReadAsFloat is Read for a function whose values are all integers: its
// ReadInt, as floats.
func ReadAsFloat(f IntReadable, name string) (Reader, error) {
	get, err := f.ReadInt(name)
	if err != nil {
		return nil, err
	}
	return func(p *buffers.PBuf, slot uint32) float64 { return float64(get(p, slot)) }, nil
}
