package functions

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
)

func concClass(k Concurrency, fields ...StateField) *Class {
	c := &Class{Name: "c", MinInputs: 1, MaxInputs: 1, Concurrency: k,
		Params: []Param{{Name: "report", Type: Int}},
		New:    func(*Context) (Function, error) { return nil, nil }}
	if len(fields) > 0 {
		c.State = &State{Fields: fields}
	}
	return c
}

var reportOrders = Ordering{When: "report=", If: func(p Params) bool { return p.Has("report") }, Why: "reports"}

// TestRegisterRefusesKindsTheStateCannotHonour: a class is refused when
// it declares a kind its state cannot keep in one of its targets, and
// accepted when it can.
func TestRegisterRefusesKindsTheStateCannotHonour(t *testing.T) {
	u64 := func(name string, m Merge) StateField { return StateField{Name: name, Type: buffers.U64, Merge: m} }
	for _, tc := range []struct {
		name string
		c    *Class
		want string // "" accepted
	}{
		{"stateless without state", concClass(Stateless), ""},
		{"stateless with state", concClass(Stateless, u64("n", MergeSum)), "cannot be stateless in user: it keeps state (n)"},
		{"stateless with eBPF-only state", func() *Class {
			c := concClass(Stateless, StateField{Name: "hook", Type: buffers.U64, Merge: MergeSum, Targets: []Target{TargetXDP}})
			c.Targets = []Target{TargetUser, TargetXDP}
			return c
		}(), ""},
		{"mergeable sum, max, or", concClass(Mergeable, u64("n", MergeSum), StateField{Name: "r", Type: buffers.U8, Merge: MergeMax, Len: 4}, u64("b", MergeOr)), ""},
		{"mergeable without state", concClass(Mergeable), "declares no state to merge"},
		{"mergeable float sum", concClass(Mergeable, StateField{Name: "f", Type: buffers.F64, Merge: MergeSum}), "sums of floating-point values depend on their order"},
		{"mergeable signed max", concClass(Mergeable, StateField{Name: "i", Type: buffers.I64, Merge: MergeMax}), "not the least i64"},
		{"mergeable shared", concClass(Mergeable, u64("t", MergeShared)), "state field t is shared by every worker"},
		{"mergeable shared when ordered", func() *Class {
			c := concClass(Mergeable, u64("t", MergeShared))
			c.OrderedWhen = []Ordering{reportOrders}
			return c
		}(), ""},
		{"mergeable big-endian", func() *Class {
			c := concClass(Mergeable, u64("n", MergeSum))
			c.State.Order = binary.BigEndian
			return c
		}(), "big-endian"},
		{"ordered with orderings", func() *Class {
			c := concClass(Ordered)
			c.OrderedWhen = []Ordering{reportOrders}
			return c
		}(), "needs no OrderedWhen"},
		{"ordering without why", func() *Class {
			c := concClass(Stateless)
			c.OrderedWhen = []Ordering{{When: "x", If: func(Params) bool { return true }}}
			return c
		}(), "must say when"},
		{"source", &Class{Name: "c", Concurrency: Stateless, NewSource: func(*Context) (Source, error) { return nil, nil }}, "a source is read by one worker"},
		{"unknown kind", concClass(7), "unknown concurrency"},
	} {
		err := NewRegistry().Register(tc.c)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// TestConcurrencyOfOrderings: an ordering that applies makes a function
// ordered, with its reason; otherwise the declared kind holds.
func TestConcurrencyOfOrderings(t *testing.T) {
	c := concClass(Mergeable, StateField{Name: "n", Type: buffers.U64, Merge: MergeSum})
	c.OrderedWhen = []Ordering{reportOrders}
	if err := NewRegistry().Register(c); err != nil {
		t.Fatal(err)
	}
	p, err := c.Bind(nil)
	if err != nil {
		t.Fatal(err)
	}
	if k, why := c.ConcurrencyOf(p); k != Mergeable || why != "" {
		t.Errorf("without report=: %v (%s), want mergeable", k, why)
	}
	p, err = c.Bind([]Arg{{Key: "report", Value: Raw{Kind: RawNumber, Text: "3"}}})
	if err != nil {
		t.Fatal(err)
	}
	if k, why := c.ConcurrencyOf(p); k != Ordered || why != "reports" {
		t.Errorf("with report=: %v (%s), want ordered because of reports", k, why)
	}
}

// TestFoldMergesEachFieldAsDeclared: a fold adds sums, keeps the larger
// of maxima and ors bits, value by value in every type, leaves a field
// only another target has alone, and zeroes the shard it folded.
func TestFoldMergesEachFieldAsDeclared(t *testing.T) {
	c := sketchClass()
	c.State.Fields[0].Merge = MergeMax // the gauge, u32
	p, err := c.Bind(nil)
	if err != nil {
		t.Fatal(err)
	}
	mk := func() *buffers.MBuf {
		m, err := c.State.NewMBuf(TargetUser, p)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	dst, src := mk(), mk()
	f := func(m *buffers.MBuf, name string) buffers.Field { return FieldOf(m, name) }
	dst.Uint32s(f(dst, "epoch"))[0], src.Uint32s(f(src, "epoch"))[0] = 7, 9
	dst.Uint64s(f(dst, "cms"))[3], src.Uint64s(f(src, "cms"))[3] = 1<<40, 5
	dst.Uint8s(f(dst, "regs"))[2], src.Uint8s(f(src, "regs"))[2] = 4, 3
	dst.Uint8s(f(dst, "regs"))[6], src.Uint8s(f(src, "regs"))[6] = 1, 200
	dst.Uint64s(f(dst, "bloom"))[1], src.Uint64s(f(src, "bloom"))[1] = 0b1010, 0b0110
	dst.Uint32s(f(dst, "win"))[9], src.Uint32s(f(src, "win"))[9] = 1<<31, 1<<31 // wraps, as the datapath's adds
	if err := c.Fold(TargetUser, dst, src); err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		name      string
		got, want uint64
	}{
		{"epoch (max)", uint64(dst.Uint32s(f(dst, "epoch"))[0]), 9},
		{"cms[3] (sum)", dst.Uint64s(f(dst, "cms"))[3], 1<<40 + 5},
		{"regs[2] (max)", uint64(dst.Uint8s(f(dst, "regs"))[2]), 4},
		{"regs[6] (max)", uint64(dst.Uint8s(f(dst, "regs"))[6]), 200},
		{"bloom[1] (or)", dst.Uint64s(f(dst, "bloom"))[1], 0b1110},
		{"win[9] (sum, wrapped)", uint64(dst.Uint32s(f(dst, "win"))[9]), 0},
	} {
		if x.got != x.want {
			t.Errorf("%s: %d, want %d", x.name, x.got, x.want)
		}
	}
	for i, b := range src.Bytes() {
		if b != 0 {
			t.Fatalf("the folded shard keeps byte %d = %d", i, b)
		}
	}
}
