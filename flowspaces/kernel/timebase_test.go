package kernel

import (
	"encoding/binary"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	cring "github.com/cilium/ebpf/ringbuf"

	"github.com/ffpf-go/ffpf/bridges/ringbuf"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/ebpfgen"
	"github.com/ffpf-go/ffpf/functions/gen"
)

// TestOneTimeBase: a program with timestamp and a windowed counter after
// it reads the packet's time once; the timestamp word, the record's time
// (with the flowspace's offset) and the window the counter counted the
// packet in all come from those nanoseconds.
func TestOneTimeBase(t *testing.T) {
	needRoot(t)
	node := func(class, args string, ann int) (*flowspaces.Node, ebpfgen.Function, functions.Function) {
		c, ok := functions.Default.Lookup(class)
		if !ok {
			t.Fatalf("no class %s", class)
		}
		ctx := &functions.Context{ID: class, Params: bindArgs(t, c, args), LinkType: functions.LinkEthernet, Snaplen: 262144, Ann: ann}
		fn, err := c.EBPF(functions.TargetXDP, ctx)
		if err != nil {
			t.Fatal(err)
		}
		gofn, err := c.New(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return &flowspaces.Node{ID: class, Class: c, Ctx: *ctx}, fn, gofn
	}
	tsNode, tsFn, _ := node("timestamp", "", 0)
	ctrNode, ctrFn, ctrGo := node("counter", "window=1s", 0)
	win, err := windowOf(ctrNode, ctrFn)
	if err != nil || win == nil {
		t.Fatalf("window of counter window=1s: %v, %v", win, err)
	}
	defer win.close()
	mbuf := ctrGo.(functions.Stateful).MBuf()
	maps, err := newStateMaps(ctrNode.Class, mbuf.Fields(), ctrFn, win.halves())
	if err != nil {
		t.Fatal(err)
	}
	defer closeMaps(maps)
	counters, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer counters.Close()
	ring, err := ringbuf.NewMap()
	if err != nil {
		t.Fatal(err)
	}
	defer ring.Close()
	clock, off, err := newClockMap()
	if err != nil {
		t.Fatal(err)
	}
	defer clock.Close()
	sent, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer sent.Close()
	const ctrSlot = 4
	p := &progSpec{kind: flowspaces.KindXDP, iface: "t", counters: counters, ring: ring, snap: 2048, progName: "ffpf_test",
		clock: clock, sent: sent, offset: off, ann: []int{0}, timed: tsFn.(ebpfgen.Timed).Timed(), exports: []int{2},
		nodes: []progNode{
			{iface: "t", in: true, slot: 0},
			{node: tsNode, fn: tsFn, inputs: []int{0}, slot: 2},
			{node: ctrNode, fn: ctrFn, inputs: []int{1}, slot: ctrSlot, maps: maps, win: win},
		}}
	insns, err := p.build()
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	for _, ins := range insns {
		if ins.IsBuiltinCall() && (ins.Constant == int64(asm.FnKtimeGetNs) || ins.Constant == int64(asm.FnKtimeGetCoarseNs)) {
			reads++
		}
	}
	if reads != 1 {
		t.Errorf("the program reads the time %d times, want once", reads)
	}
	prog, err := p.load("test")
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	rd, err := cring.NewReader(ring)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	hs := &halfState{counters: counters, slot: ctrSlot, slots: ctrFn.StateSlots(), maps: maps, mbuf: mbuf, win: win, gofn: ctrGo}
	if err := hs.start(monotonic() + off); err != nil {
		t.Fatal(err)
	}
	g := gen.New(gen.Config{Seed: 5, Packets: 1, IPv6: -1, VLAN: -1})
	buf := make([]byte, gen.MaxFrameLen)
	n, _, _, _ := g.Next(buf)
	const packets = 5
	for range packets {
		if _, err := prog.Run(&ebpf.RunOptions{Data: buf[:n]}); err != nil {
			t.Fatal(err)
		}
	}
	var inHalf [2]int
	for range packets {
		rec, err := rd.Read()
		if err != nil {
			t.Fatal(err)
		}
		ts := int64(binary.NativeEndian.Uint64(rec.RawSample[ringbuf.OffTime:])) + off
		word := int64(binary.NativeEndian.Uint64(rec.RawSample[ringbuf.OffAnn:]))
		if word != ts {
			t.Errorf("timestamp %d, record time %d: want them equal", word, ts)
		}
		inHalf[win.epochOf(ts)&1]++
	}
	sum := func(slot int) uint64 {
		v, err := sumSlot(counters, slot)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if late := sum(ctrSlot + win.lateSlot()); late != 0 {
		t.Errorf("%d packets late, want none", late)
	}
	for h := range 2 {
		var state uint64
		for i := range win.slots {
			state += sum(ctrSlot + 2 + h*win.slots + i)
		}
		if (state != 0) != (inHalf[h] != 0) {
			t.Errorf("half %d holds %d in its state; the records' times put %d packets in it", h, state, inHalf[h])
		}
	}
}
