package flowgraph_test

import (
	"context"
	"io"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/functions"
	_ "github.com/ffpf-go/ffpf/functions/builtin"
	"github.com/ffpf-go/ffpf/functions/gen"
)

// memorySource replays a trace held in memory, so that a benchmark measures
// the flowgraph and not the disk.
type memorySource struct {
	pkts [][]byte
	wire []uint32
	i    int
}

func (s *memorySource) Info() functions.SourceInfo {
	return functions.SourceInfo{Name: "memory", LinkType: functions.LinkEthernet, MaxCapLen: 2048}
}

func (s *memorySource) Fill(b *buffers.Batch) error {
	for b.Room() > 0 {
		j := s.i % len(s.pkts)
		b.Append(s.pkts[j], s.wire[j], int64(s.i))
		s.i++
	}
	return nil
}

func (s *memorySource) Close() error { return io.EOF }

// registryWithMemory is the default registry plus a "memory" source that
// replays n generated packets.
func registryWithMemory(tb testing.TB, n int) *functions.Registry {
	reg := functions.NewRegistry()
	for _, c := range functions.Default.All() {
		if err := reg.Register(c); err != nil {
			tb.Fatal(err)
		}
	}
	g := gen.New(gen.Config{Seed: 1, Packets: int64(n)})
	src := &memorySource{}
	buf := make([]byte, 2048)
	for {
		c, w, _, ok := g.Next(buf)
		if !ok {
			break
		}
		src.pkts = append(src.pkts, append([]byte(nil), buf[:c]...))
		src.wire = append(src.wire, uint32(w))
	}
	err := reg.Register(&functions.Class{Name: "memory", Summary: "generated packets replayed from memory",
		Validate:  func(ctx *functions.Context) error { ctx.LinkType = functions.LinkEthernet; return nil },
		NewSource: func(*functions.Context) (functions.Source, error) { return src, nil }})
	if err != nil {
		tb.Fatal(err)
	}
	return reg
}

// BenchmarkFlowgraph runs the reference graph over an in-memory
// trace on one source goroutine (one core) and reports Mpps.
func BenchmarkFlowgraph(b *testing.B) {
	reg := registryWithMemory(b, 1<<16)
	b.ReportAllocs()
	b.ResetTimer()
	rt := flowgraph.New(flowgraph.Config{Registry: reg, Limit: int64(b.N) * buffers.MaxBatch})
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
}
