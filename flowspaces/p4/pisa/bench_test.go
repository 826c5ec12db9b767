package pisa

import (
	"syscall"
	"testing"
	"time"

	"github.com/ffpf-go/ffpf/functions/p4gen"
	"github.com/ffpf-go/ffpf/functions/p4gen/p4gentest"
)

// cmsHLL is (cms,key=5tuple) > (hll,key=dstip) as the classes lower it
// at their default sizes.
func cmsHLL(tb testing.TB) *p4gen.Program { return p4gentest.CMSHLL(tb) }

// deep is the profile the model runs the lowered program on: Tofino-1,
// whose 12 stages it fits (TestCMSHLLDepth).
func deep() p4gen.Profile { return p4gen.Tofino1() }

// On Tofino-1's 12 stages the lowered program is allocated, within them.
func TestCMSHLLDepth(t *testing.T) {
	m, err := Load(cmsHLL(t), p4gen.Tofino1())
	if err != nil {
		t.Fatal(err)
	}
	if d := m.Report().Depth; d < 1 || d > 12 {
		t.Fatalf("depth %d", d)
	}
	t.Logf("depth %d", m.Report().Depth)
}

// The model computes the sketches the reference does, packet by packet.
func TestCMSHLLAsReference(t *testing.T) {
	prog := cmsHLL(t)
	m, err := Load(prog, deep())
	if err != nil {
		t.Fatal(err)
	}
	ref := p4gen.NewSwitch(prog)
	for i, f := range p4gentest.Frames(1, 3000, 500) {
		a := p4gen.Arrival{Data: f, Port: 1, Time: uint64(i)}
		want, err := ref.Process(a)
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.Process(a)
		if err != nil {
			t.Fatal(err)
		}
		if d := diffResult(want, got); d != "" {
			t.Fatalf("packet %d: %s", i, d)
		}
	}
	nonzero := 0
	for _, r := range prog.Registers {
		w, g := ref.Regs[r], m.Register(r)
		for i := range w {
			if w[i] != g[i] {
				t.Fatalf("register %s[%d]: %d, model %d", r.Name, i, w[i], g[i])
			}
			if w[i] != 0 {
				nonzero++
			}
		}
	}
	if nonzero < 1000 {
		t.Fatalf("only %d register cells counted anything", nonzero)
	}
}

// BenchmarkModel runs (cms) > (hll) on the model, one core: Mpps is
// packets per second of wall time over a trace in memory, mostly TCP.
// The trace is run once before the clock starts, so that the model has
// specialised ingress for each set of valid headers in it (a cost paid
// once per traffic shape, measured by BenchmarkSpecialize).
func BenchmarkModel(b *testing.B) { benchModel(b, maxVariants) }

// BenchmarkModelWhole is BenchmarkModel with no room for specialised
// ingresses: every packet runs the program's ingress whole (as packets
// do once a model holds maxVariants shapes), the baseline that
// specialisation is measured against.
func BenchmarkModelWhole(b *testing.B) { benchModel(b, 0) }

func benchModel(b *testing.B, room int, opts ...func(*Model)) {
	m, err := Load(cmsHLL(b), deep())
	if err != nil {
		b.Fatal(err)
	}
	for _, o := range opts {
		o(m)
	}
	m.maxVars = room
	frames := p4gentest.Frames(1, 4096, 10000)
	for i, f := range frames {
		if _, err := m.Process(p4gen.Arrival{Data: f, Port: 1, Time: uint64(i)}); err != nil {
			b.Fatal(err)
		}
	}
	if m.vars.n > room {
		b.Fatalf("%d variants in room for %d", m.vars.n, room)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu := time.Now(), cpuTime()
	for i := range b.N {
		if _, err := m.Process(p4gen.Arrival{Data: frames[i%len(frames)], Port: 1, Time: uint64(i)}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/(cpuTime()-cpu).Seconds()/1e6, "Mpps-cpu")
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds()/1e6, "Mpps")
}

// BenchmarkSpecialize is what the model spends, once, on the trace of
// BenchmarkModel: loading the program and specialising ingress for each
// set of valid headers the trace holds.
func BenchmarkSpecialize(b *testing.B) {
	prog := cmsHLL(b)
	frames := p4gentest.Frames(1, 4096, 10000)
	b.ReportAllocs()
	for range b.N {
		m, err := Load(prog, deep())
		if err != nil {
			b.Fatal(err)
		}
		for i, f := range frames {
			if _, err := m.Process(p4gen.Arrival{Data: f, Port: 1, Time: uint64(i)}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(m.vars.n), "variants")
	}
}

// cpuTime is the CPU time the process used: on a shared machine, packets
// per second of it vary less than per second of wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReference is the same on p4gen.Switch, the baseline the
// model's speed is a ratio against.
func BenchmarkReference(b *testing.B) {
	s := p4gen.NewSwitch(cmsHLL(b))
	frames := p4gentest.Frames(1, 4096, 10000)
	b.ResetTimer()
	start, cpu := time.Now(), cpuTime()
	for i := range b.N {
		if _, err := s.Process(p4gen.Arrival{Data: frames[i%len(frames)], Port: 1, Time: uint64(i)}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/(cpuTime()-cpu).Seconds()/1e6, "Mpps-cpu")
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds()/1e6, "Mpps")
}
