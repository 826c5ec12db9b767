package plugin_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/buffers/shared"
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

// memoryClass replays n generated packets (gen's mix: 5% DNS), from
// memory another process can map (a memfd, buffers/shared) when shared.
func memoryClass(tb testing.TB, n int, share bool) *functions.Class {
	p := generated(tb, n, share)
	return &functions.Class{Name: "memory", Summary: "generated packets replayed from memory",
		Validate:  func(ctx *functions.Context) error { ctx.LinkType = functions.LinkEthernet; return nil },
		NewSource: func(*functions.Context) (functions.Source, error) { return &trace{pbuf: p}, nil }}
}

// generated returns a PBuf of n generated packets (gen's mix), its slots
// in a memfd the plugin can map (buffers/shared) when share, on the heap
// otherwise.
func generated(tb testing.TB, n int, share bool) *buffers.PBuf {
	p := buffers.NewPBuf(n, gen.MaxFrameLen)
	if share {
		m, err := shared.Alloc("ffpf-test-trace", n*gen.MaxFrameLen)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { m.Close() })
		p = buffers.NewPBufOn(m.Bytes(), n, gen.MaxFrameLen)
	}
	g := gen.New(gen.Config{Seed: 1, Packets: int64(n)})
	for i := range n {
		c, w, ts, _ := g.Next(p.Slot(uint32(i)))
		m := p.Meta(uint32(i))
		m.CapLen, m.WireLen, m.Timestamp = uint32(c), uint32(w), ts
	}
	return p
}

// BenchmarkPluginFilter runs (memory) > (dnsname,suffix=".com") > (pktcount)
// on one source worker, b.N batches of 256 packets, with dnsname compiled
// in; served by its plugin with batches over shared memory, the trace in
// a memfd the plugin maps (zero-copy) or on the heap (each packet copied
// once into the ring); and served by its plugin with one go-plugin RPC
// per batch (packets in the message): Mpps of each, in the same run, and
// how the two sides waited for each other.
func BenchmarkPluginFilter(b *testing.B) {
	dir := pluginDir(b, "dnsname")
	if n, err := strconv.Atoi(os.Getenv("FFPF_BENCH_PART")); err == nil {
		defer plugin.SetPartSize(n)()
	}
	for _, mode := range []string{"inprocess", "inprocessshared", "shm", "shmcopy", "rpc"} {
		b.Run(mode, func(b *testing.B) {
			reg := registry(memoryClass(b, benchPackets, mode == "shm" || mode == "inprocessshared"))
			var h *plugin.Host
			if strings.HasPrefix(mode, "inprocess") {
				reg.Register(dns.Class)
			} else {
				var err error
				h, err = plugin.Load([]string{dir}, reg, plugin.Options{RPCBatches: mode == "rpc"})
				if err != nil {
					b.Fatal(err)
				}
				defer h.Close()
			}
			b.ReportAllocs()
			rt := flowgraph.New(flowgraph.Config{Registry: reg, Hierarchy: hierarchy.Userspace(), CaptureLimit: int64(b.N) * buffers.MaxBatch})
			if _, err := rt.Populate(`(memory) > (dnsname,suffix=".com") > (pktcount)`, flowgraph.RequestOptions{}); err != nil {
				b.Fatal(err)
			}
			if err := rt.Instantiate(); err != nil {
				b.Fatal(err)
			}
			pid := pluginPid(b, filepath.Join(dir, "dnsname"), !strings.HasPrefix(mode, "inprocess"))
			cpu0, pcpu0 := cpuTime(os.Getpid()), cpuTime(pid)
			b.ResetTimer()
			if err := rt.Activate(context.Background()); err != nil {
				b.Fatal(err)
			}
			if err := rt.Wait(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			cpu, pcpu := cpuTime(os.Getpid())-cpu0, cpuTime(pid)-pcpu0
			if err := rt.Close(); err != nil {
				b.Fatal(err)
			}
			for _, f := range rt.Functions() {
				if f.Class == "dnsname" && (f.In != rt.Packets() || f.Dropped != 0 || f.Out == 0) {
					b.Fatalf("dnsname: in %d out %d dropped %d of %d packets", f.In, f.Out, f.Dropped, rt.Packets())
				}
			}
			pkts := float64(rt.Packets())
			b.ReportMetric(pkts/rt.Elapsed().Seconds()/1e6, "Mpps")
			b.ReportMetric(float64(rt.Elapsed().Nanoseconds())/pkts, "ns/pkt")
			// CPU time per packet on each side, and how much of it went
			// on waiting for the other (spinning, or asleep, which takes
			// none).
			b.ReportMetric(float64(cpu)/pkts, "ffpf-cpu-ns/pkt")
			if pid != 0 {
				b.ReportMetric(float64(pcpu)/pkts, "plugin-cpu-ns/pkt")
			}
			if mode == "shm" || mode == "shmcopy" {
				s := h.Stats("dnsname")
				if want := rt.Packets(); s.Referred+s.Copied != want || (mode == "shm") != (s.Copied == 0) {
					b.Fatalf("%s: %d packets referred to, %d copied, of %d", mode, s.Referred, s.Copied, want)
				}
				n := float64(s.Parts)
				b.ReportMetric(float64(s.Waits.Waited)/pkts, "ffpf-wait-ns/pkt")
				b.ReportMetric(float64(s.PluginWaits.Waited)/pkts, "plugin-wait-ns/pkt")
				b.ReportMetric(float64(s.Waits.Slept)/n, "ffpf-sleeps/part")
				b.ReportMetric(float64(s.PluginWaits.Slept)/n, "plugin-sleeps/part")
				b.ReportMetric(float64(s.Wakes+s.PluginWakes)/n, "wakes/part")
			}
		})
	}
}

// pluginPid returns the process id of the plugin running the binary at
// path, or 0 when want is false.
func pluginPid(tb testing.TB, path string, want bool) int {
	if !want {
		return 0
	}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink("/proc/" + d.Name() + "/exe"); err == nil && exe == path {
			return pid
		}
	}
	tb.Fatalf("no process runs %s", path)
	return 0
}

// cpuTime returns the CPU time process pid took so far, in nanoseconds:
// the sum over its threads (/proc/PID/task/*/schedstat); 0 for pid 0.
func cpuTime(pid int) int64 {
	if pid == 0 {
		return 0
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var sum int64
	for _, t := range tasks {
		raw, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		f := strings.Fields(string(raw))
		if len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			sum += ns
		}
	}
	return sum
}

var benchPackets = func() int {
	if n, err := strconv.Atoi(os.Getenv("FFPF_BENCH_PACKETS")); err == nil {
		return n
	}
	return 1 << 14
}()
