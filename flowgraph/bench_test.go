package flowgraph_test

import (
	"context"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/functions"
	_ "github.com/ffpf-go/ffpf/functions/builtin"
	"github.com/ffpf-go/ffpf/functions/gen"
)

// memorySource replays a generated trace held in memory, so that a
// benchmark measures the flowgraph and not the disk. Zero-copy, it exposes
// the trace as its PBuf and refers to slots; otherwise it copies each packet
// once into the flowspace's PBuf, as a file or device source does.
type memorySource struct {
	trace    *buffers.PBuf
	zeroCopy bool
	next     uint32
}

func (s *memorySource) Info() functions.SourceInfo {
	return functions.SourceInfo{Name: "memory", LinkType: functions.LinkEthernet, MaxCapLen: s.trace.SlotSize()}
}

func (s *memorySource) Fill(b *buffers.Batch) error {
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

func (s *memorySource) Close() error { return nil }

type zeroCopySource struct{ *memorySource }

func (s zeroCopySource) PBuf() *buffers.PBuf { return s.trace }

// registryWithMemory is the default registry plus a "memory" source class
// that replays n generated packets.
func registryWithMemory(tb testing.TB, n int, zeroCopy bool) *functions.Registry {
	reg := functions.NewRegistry()
	for _, c := range functions.Default.All() {
		if err := reg.Register(c); err != nil {
			tb.Fatal(err)
		}
	}
	trace := buffers.NewPBuf(n, gen.MaxFrameLen)
	g := gen.New(gen.Config{Seed: 1, Packets: int64(n)})
	for i := range n {
		c, w, ts, _ := g.Next(trace.Slot(uint32(i)))
		m := trace.Meta(uint32(i))
		m.CapLen, m.WireLen, m.Timestamp = uint32(c), uint32(w), ts
	}
	src := &memorySource{trace: trace, zeroCopy: zeroCopy}
	err := reg.Register(&functions.Class{Name: "memory", Summary: "generated packets replayed from memory",
		Validate: func(ctx *functions.Context) error { ctx.LinkType = functions.LinkEthernet; return nil },
		NewSource: func(*functions.Context) (functions.Source, error) {
			if zeroCopy {
				return zeroCopySource{src}, nil
			}
			return src, nil
		}})
	if err != nil {
		tb.Fatal(err)
	}
	return reg
}

// BenchmarkFlowgraph runs the reference graph over an in-memory
// trace (16384 generated packets, 800 bytes on average: 25 MB, more than the
// caches hold) on one source goroutine, i.e. one core, and reports Mpps.
func BenchmarkFlowgraph(b *testing.B) {
	for _, mode := range []struct {
		name     string
		zeroCopy bool
	}{{"zerocopy", true}, {"copyonce", false}} {
		b.Run(mode.name, func(b *testing.B) {
			reg := registryWithMemory(b, 1<<14, mode.zeroCopy)
			b.ReportAllocs()
			b.ResetTimer()
			rt := flowgraph.New(flowgraph.Config{Registry: reg, CaptureLimit: int64(b.N) * buffers.MaxBatch})
			_, err := rt.Populate(`(memory) > (bpf,expr="tcp and dst port 80") > [(pktcount)|(bytecount)]`, flowgraph.RequestOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if err := rt.Instantiate(); err != nil {
				b.Fatal(err)
			}
			if err := rt.Activate(context.Background()); err != nil {
				b.Fatal(err)
			}
			if err := rt.Wait(); err != nil {
				b.Fatal(err)
			}
			rt.Close()
			b.StopTimer()
			b.ReportMetric(float64(rt.Packets())/rt.Elapsed().Seconds()/1e6, "Mpps")
			b.ReportMetric(float64(rt.Elapsed().Nanoseconds())/float64(rt.Packets()), "ns/pkt")
		})
	}
}
