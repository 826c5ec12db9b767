package functions

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
)

// sketchClass declares the state the measurement classes to come keep: a
// gauge, a count-min sketch whose size follows from its parameters, a
// HyperLogLog's byte registers, Bloom bits, a window kept per epoch parity,
// and a field only an eBPF hook has.
func sketchClass() *Class {
	return &Class{Name: "sketch", MinInputs: 1, MaxInputs: 1,
		New: func(*Context) (Function, error) { return nil, nil },
		Params: []Param{
			{Name: "depth", Type: Int, Default: "3"},
			{Name: "width", Type: Int, Default: "5"},
		},
		State: &State{Fields: []StateField{
			{Name: "epoch", Type: buffers.U32, Merge: MergeShared, Summary: "current epoch"},
			{Name: "cms", Type: buffers.U64, Unit: "bytes", Merge: MergeSum, Summary: "count-min rows",
				LenOf: func(p Params) int { return int(p.Int("depth") * p.Int("width")) }, LenDoc: "depth×width"},
			{Name: "regs", Type: buffers.U8, Merge: MergeMax, Len: 7, Summary: "HyperLogLog registers"},
			{Name: "bloom", Type: buffers.U64, Merge: MergeOr, Len: 2, Summary: "Bloom bits"},
			{Name: "win", Type: buffers.U32, Unit: "packets", Merge: MergeSum, Parity: true,
				LenOf: func(p Params) int { return int(p.Int("width")) }, LenDoc: "width", Summary: "window"},
			{Name: "hook", Type: buffers.U64, Unit: "packets", Merge: MergeSum, Targets: []Target{TargetXDP},
				Summary: "verdicts at the hook"},
		}}}
}

type stateFn struct{ m *buffers.MBuf }

func (stateFn) Process(*buffers.Batch) {}
func (s stateFn) MBuf() *buffers.MBuf  { return s.m }

func layoutOf(t *testing.T, c *Class, tg Target, p Params) ([]buffers.Field, int) {
	t.Helper()
	f, n, err := c.State.Layout(tg, p)
	if err != nil {
		t.Fatal(err)
	}
	return f, n
}

func TestStateLayoutFollowsParamsAndTarget(t *testing.T) {
	c := sketchClass()
	p, err := c.Bind([]Arg{{Key: "width", Value: num("4", "")}})
	if err != nil {
		t.Fatal(err)
	}
	fields, size := layoutOf(t, c, TargetUser, p)
	want := []buffers.Field{
		{Name: "epoch", Type: buffers.U32, Offset: 0},
		{Name: "cms", Type: buffers.U64, Offset: 8, Count: 12}, // aligned to 8 after a u32
		{Name: "regs", Type: buffers.U8, Offset: 104, Count: 7},
		{Name: "bloom", Type: buffers.U64, Offset: 112, Count: 2}, // 111 rounded up
		{Name: "win", Type: buffers.U32, Offset: 128, Count: 8},   // two copies of width
	}
	if len(fields) != len(want) {
		t.Fatalf("layout %v, want %v", fields, want)
	}
	for i := range want {
		if fields[i] != want[i] {
			t.Errorf("field %d is %+v, want %+v", i, fields[i], want[i])
		}
	}
	if size != 160 {
		t.Errorf("size %d, want 160 (128 + 32, a whole number of words)", size)
	}
	// In XDP the hook's field comes last; nothing before it moves.
	xdp, size := layoutOf(t, c, TargetXDP, p)
	if len(xdp) != 6 || xdp[5] != (buffers.Field{Name: "hook", Type: buffers.U64, Offset: 160}) || size != 168 {
		t.Errorf("xdp layout %v, %d bytes", xdp, size)
	}
	// The layout is one an MBuf accepts.
	buffers.NewMBuf(size, buffers.Native, xdp...)

	names := map[string]string{}
	for i := range c.State.Fields {
		f := &c.State.Fields[i]
		names[f.Name] = f.TypeName() + " " + f.Merge.String()
	}
	for name, want := range map[string]string{"epoch": "u32 shared", "cms": "u64[depth×width] sum",
		"regs": "u8[7] max", "bloom": "u64[2] or", "win": "2×u32[width] sum"} {
		if names[name] != want {
			t.Errorf("%s is described as %q, want %q", name, names[name], want)
		}
	}
	if got := c.State.OrderName(); got != "native" {
		t.Errorf("byte order %q", got)
	}
}

