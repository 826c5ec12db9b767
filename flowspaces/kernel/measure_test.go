package kernel

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/ffpf-go/ffpf/bridges/ringbuf"
	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
	_ "github.com/ffpf-go/ffpf/functions/counters"
	"github.com/ffpf-go/ffpf/functions/gen"
	_ "github.com/ffpf-go/ffpf/functions/sample"
	_ "github.com/ffpf-go/ffpf/functions/sketch"
)

// bindArgs binds "k=v" arguments: digits (with a unit) are numbers,
// key= a string, anything else a word.
func bindArgs(t *testing.T, c *functions.Class, args string) functions.Params {
	t.Helper()
	var as []functions.Arg
	for _, kv := range strings.Split(args, " ") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		raw := functions.Raw{Kind: functions.RawWord, Text: v}
		switch digits := strings.TrimRight(v, "abcdefghijklmnopqrstuvwxyzKMG"); {
		case k == "key":
			raw.Kind = functions.RawString
		case strings.Trim(v, "0123456789") == "":
			raw.Kind = functions.RawNumber
		case digits != "" && strings.Trim(digits, "0123456789.") == "" && k != "pass" && k != "value":
			raw.Kind, raw.Text, raw.Unit = functions.RawNumber, digits, v[len(digits):] // 100ms, 0.5
		}
		as = append(as, functions.Arg{Key: k, Value: raw})
	}
	p, err := c.Bind(as)
	if err != nil {
		t.Fatalf("%s %s: %v", c.Name, args, err)
	}
	return p
}

// measureFrames are generated frames (VLAN, IPv6, a tenth malformed) of
// many flows.
func measureFrames(n int) [][]byte {
	g := gen.New(gen.Config{Seed: 77, Packets: int64(n), Flows: 3000, VLAN: 0.2, IPv6: 0.3, Malformed: 0.1})
	buf := make([]byte, gen.MaxFrameLen)
	var frames [][]byte
	for {
		c, _, _, ok := g.Next(buf)
		if !ok {
			break
		}
		if c >= 14 { // XDP test runs need an Ethernet header
			frames = append(frames, append([]byte(nil), buf[:c]...))
		}
	}
	return frames
}

// runGo runs the Go function of class c on frames and returns its MBuf and
// which frames it passed.
func runGo(t *testing.T, c *functions.Class, ctx *functions.Context, frames [][]byte) (*buffers.MBuf, []bool) {
	t.Helper()
	fn, err := c.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckState(functions.TargetUser, ctx.Params, fn); err != nil {
		t.Fatal(err)
	}
	passed := make([]bool, len(frames))
	p := buffers.NewPBuf(buffers.MaxBatch, gen.MaxFrameLen)
	b := buffers.NewBatch(p, 0, buffers.MaxBatch, 0)
	for lo := 0; lo < len(frames); lo += buffers.MaxBatch {
		b.Reset()
		hi := min(lo+buffers.MaxBatch, len(frames))
		for _, f := range frames[lo:hi] {
			b.Append(f, uint32(len(f)), 0)
		}
		fn.Process(b)
		for _, e := range b.E[:b.N] {
			passed[lo+int(e.Slot-b.Base)] = true
		}
	}
	return fn.(functions.Stateful).MBuf(), passed
}

