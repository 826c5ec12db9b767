package flowgraph

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/lang"
)

// The test classes: src emits packets whose first byte is their index mod
// 256 and whose length is 60 + index mod 100; even keeps packets with an even
// first byte; mod3 keeps those whose index is divisible by 3; count counts;
// broken fails to instantiate; and closers are tracked.
var (
	nOpened, nClosed atomic.Int64
)

type testSource struct {
	n, i int64
	lt   functions.LinkType
}

func (s *testSource) Info() functions.SourceInfo {
	return functions.SourceInfo{Name: "test", LinkType: s.lt, MaxCapLen: 200}
}

func (s *testSource) Fill(b *buffers.Batch) error {
	for b.Room() > 0 && s.i < s.n {
		slot := b.NextSlot()
		l := 60 + int(s.i%100)
		slot[0] = byte(s.i)
		slot[1] = byte(s.i % 3)
		b.Commit(uint32(l), uint32(l), s.i)
		s.i++
	}
	if s.i >= s.n {
		return io.EOF
	}
	return nil
}

func (s *testSource) Close() error { nClosed.Add(1); return nil }

type keepIf func(pkt []byte) bool

func (k keepIf) Process(b *buffers.Batch) {
	n := 0
	for _, e := range b.E[:b.N] {
		if k(b.PBuf.Data(e.Slot)) {
			b.E[n] = e
			n++
		}
	}
	b.N = n
}

type counter struct{ m *buffers.MBuf }

func (c *counter) Process(b *buffers.Batch) { c.m.Add64(0, uint64(b.N)) }
func (c *counter) MBuf() *buffers.MBuf      { return c.m }
func (c *counter) Close() error             { nClosed.Add(1); return nil }

