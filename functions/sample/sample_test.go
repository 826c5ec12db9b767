package sample_test

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/functions"
	_ "github.com/ffpf-go/ffpf/functions/builtin"
	"github.com/ffpf-go/ffpf/functions/sample"
)

func newSample(t *testing.T, args ...functions.Arg) *sample.Sample {
	t.Helper()
	c, _ := functions.Default.Lookup("sample")
	p, err := c.Bind(args)
	if err != nil {
		t.Fatal(err)
	}
	ctx := &functions.Context{Params: p, Ann: 3}
	if err := c.Validate(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := sample.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckState(functions.TargetUser, p, s); err != nil {
		t.Fatal(err)
	}
	return s
}

func num(k, v string) functions.Arg {
	return functions.Arg{Key: k, Value: functions.Raw{Kind: functions.RawNumber, Text: v}}
}

// selection runs n packets through s in batches of size bs and returns
// the indices it passed.
func selection(s *sample.Sample, n, bs int) []int {
	p := buffers.NewPBuf(buffers.MaxBatch, 64)
	var out []int
	for base := 0; base < n; base += bs {
		b := buffers.NewBatch(p, 0, buffers.MaxBatch, 0)
		k := min(bs, n-base)
		for i := range k {
			b.E[i] = buffers.Entry{Slot: uint32(i), Class: uint32(base + i)}
		}
		b.N = k
		s.Process(b)
		for _, e := range b.Entries() {
			out = append(out, int(e.Class))
		}
	}
	return out
}

func TestEvery(t *testing.T) {
	s := newSample(t, num("every", "7"))
	got := selection(s, 1000, 100)
	var want []int
	for i := 0; i < 1000; i += 7 {
		want = append(want, i)
	}
	if !slices.Equal(got, want) {
		t.Errorf("every=7 passed %v", got)
	}
	seen, _ := s.Read("seen")
	sampled, _ := s.Read("sampled")
	if seen(nil, 0) != 1000 || sampled(nil, 0) != float64(len(want)) {
		t.Errorf("seen %v sampled %v", seen(nil, 0), sampled(nil, 0))
	}
	if _, err := s.Read("rand"); err == nil {
		t.Error("every= has a rand")
	}
}

// TestRate: the number sampled lies within 5 standard deviations of the
// binomial's mean, and the selection depends on the seed and the packets'
// order only, not on batch sizes.
func TestRate(t *testing.T) {
	const n = 200000
	for rate, p := range map[string]float64{"0.001": 0.001, "0.1": 0.1, "0.5": 0.5, "0.99": 0.99} {
		a := selection(newSample(t, num("rate", rate)), n, 256)
		b := selection(newSample(t, num("rate", rate)), n, 17)
		if !slices.Equal(a, b) {
			t.Errorf("rate=%s: the selection depends on batch sizes", rate)
		}
		c := selection(newSample(t, num("rate", rate), num("seed", "2")), n, 256)
		if slices.Equal(a, c) {
			t.Errorf("rate=%s: seeds 1 and 2 give the same selection", rate)
		}
		mean, sd := n*p, math.Sqrt(n*p*(1-p))
		if d := math.Abs(float64(len(a)) - mean); d > 5*sd {
			t.Errorf("rate=%s: %d of %d sampled, mean %.0f, sd %.1f", rate, len(a), n, mean, sd)
		}
	}
	if got := selection(newSample(t, num("rate", "0")), 1000, 256); len(got) != 0 {
		t.Errorf("rate=0 passed %d", len(got))
	}
	if got := selection(newSample(t, num("rate", "1")), 1000, 256); len(got) != 1000 {
		t.Errorf("rate=1 passed %d", len(got))
	}
}

// TestRand: a sampled packet's annotation is its number, below the rate.
func TestRand(t *testing.T) {
	s := newSample(t, num("rate", "0.25"), num("seed", "9"))
	rd, err := s.Read("rand")
	if err != nil {
		t.Fatal(err)
	}
	p := buffers.NewPBuf(buffers.MaxBatch, 64)
	b := buffers.NewBatch(p, 0, buffers.MaxBatch, 0)
	for i := range b.E {
		b.E[i] = buffers.Entry{Slot: uint32(i)}
	}
	b.N = buffers.MaxBatch
	s.Process(b)
	for _, e := range b.Entries() {
		r := rd(p, e.Slot)
		if r < 0 || r >= 0.25 || p.Ann(e.Slot)[3] != sample.Draw(9, uint64(e.Slot)) {
			t.Errorf("slot %d: rand %v", e.Slot, r)
		}
	}
	if b.N == 0 || b.N == buffers.MaxBatch {
		t.Errorf("%d of 256 sampled", b.N)
	}
}

func TestNoAllocs(t *testing.T) {
	s := newSample(t, num("rate", "0.5"))
	p := buffers.NewPBuf(buffers.MaxBatch, 64)
	b := buffers.NewBatch(p, 0, buffers.MaxBatch, 0)
	if a := testing.AllocsPerRun(100, func() {
		for i := range b.E {
			b.E[i] = buffers.Entry{Slot: uint32(i)}
		}
		b.N = buffers.MaxBatch
		s.Process(b)
	}); a != 0 {
		t.Errorf("%v allocations per batch", a)
	}
}

func run(t *testing.T, expr string) map[string]flowgraph.FunctionState {
	t.Helper()
	rt := flowgraph.New(flowgraph.Config{})
	defer rt.Close()
	if _, err := rt.Populate(expr, flowgraph.RequestOptions{}); err != nil {
		t.Fatalf("%s: %v", expr, err)
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
	out := map[string]flowgraph.FunctionState{}
	for _, f := range rt.Functions() {
		out[f.ID] = f
	}
	return out
}

func TestGraph(t *testing.T) {
	expr := `(gen,packets=50000) > s:(sample,rate=0.2,seed=5) > (match,"s.rand < 0.1 and s.seen >= 1") > (pktcount)`
	a, b := run(t, expr), run(t, expr)
	sa := a["sample#1"]
	if sa.State["seen"] != uint64(50000) || sa.State["sampled"] != sa.Out || sa.In != 50000 || sa.Filtered != 50000-sa.Out {
		t.Errorf("sample: %+v", sa)
	}
	if a["pktcount#1"].State["packets"] != b["pktcount#1"].State["packets"] || sa.Out != b["sample#1"].Out {
		t.Errorf("two runs differ: %v %v", a["pktcount#1"], b["pktcount#1"])
	}
	m := a["match#1"]
	if p := float64(m.Out) / float64(m.In); p < 0.4 || p > 0.6 {
		t.Errorf("rand < 0.1 passed %d of %d sampled at 0.2", m.Out, m.In)
	}
	if got := run(t, `(gen,packets=1000) > (sample,every=10) > (pktcount)`)["pktcount#1"].State["packets"]; got != uint64(100) {
		t.Errorf("every=10 of 1000: %v", got)
	}
	for expr, want := range map[string]string{
		`(gen) > (sample)`:                  "one of rate=P",
		`(gen) > (sample,rate=0.1,every=3)`: "one of rate=P",
		`(gen) > (sample,rate=1.5)`:         "probability",
		`(gen) > (sample,every=0)`:          "at least 1",
		// seed= draws rate='s numbers; every= has none to draw
		`(gen) > (sample,every=3,seed=4)`: "parameter seed of class sample has an effect only with rate=",
	} {
		rt := flowgraph.New(flowgraph.Config{})
		if _, err := rt.Populate(expr, flowgraph.RequestOptions{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", expr, err)
		}
		rt.Close()
	}
}