// runEBPF runs the class's eBPF code on frames through BPF_PROG_TEST_RUN
// (an XDP program) and returns the MBuf the flowspace's sync would fill,
// and which frames it passed.
func runEBPF(t *testing.T, c *functions.Class, ctx *functions.Context, frames [][]byte) (*buffers.MBuf, []bool) {
	t.Helper()
	if err := c.CanRun(functions.TargetXDP, ctx.Params); err != nil {
		t.Fatal(err)
	}
	fn, err := c.EBPF(functions.TargetXDP, ctx)
	if err != nil {
		t.Fatal(err)
	}
	mbuf, err := c.State.NewMBuf(functions.TargetXDP, ctx.Params)
	if err != nil {
		t.Fatal(err)
	}
	maps, err := newStateMaps(c, mbuf.Fields(), fn, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer closeMaps(maps)
	slots := 4 + fn.StateSlots()
	counters, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: uint32(slots)})
	if err != nil {
		t.Fatal(err)
	}
	defer counters.Close()
	p := &progSpec{kind: flowspaces.KindXDP, iface: "t", counters: counters, snap: ringbuf.Snap, progName: "ffpf_test",
		nodes: []progNode{{iface: "t", in: true, slot: 0}, {node: &flowspaces.Node{ID: c.Name}, fn: fn, inputs: []int{0}, slot: 2, maps: maps}}}
	prog, err := p.load("test")
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	sum := func(slot int) uint64 {
		var per []uint64
		if err := counters.Lookup(uint32(slot), &per); err != nil {
			t.Fatal(err)
		}
		var s uint64
		for _, v := range per {
			s += v
		}
		return s
	}
	passed := make([]bool, len(frames))
	out := sum(3)
	for i, f := range frames {
		if _, err := prog.Run(&ebpf.RunOptions{Data: f}); err != nil {
			t.Fatal(err)
		}
		now := sum(3)
		passed[i], out = now > out, now
	}
	// What sync does: slots into the first fields, maps into theirs.
	for i := range fn.StateSlots() {
		mbuf.Store64(mbuf.Fields()[i].Offset, sum(4+i))
	}
	for _, s := range maps {
		if err := s.read(mbuf); err != nil {
			t.Fatal(err)
		}
	}
	return mbuf, passed
}

// TestMeasurementsEqualGo: on the same frames, the eBPF code of counter
// (a total, and a table of keys: full ones too), sample (every=), cms, hll,
// pcsa and bloom (BPF_PROG_TEST_RUN) leaves byte for byte the state the Go
// function keeps, and passes the same packets.
func TestMeasurementsEqualGo(t *testing.T) {
	needRoot(t)
	frames := measureFrames(20000)
	for _, tc := range []struct{ class, args string }{
		{"counter", ""},
		{"counter", "value=bytes"},
		{"counter", "key=5tuple"},
		{"counter", "key=srcip/24,vlan value=bytes size=5000"},
		{"counter", "key=5tuple,srcmac,dstmac size=100"},
		{"counter", "key=dstport size=1"},
		{"sample", "every=1"},
		{"sample", "every=7"},
		{"sample", "every=5000"},
		{"cms", ""},
		{"cms", "key=srcip/24 value=bytes width=1000 depth=4"},
		{"cms", "key=5tuple,vlan depth=1 width=7"},
		{"hll", ""},
		{"hll", "key=dstip precision=4"},
		{"hll", "key=srcmac,vlan precision=16"},
		{"pcsa", ""},
		{"pcsa", "key=dstip,dstport bitmaps=3"},
		{"bloom", ""},
		{"bloom", "key=srcip,dstport bits=1000 hashes=3 pass=member"},
		{"bloom", "key=dstip/16 bits=64 hashes=7 pass=all"},
		{"bloom", "key=proto bits=100000 hashes=1 pass=new"},
	} {
		t.Run(fmt.Sprintf("%s %s", tc.class, tc.args), func(t *testing.T) {
			c, ok := functions.Default.Lookup(tc.class)
			if !ok {
				t.Fatalf("no class %s", tc.class)
			}
			params := bindArgs(t, c, tc.args)
			ctx := &functions.Context{ID: tc.class, Params: params, LinkType: functions.LinkEthernet, Snaplen: 262144}
			goState, goPassed := runGo(t, c, ctx, frames)
			bpfState, bpfPassed := runEBPF(t, c, ctx, frames)
			if !bytes.Equal(goState.Bytes(), bpfState.Bytes()) {
				for _, f := range goState.Fields() {
					g, b := goState.Snapshot()[f.Name], bpfState.Snapshot()[f.Name]
					if fmt.Sprint(g) != fmt.Sprint(b) {
						gs, bs := fmt.Sprint(g), fmt.Sprint(b)
						t.Errorf("field %s differs:\n Go   %.300s\n eBPF %.300s", f.Name, gs, bs)
					}
				}
			}
			differ := 0
			for i := range frames {
				if goPassed[i] != bpfPassed[i] && differ < 3 {
					differ++
					t.Errorf("frame %d: Go passes %v, eBPF %v", i, goPassed[i], bpfPassed[i])
				}
			}
			if bytes.Equal(goState.Bytes(), make([]byte, len(goState.Bytes()))) {
				t.Error("the state stayed zero: the test compares nothing")
			}
		})
	}
}
