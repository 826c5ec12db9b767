package plugin_test

import (
	"context"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/examples/plugin/dnsname/dns"
	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/flowspaces/hierarchy"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/gen"
	"github.com/ffpf-go/ffpf/functions/plugin"
)

// trace is a generated trace held in memory, replayed zero-copy: the
// benchmark measures the functions and the bridge, not a disk.
type trace struct {
	pbuf *buffers.PBuf
	next uint32
}

func (s *trace) Info() functions.SourceInfo {
	return functions.SourceInfo{Name: "memory", LinkType: functions.LinkEthernet, MaxCapLen: s.pbuf.SlotSize()}
}
func (s *trace) PBuf() *buffers.PBuf { return s.pbuf }
func (s *trace) Close() error        { return nil }
func (s *trace) Fill(b *buffers.Batch) error {
	b.Base = s.next
	for b.Room() > 0 && s.next < uint32(s.pbuf.Slots()) {
		b.AppendSlot(s.next)
		s.next++
	}
	if s.next == uint32(s.pbuf.Slots()) {
		s.next = 0
	}
	return nil
}

// memoryClass replays n generated packets (gen's mix: 5% DNS).
func memoryClass(n int) *functions.Class {
	p := buffers.NewPBuf(n, gen.MaxFrameLen)
	g := gen.New(gen.Config{Seed: 1, Packets: int64(n)})
	for i := range n {
		c, w, ts, _ := g.Next(p.Slot(uint32(i)))
		m := p.Meta(uint32(i))
		m.CapLen, m.WireLen, m.Timestamp = uint32(c), uint32(w), ts
	}
	return &functions.Class{Name: "memory", Summary: "generated packets replayed from memory",
		Validate:  func(ctx *functions.Context) error { ctx.LinkType = functions.LinkEthernet; return nil },
		NewSource: func(*functions.Context) (functions.Source, error) { return &trace{pbuf: p}, nil }}
}

// BenchmarkPluginFilter runs (memory) > (dnsname,suffix=".com") > (pktcount)
// on one source worker with dnsname compiled in, served by its plugin with
// batches over shared memory, and served by its plugin with one go-plugin
// RPC per batch (packets in the message): Mpps of each, in the same run.
func BenchmarkPluginFilter(b *testing.B) {
	dir := pluginDir(b, "dnsname")
	for _, mode := range []string{"inprocess", "shm", "rpc"} {
		b.Run(mode, func(b *testing.B) {
			reg := registry(memoryClass(1 << 14))
			if mode == "inprocess" {
				reg.Register(dns.Class)
			} else {
				h, err := plugin.Load([]string{dir}, reg, plugin.Options{RPCBatches: mode == "rpc"})
				if err != nil {
					b.Fatal(err)
				}
				defer h.Close()
			}
			b.ReportAllocs()
			rt := flowgraph.New(flowgraph.Config{Registry: reg, Hierarchy: hierarchy.Userspace(), Limit: int64(b.N) * buffers.MaxBatch})
			if _, err := rt.Populate(`(memory) > (dnsname,suffix=".com") > (pktcount)`, flowgraph.RequestOptions{}); err != nil {
				b.Fatal(err)
			}
			if err := rt.Instantiate(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			if err := rt.Activate(context.Background()); err != nil {
				b.Fatal(err)
			}
			if err := rt.Wait(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := rt.Close(); err != nil {
				b.Fatal(err)
			}
			for _, f := range rt.Functions() {
				if f.Class == "dnsname" && (f.In != rt.Packets() || f.Dropped != 0 || f.Out == 0) {
					b.Fatalf("dnsname: in %d out %d dropped %d of %d packets", f.In, f.Out, f.Dropped, rt.Packets())
				}
			}
			b.ReportMetric(float64(rt.Packets())/rt.Elapsed().Seconds()/1e6, "Mpps")
			b.ReportMetric(float64(rt.Elapsed().Nanoseconds())/float64(rt.Packets()), "ns/pkt")
		})
	}
}