func TestStateDeclarationErrors(t *testing.T) {
	for _, tc := range []struct {
		f    StateField
		want string
	}{
		{StateField{Type: buffers.U64, Merge: MergeSum}, "no name"},
		{StateField{Name: "x", Merge: MergeSum}, "no type"},
		{StateField{Name: "x", Type: buffers.U64}, "merge"},
		{StateField{Name: "x", Type: buffers.F64, Merge: MergeOr}, "unsigned"},
		{StateField{Name: "x", Type: buffers.U64, Merge: MergeSum, Len: 2, LenOf: func(Params) int { return 1 }, LenDoc: "n"}, "both"},
		{StateField{Name: "x", Type: buffers.U64, Merge: MergeSum, LenOf: func(Params) int { return 1 }}, "LenDoc"},
	} {
		s := &State{Fields: []StateField{tc.f}}
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one about %q", tc.f, err, tc.want)
		}
	}
	twice := &State{Fields: []StateField{{Name: "x", Type: buffers.U64, Merge: MergeSum}, {Name: "x", Type: buffers.U32, Merge: MergeSum}}}
	if err := twice.Validate(); err == nil {
		t.Error("a field declared twice is accepted")
	}
	p4 := []Target{TargetP4}
	overlap := &State{Fields: []StateField{{Name: "x", Type: buffers.U64, Merge: MergeSum, Targets: []Target{TargetUser, TargetP4}},
		{Name: "x", Type: buffers.U32, Merge: MergeSum, Targets: p4}}}
	if err := overlap.Validate(); err == nil {
		t.Error("a field declared twice for p4 is accepted")
	}
	perTarget := &State{Fields: []StateField{{Name: "x", Type: buffers.U64, Merge: MergeSum, Targets: []Target{TargetUser}},
		{Name: "x", Type: buffers.U32, Merge: MergeSum, Targets: p4}}}
	if err := perTarget.Validate(); err != nil {
		t.Errorf("a field declared once per target: %v", err)
	}
	empty := &State{Fields: []StateField{{Name: "x", Type: buffers.U64, Merge: MergeSum,
		LenOf: func(Params) int { return 0 }, LenDoc: "none"}}}
	if _, _, err := empty.Layout(TargetUser, Params{}); err == nil {
		t.Error("an array of no value is accepted")
	}
}

// TestCheckStateNamesTheDrift builds MBufs the way a class's code might
// drift from its declaration and expects each to be refused.
func TestCheckStateNamesTheDrift(t *testing.T) {
	c := sketchClass()
	p, _ := c.Bind(nil)
	fields, size := layoutOf(t, c, TargetUser, p)
	if err := c.CheckState(TargetUser, p, stateFn{buffers.NewMBuf(size, buffers.Native, fields...)}); err != nil {
		t.Fatalf("the declared layout is refused: %v", err)
	}
	renamed := append([]buffers.Field(nil), fields...)
	renamed[1].Name = "rows"
	moved := append([]buffers.Field(nil), fields...)
	moved[2].Offset++
	for _, tc := range []struct {
		name string
		t    Target
		fn   any
		want string
	}{
		{"no state", TargetUser, struct{ Function }{}, "keeps none"},
		{"nil function", TargetUser, nil, "keeps none"},
		{"renamed", TargetUser, stateFn{buffers.NewMBuf(size, buffers.Native, renamed...)}, "cms u64[15] at byte 8"},
		{"moved", TargetUser, stateFn{buffers.NewMBuf(size, buffers.Native, moved...)}, "regs u8[7] at byte 129"},
		{"field lacking", TargetUser, stateFn{buffers.NewMBuf(size, buffers.Native, fields[:4]...)}, "lacks"},
		{"field undeclared", TargetUser, stateFn{buffers.NewMBuf(size, buffers.Native, // in regs' padding
			append(fields[:5:5], buffers.Field{Name: "extra", Type: buffers.U8, Offset: 135})...)}, "does not declare the field extra"},
		{"byte order", TargetUser, stateFn{buffers.NewMBuf(size, binary.BigEndian, fields...)}, "big-endian"},
		{"size", TargetUser, stateFn{buffers.NewMBuf(size+8, buffers.Native, fields...)}, "bytes"},
		{"target", TargetXDP, stateFn{buffers.NewMBuf(size+8, buffers.Native, fields...)}, "field hook"},
	} {
		if err := c.CheckState(tc.t, p, tc.fn); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
	stateless := &Class{Name: "plain"}
	if err := stateless.CheckState(TargetUser, Params{}, stateFn{buffers.NewMBuf(8, buffers.Native,
		buffers.Field{Name: "n", Type: buffers.U64})}); err == nil || !strings.Contains(err.Error(), "declares no state") {
		t.Errorf("undeclared state: %v", err)
	}
	if err := stateless.CheckState(TargetUser, Params{}, struct{ Function }{}); err != nil {
		t.Errorf("stateless function refused: %v", err)
	}
}
