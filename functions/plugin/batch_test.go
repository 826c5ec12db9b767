package plugin_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/examples/plugin/dnsname/dns"
	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/flowspaces/hierarchy"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/plugin"
)

// sized replays a PBuf of generated packets once, in batches whose sizes
// cycle through sizes, then ends.
type sized struct {
	pbuf  *buffers.PBuf
	sizes []int
	next  uint32
	k     int
}

func (s *sized) Info() functions.SourceInfo {
	return functions.SourceInfo{Name: "sized", LinkType: functions.LinkEthernet, MaxCapLen: s.pbuf.SlotSize()}
}
func (s *sized) PBuf() *buffers.PBuf { return s.pbuf }
func (s *sized) Close() error        { return nil }
func (s *sized) Fill(b *buffers.Batch) error {
	b.Base = s.next
	n := min(s.sizes[s.k%len(s.sizes)], b.Room())
	s.k++
	for ; n > 0 && s.next < uint32(s.pbuf.Slots()); n-- {
		b.AppendSlot(s.next)
		s.next++
	}
	if s.next == uint32(s.pbuf.Slots()) {
		return io.EOF
	}
	return nil
}

// sizedClass is a source class named name replaying n generated packets
// (gen's mix) in batches of sizes, from a memfd the plugin can map
// (buffers/shared) when share, from the heap otherwise.
func sizedClass(t testing.TB, name string, n int, share bool, sizes ...int) *functions.Class {
	p := generated(t, n, share)
	return &functions.Class{Name: name, Summary: "generated packets replayed from memory in batches of given sizes",
		Validate:  func(ctx *functions.Context) error { ctx.LinkType = functions.LinkEthernet; return nil },
		NewSource: func(*functions.Context) (functions.Source, error) { return &sized{pbuf: p, sizes: sizes}, nil }}
}