func testRegistry(t testing.TB) *functions.Registry {
	r := functions.NewRegistry()
	must := func(c *functions.Class) {
		if err := r.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	must(&functions.Class{Name: "src", Params: []functions.Param{
		{Name: "n", Type: functions.Int, Default: "1000"},
		{Name: "link", Type: functions.Int, Default: "1"},
	}, Validate: func(ctx *functions.Context) error {
		ctx.LinkType = functions.LinkType(ctx.Params.Int("link"))
		return nil
	}, NewSource: func(ctx *functions.Context) (functions.Source, error) {
		nOpened.Add(1)
		return &testSource{n: ctx.Params.Int("n"), lt: functions.LinkType(ctx.Params.Int("link"))}, nil
	}})
	must(&functions.Class{Name: "even", MinInputs: 1, MaxInputs: -1, New: func(*functions.Context) (functions.Function, error) {
		return keepIf(func(p []byte) bool { return p[0]%2 == 0 }), nil
	}})
	must(&functions.Class{Name: "mod3", MinInputs: 1, MaxInputs: 1, New: func(*functions.Context) (functions.Function, error) {
		return keepIf(func(p []byte) bool { return p[1] == 0 }), nil
	}})
	must(&functions.Class{Name: "count", MinInputs: 1, MaxInputs: -1, State: counterState("packets"),
		Params: []functions.Param{{Name: "tag", Type: functions.String}},
		New: func(*functions.Context) (functions.Function, error) {
			nOpened.Add(1)
			return &counter{buffers.NewMBuf(8, buffers.Native, buffers.Field{Name: "packets", Type: buffers.U64})}, nil
		}})
	must(&functions.Class{Name: "broken", MinInputs: 1, MaxInputs: -1, New: func(*functions.Context) (functions.Function, error) {
		return nil, errors.New("cannot open the device")
	}})
	return r
}

// counterState declares a state of one u64 counter, as count keeps.
func counterState(name string) *functions.State {
	return &functions.State{Fields: []functions.StateField{{Name: name, Type: buffers.U64, Merge: functions.MergeSum}}}
}

// runAll populates exprs, runs the graph to the end and returns the state
// of every function by id.
func runAll(t *testing.T, cfg Config, exprs ...string) (map[string]FunctionState, *Runtime) {
	t.Helper()
	cfg.Registry = testRegistry(t)
	rt := New(cfg)
	for _, e := range exprs {
		if _, err := rt.Populate(e, RequestOptions{DefaultSource: "(src,n=1000)"}); err != nil {
			t.Fatalf("populate %q: %v", e, err)
		}
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Activate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	out := map[string]FunctionState{}
	for _, f := range rt.Functions() {
		if f.In != f.Out+f.Filtered+f.Dropped {
			t.Errorf("%s: in %d != out %d + filtered %d + dropped %d", f.ID, f.In, f.Out, f.Filtered, f.Dropped)
		}
		out[f.ID] = f
	}
	return out, rt
}

func packets(f FunctionState) uint64 { return f.State["packets"].(uint64) }

func TestChainForkCounts(t *testing.T) {
	st, rt := runAll(t, Config{}, "(src) > (even) > [(count,tag=a) | (mod3) > (count,tag=b)]")
	if got := packets(st["count#1"]); got != 500 {
		t.Errorf("even packets = %d, want 500", got)
	}
	// index even and divisible by 3: multiples of 6 below 1000 → 167.
	if got := packets(st["count#2"]); got != 167 {
		t.Errorf("even and mod3 = %d, want 167", got)
	}
	if rt.Packets() != 1000 {
		t.Errorf("Packets = %d", rt.Packets())
	}
	if f := st["even#1"]; f.In != 1000 || f.Out != 500 || f.Filtered != 500 {
		t.Errorf("even counters %+v", f)
	}
}

func TestJoinOfTwoSourcesAndDefaultSource(t *testing.T) {
	st, _ := runAll(t, Config{}, "[[(src,n=300)|(src,n=700)] > (even)] > (count)")
	if got := packets(st["count#1"]); got != 150+350 {
		t.Errorf("joined count = %d, want 500", got)
	}
	st, _ = runAll(t, Config{}, "(even) > (count)")
	if st["src#1"].Params["n"] != int64(1000) || packets(st["count#1"]) != 500 {
		t.Errorf("default source not used: %+v", st)
	}
}

func TestJoinOfOneSourceIsAUnion(t *testing.T) {
	// Packets that are even AND divisible by 3 reach the join twice but are
	// one packet: 500 even + 334 mod3 - 167 both = 667.
	st, _ := runAll(t, Config{}, "(src) > [(even) | (mod3)] > (count)")
	if got := packets(st["count#1"]); got != 667 {
		t.Errorf("union = %d, want 667", got)
	}
}

func TestOverlaySharesIdenticalFunctions(t *testing.T) {
	st, rt := runAll(t, Config{}, "(src) > (even) > (count,tag=x)", "(src) > (even) > (count,tag=y)", "(src) > (even) > (count,tag=x)")
	if len(st) != 4 {
		var ids []string
		for id := range st {
			ids = append(ids, id)
		}
		t.Fatalf("want src, even and two counts; got %v", ids)
	}
	if st["even#1"].In != 1000 {
		t.Errorf("shared even ran %d packets, want 1000 (once)", st["even#1"].In)
	}
	reqs := rt.Requests()
	if a, c := reqs[0].Functions(), reqs[2].Functions(); a[2].ID != c[2].ID {
		t.Errorf("identical requests got different functions %s, %s", a[2].ID, c[2].ID)
	}
}

func TestLabels(t *testing.T) {
	st, _ := runAll(t, Config{}, "x:(src) > (even) > (count,tag=a); x > (mod3) > (count,tag=b)")
	if packets(st["count#1"]) != 500 || packets(st["count#2"]) != 334 {
		t.Errorf("labels: %d, %d", packets(st["count#1"]), packets(st["count#2"]))
	}
	if st["src#1"].Label != "x" {
		t.Errorf("label not kept: %+v", st["src#1"])
	}
}

func TestLimitIsExactAcrossSources(t *testing.T) {
	st, rt := runAll(t, Config{Limit: 777}, "[(src,n=100000)|(src,n=50000,link=1)] > (count)")
	if got := packets(st["count#1"]); got != 777 || rt.Packets() != 777 {
		t.Errorf("limit: counted %d, packets %d, want 777", got, rt.Packets())
	}
}

func TestPopulateErrors(t *testing.T) {
	reg := testRegistry(t)
	for _, tc := range []struct{ expr, want string }{
		{"(src) > (cuont)", `1:10: unknown class "cuont"; did you mean "count"?`},
		{"(src,lnik=3)", `1:6: unknown parameter "lnik" for class src; did you mean "link"?`},
		{"(src,n=abc)", `1:8: parameter n of class src: want a number`},
		{"(even) > (count)", `1:1: even has no input`},
		{"(src) > (src)", `1:9: src is a source`},
		{"x:(even) > (count) > x", `cycle x:even > count > x:even`},
		{"(src) > a:(even) > m:(mod3); m > b:(count); b > a", `cycle a:even > m:mod3 > b:count > a:even`},
		{"(src) > x:(even) > x", `even feeds itself`},
		{"[(src)|(src,link=101)] > (count)", `different link types (EN10MB and RAW)`},
		{"[(src)|(src,n=5)] > (mod3)", `mod3 takes at most 1 input(s), has 2`},
		{"(src) > y", `"y"`},
	} {
		rt := New(Config{Registry: reg})
		_, err := rt.Populate(tc.expr, RequestOptions{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.expr, err, tc.want)
			continue
		}
		if !IsInvalid(err) {
			t.Errorf("%s: %v is not a validation error", tc.expr, err)
		}
	}
}

func TestInstantiateIsAllOrNothing(t *testing.T) {
	rt := New(Config{Registry: testRegistry(t)})
	if _, err := rt.Populate("(src) > (count) > (broken)", RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	o, c := nOpened.Load(), nClosed.Load()
	err := rt.Instantiate()
	if err == nil || !strings.Contains(err.Error(), "broken#1: cannot open the device") {
		t.Fatalf("err = %v", err)
	}
	if nOpened.Load()-o != nClosed.Load()-c {
		t.Errorf("opened %d, closed %d: something stayed open", nOpened.Load()-o, nClosed.Load()-c)
	}
}

// TestInstantiateChecksDeclaredState: a class whose function keeps another
// state than the class declares fails at instantiation, naming the field,
// and what was created is released.
func TestInstantiateChecksDeclaredState(t *testing.T) {
	reg := testRegistry(t)
	for _, c := range []*functions.Class{
		{Name: "drift", MinInputs: 1, MaxInputs: -1, State: counterState("packets"),
			New: func(*functions.Context) (functions.Function, error) {
				nOpened.Add(1)
				return &counter{buffers.NewMBuf(8, buffers.Native, buffers.Field{Name: "pkts", Type: buffers.U64})}, nil
			}},
		{Name: "hidden", MinInputs: 1, MaxInputs: -1,
			New: func(*functions.Context) (functions.Function, error) {
				nOpened.Add(1)
				return &counter{buffers.NewMBuf(8, buffers.Native, buffers.Field{Name: "packets", Type: buffers.U64})}, nil
			}},
	} {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	for expr, want := range map[string]string{
		"(src) > (count) > (drift)":  `drift#1: class drift declares state field 0 as packets u64 at byte 0, but the function's MBuf has pkts u64 at byte 0`,
		"(src) > (count) > (hidden)": `hidden#1: class hidden declares no state in user, but the function keeps an MBuf of 8 bytes`,
	} {
		rt := New(Config{Registry: reg})
		if _, err := rt.Populate(expr, RequestOptions{}); err != nil {
			t.Fatal(err)
		}
		o, c := nOpened.Load(), nClosed.Load()
		if err := rt.Instantiate(); err == nil || err.Error() != want {
			t.Errorf("%s: err = %v, want %s", expr, err, want)
		}
		if err := rt.Close(); err != nil {
			t.Error(err)
		}
		if nOpened.Load()-o != nClosed.Load()-c {
			t.Errorf("%s: opened %d, closed %d: something stayed open", expr, nOpened.Load()-o, nClosed.Load()-c)
		}
	}
}

func TestCanonicalRoundTrip(t *testing.T) {
	reg := testRegistry(t)
	for _, expr := range []string{
		"(SRC,n=1000) > (even) > [(count,\"a b\") | (mod3) > (count,tag=b)]",
		"x:(src,n=5K) > (count); x > (even) > (count,tag=z)",
	} {
		rt := New(Config{Registry: reg})
		req, err := rt.Populate(expr, RequestOptions{})
		if err != nil {
			t.Fatal(err)
		}
		canon := req.Canonical()
		rt2 := New(Config{Registry: reg})
		req2, err := rt2.Populate(canon, RequestOptions{})
		if err != nil {
			t.Fatalf("canonical %q does not populate: %v", canon, err)
		}
		if req2.Canonical() != canon {
			t.Errorf("canonical form not stable: %q then %q", canon, req2.Canonical())
		}
		a, b := rt.Functions(), rt2.Functions()
		if len(a) != len(b) {
			t.Fatalf("%q: %d functions, canonical %q has %d", expr, len(a), canon, len(b))
		}
		for i := range a {
			if a[i].ID != b[i].ID || a[i].Class != b[i].Class {
				t.Errorf("%q: function %d differs: %s vs %s", expr, i, a[i].ID, b[i].ID)
			}
		}
		if strings.Contains(canon, "n=1000") || strings.Contains(canon, "SRC") {
			t.Errorf("canonical form keeps a default or upper case: %q", canon)
		}
	}
}

func TestSyntaxErrorHasCaret(t *testing.T) {
	rt := New(Config{Registry: testRegistry(t)})
	_, err := rt.Populate("(src) > > (count)", RequestOptions{})
	var le *lang.Error
	if !errors.As(err, &le) || le.Pos.Col != 9 || !strings.Contains(le.Caret(), "^") {
		t.Fatalf("err = %#v", err)
	}
}

func TestStopKeepsStateReadable(t *testing.T) {
	rt := New(Config{Registry: testRegistry(t)})
	if _, err := rt.Populate("(src,n=1G) > (count)", RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Activate(context.Background()); err != nil {
		t.Fatal(err)
	}
	running(t, rt)
	rt.Stop()
	n := rt.Packets()
	if n == 0 || n >= 1e9 {
		t.Fatalf("stopped after %d packets", n)
	}
	time.Sleep(20 * time.Millisecond) // were they flowing still, some would pass meanwhile
	if rt.Packets() != n {
		t.Error("packets still flow after Stop")
	}
	for _, f := range rt.Functions() {
		if f.Class == "count" && f.State["packets"] != n {
			t.Errorf("count state %v, want %d", f.State["packets"], n)
		}
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
}
