package measure_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/flowspaces/user"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/gen"
)

// loopSource replays a generated trace held in memory, again and again,
// so that a benchmark measures the flowgraph and not the disk. Zero-copy,
// it exposes the trace as its PBuf; otherwise it copies each packet once
// into the flowspace's PBuf, as a file or device source does.
type loopSource struct {
	trace    *buffers.PBuf
	zeroCopy bool
	next     uint32
}

func (s *loopSource) Info() functions.SourceInfo {
	return functions.SourceInfo{Name: "loop", LinkType: functions.LinkEthernet, MaxCapLen: s.trace.SlotSize()}
}

func (s *loopSource) Fill(b *buffers.Batch) error {
	n := uint32(s.trace.Slots())
	if s.zeroCopy {
		b.Base = s.next
		for b.Room() > 0 && s.next < n {
			b.AppendSlot(s.next)
			s.next++
		}
	} else {
		for b.Room() > 0 && s.next < n {
			m := s.trace.Meta(s.next)
			b.Append(s.trace.Data(s.next), m.WireLen, m.Timestamp)
			s.next++
		}
	}
	if s.next == n {
		s.next = 0
	}
	return nil
}

func (s *loopSource) Close() error { return nil }

type zeroCopyLoop struct{ *loopSource }

func (s zeroCopyLoop) PBuf() *buffers.PBuf { return s.trace }

// loopRegistry is the default registry plus a "loop" source of n
// generated packets. Replayed in a loop, the trace's timestamps jump back
// at each turn; without window= no function depends on them.
func loopRegistry(b *testing.B, n int, zeroCopy bool) *functions.Registry {
	reg := functions.NewRegistry()
	for _, c := range functions.Default.All() {
		if err := reg.Register(c); err != nil {
			b.Fatal(err)
		}
	}
	trace := buffers.NewPBuf(n, gen.MaxFrameLen)
	g := gen.New(gen.Config{Seed: 1, Packets: int64(n), IPv6: 0.2})
	for i := range n {
		c, w, ts, _ := g.Next(trace.Slot(uint32(i)))
		m := trace.Meta(uint32(i))
		m.CapLen, m.WireLen, m.Timestamp = uint32(c), uint32(w), ts
	}
	src := &loopSource{trace: trace, zeroCopy: zeroCopy}
	err := reg.Register(&functions.Class{Name: "loop", Summary: "generated packets replayed from memory",
		Validate: func(ctx *functions.Context) error { ctx.LinkType = functions.LinkEthernet; return nil },
		NewSource: func(*functions.Context) (functions.Source, error) {
			if zeroCopy {
				return zeroCopyLoop{src}, nil
			}
			return src, nil
		}})
	if err != nil {
		b.Fatal(err)
	}
	return reg
}

// BenchmarkMeasureGraph runs (bpf,"tcp") > (cms) > (hll) over an in-memory
// trace on one source goroutine, i.e. one core; an op is a batch of 256
// packets, so allocs/op is allocations per batch. Keys "shared" is the
// default datapath, where cms and hll, keyed alike, take one hash per
// packet from the flowspace; "perfunction" is the simple path beside it,
// where each parses and hashes the packet itself.
func BenchmarkMeasureGraph(b *testing.B) {
	for _, mode := range []struct {
		name     string
		zeroCopy bool
	}{{"zerocopy", true}, {"copyonce", false}} {
		for _, keys := range []struct {
			name        string
			perFunction bool
		}{{"shared", false}, {"perfunction", true}} {
			b.Run(mode.name+"/"+keys.name, func(b *testing.B) {
				benchMeasureGraph(b, mode.zeroCopy, keys.perFunction)
			})
		}
	}
}

func benchMeasureGraph(b *testing.B, zeroCopy, perFunction bool) {
	reg := loopRegistry(b, 1<<14, zeroCopy)
	b.ReportAllocs()
	b.ResetTimer()
	rt := flowgraph.New(flowgraph.Config{Registry: reg, CaptureLimit: int64(b.N) * buffers.MaxBatch,
		Hierarchy: user.New(user.Options{PerFunctionKeys: perFunction})})
	if _, err := rt.Populate(`(loop) > (bpf,"tcp") > (cms) > (hll)`, flowgraph.RequestOptions{}); err != nil {
		b.Fatal(err)
	}
	if err := rt.Instantiate(); err != nil {
		b.Fatal(err)
	}
	cpu := cpuTime(b)
	if err := rt.Activate(context.Background()); err != nil {
		b.Fatal(err)
	}
	if err := rt.Wait(); err != nil {
		b.Fatal(err)
	}
	cpu = cpuTime(b) - cpu
	b.StopTimer()
	fs := rt.Functions()
	rt.Close()
	if fs[len(fs)-1].In == 0 {
		b.Fatal("no packet reached hll")
	}
	b.ReportMetric(float64(rt.Packets())/rt.Elapsed().Seconds()/1e6, "Mpps")
	b.ReportMetric(float64(rt.Elapsed().Nanoseconds())/float64(rt.Packets()), "ns/pkt")
	// Per second of CPU the process used: on a machine shared with other
	// work, wall time counts the time others had the core, CPU time not.
	b.ReportMetric(float64(rt.Packets())/cpu.Seconds()/1e6, "Mpps/cpu")
}

// cpuTime is the user and system CPU time the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