// runGraph runs exprs with registry reg, checks in = out + filtered +
// dropped on every function, and returns their states by id and the run's
// error (Wait's, then Close's).
func runGraph(t testing.TB, reg *functions.Registry, opts flowgraph.RequestOptions, exprs ...string) (map[string]flowgraph.FunctionState, error) {
	t.Helper()
	rt := flowgraph.New(flowgraph.Config{Registry: reg, Hierarchy: hierarchy.Userspace()})
	for _, e := range exprs {
		if _, err := rt.Populate(e, opts); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Activate(context.Background()); err != nil {
		t.Fatal(err)
	}
	err := rt.Wait()
	if cerr := rt.Close(); err == nil {
		err = cerr
	}
	out := map[string]flowgraph.FunctionState{}
	for _, f := range rt.Functions() {
		out[f.ID] = f
		if f.In != f.Out+f.Filtered+f.Dropped {
			t.Errorf("%s: in %d != out %d + filtered %d + dropped %d", f.ID, f.In, f.Out, f.Filtered, f.Dropped)
		}
	}
	return out, err
}

// TestBatchesCrossInParts: batches of 1 to 256 packets cross to the
// plugin in parts of 256 (one per batch), 64, 7 and 1 packets, several in
// flight at once, with their packets referred to in memory the plugin
// maps (zero-copy) or copied once into the ring: the plugin's dnsname
// counts, passes and keeps exactly what the compiled-in one does, every
// packet crosses once, in as many parts as the sizes make.
func TestBatchesCrossInParts(t *testing.T) {
	const n = 1500
	sizes := []int{1, 3, 17, 64, 255, 256, 100}
	reg, h, _ := load(t, pluginDir(t, "dnsname"), plugin.Options{})
	in := registry(dns.Class)
	for _, share := range []bool{false, true} {
		src := "heap"
		if share {
			src = "shared"
		}
		reg.Register(sizedClass(t, src, n, share, sizes...))
		in.Register(sizedClass(t, src, n, share, sizes...))
	}
	expr := func(src string) string { return "(" + src + `) > (dnsname,suffix=".com") > (pktcount)` }
	want, err := runGraph(t, in, flowgraph.RequestOptions{}, expr("heap"))
	if err != nil {
		t.Fatal(err)
	}
	if d := want["dnsname#1"]; d.In != n || d.Out == 0 || d.Out == n {
		t.Fatalf("the compiled-in dnsname: in %d out %d of %d: the trace does not test a filter", d.In, d.Out, n)
	}
	for _, src := range []string{"heap", "shared"} {
		for _, part := range []int{buffers.MaxBatch, 64, 7, 1} {
			t.Run(fmt.Sprintf("%s/part%d", src, part), func(t *testing.T) {
				defer plugin.SetPartSize(part)()
				before := h.Stats("dnsname")
				got, err := runGraph(t, reg, flowgraph.RequestOptions{}, expr(src))
				if err != nil {
					t.Fatal(err)
				}
				for _, id := range []string{"dnsname#1", "pktcount#1"} {
					g, w := got[id], want[id]
					if g.In != w.In || g.Out != w.Out || g.Dropped != 0 || fmt.Sprint(g.State) != fmt.Sprint(w.State) {
						t.Errorf("%s: in %d out %d dropped %d state %v; compiled in: in %d out %d state %v", id, g.In, g.Out, g.Dropped, g.State, w.In, w.Out, w.State)
					}
				}
				s := h.Stats("dnsname")
				referred, copied, parts := s.Referred-before.Referred, s.Copied-before.Copied, s.Parts-before.Parts
				wantParts, left := 0, n
				for k := 0; left > 0; k++ {
					m := min(sizes[k%len(sizes)], left)
					wantParts += (m + part - 1) / part
					left -= m
				}
				wantRef, wantCopy := uint64(0), uint64(n)
				if src == "shared" {
					wantRef, wantCopy = n, 0
				}
				if referred != wantRef || copied != wantCopy || parts != uint64(wantParts) {
					t.Errorf("%d packets referred to, %d copied, in %d parts; want %d, %d, in %d", referred, copied, parts, wantRef, wantCopy, wantParts)
				}
			})
		}
	}
}

// TestPluginDyingMidBatchLosesNothing: a plugin that dies (kill -9, or a
// write into the packet memory it maps read-only, which faults it) or
// answers with a foreign entry in the fifth part of a batch sent in parts
// of 16, with more parts in flight behind it, passes exactly the four
// parts it answered; the rest of that batch (the part it failed in, those
// in flight, those not sent yet) and every later packet count as dropped,
// copied or zero-copy.
func TestPluginDyingMidBatchLosesNothing(t *testing.T) {
	const n, part = 1000, 16
	defer plugin.SetPartSize(part)()
	for _, mode := range []string{"kill", "write", "foreign"} {
		for _, share := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/shared=%v", mode, share), func(t *testing.T) {
				reg, _, log := load(t, pluginDir(t, "faulty"), plugin.Options{})
				reg.Register(sizedClass(t, "trace", n, share, 256))
				got, err := runGraph(t, reg, flowgraph.RequestOptions{}, `(trace) > (faulty,mode=`+mode+`,after=5) > (pktcount)`)
				if err == nil {
					t.Fatal("the run reported no failure")
				}
				if !strings.Contains(log.String(), "its functions drop their packets from now on") {
					t.Errorf("the log does not say the plugin failed: %s", log)
				}
				f, after := got["faulty#1"], got["pktcount#1"]
				if f.In != n || f.Out != 4*part || f.Filtered != 0 || f.Dropped != n-4*part {
					t.Errorf("faulty: in %d out %d filtered %d dropped %d; want in %d out %d dropped %d", f.In, f.Out, f.Filtered, f.Dropped, n, 4*part, n-4*part)
				}
				if after.In != 4*part || after.State["packets"] != uint64(4*part) {
					t.Errorf("after the plugin: in %d, %v packets counted; want %d", after.In, after.State["packets"], 4*part)
				}
			})
		}
	}
}
