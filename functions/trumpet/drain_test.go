package trumpet

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/record"
	"github.com/ffpf-go/ffpf/functions/trumpet/event"
)

// drainInput is what the flowspace hands the Go half for an epoch e with
// n flows on cpus CPUs, each flow's packets on CPU i%cpus.
func drainInput(e int64, n, cpus int) (keys, values []byte) {
	keys = make([]byte, n*8*keyWords)
	vals := make([]uint64, n*cpus*valueWords)
	for i := range n {
		k := keys[i*8*keyWords:]
		buffers.Native.PutUint64(k, 4|17<<8|uint64(i&0xffff)<<16|53<<32|1<<61)
		buffers.Native.PutUint64(k[8:], uint64(0x0a000000|i>>16)<<32)
		buffers.Native.PutUint64(k[24:], uint64(0x0a010000|i&0xffff)<<32)
		v := vals[(i*cpus+i%cpus)*valueWords:]
		v[wEpoch], v[wFirst], v[wPackets] = uint64(e), uint64(e*10_000_000+int64(n-i)), 3
		v[wVolSum], v[wVolSq], v[wVolMin], v[wVolMax] = 300, 30000, 100, 100
		v[wTTLSum], v[wTTLSq], v[wTTLMin], v[wTTLMax], v[wBytes] = 192, 12288, 64, 64, 426
	}
	return keys, unsafe.Slice((*byte)(unsafe.Pointer(&vals[0])), 8*len(vals))
}

// BenchmarkDrainGo is the Go half's part of an epoch's end with 16,384
// flows on 2 CPUs: the summaries decoded and ordered, fed to the monitor,
// and the epoch swept.
func BenchmarkDrainGo(b *testing.B) {
	const n, cpus = 16384, 2
	ev, _ := event.ParseLine("heavy: dstip=10.0.0.0/8; sum(volume) > 125KB; 5-tuple; 10ms")
	ctx := &functions.Context{ID: "t", LinkType: functions.LinkEthernet, Target: functions.TargetXDP}
	p, err := class.Bind([]functions.Arg{{Key: "event", Value: functions.Raw{Kind: functions.RawString, Text: ev.String()}}})
	if err != nil {
		b.Fatal(err)
	}
	ctx.Params = p
	tr, err := New(ctx)
	if err != nil {
		b.Fatal(err)
	}
	const e0 = int64(170_000_000_000)
	tr.Tick(e0 * 10_000_000)
	inputs := [2][2][]byte{}
	for h := range 2 {
		inputs[h][0], inputs[h][1] = drainInput(e0+int64(h), n, cpus)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		e := e0 + int64(i)
		in := inputs[i&1]
		// the epoch stamps of the other parity's input
		for j := range n {
			for c := range cpus {
				buffers.Native.PutUint64(in[1][((j*cpus+c)*valueWords+wEpoch)*8:], uint64(e))
			}
		}
		tr.Drain(e, in[0], in[1], n, cpus)
	}
	if tr.m.Flows() != n {
		b.Fatalf("%d flows in the monitor", tr.m.Flows())
	}
}

// TestAddInEBPF: a trumpet whose phase 1 runs in eBPF takes, through its
// add handler, only the events its flow summaries serve.
func TestAddInEBPF(t *testing.T) {
	p, err := class.Bind([]functions.Arg{{Key: "event", Value: functions.Raw{Kind: functions.RawString, Text: "a: *; count() > 1; 5-tuple; 10ms"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []functions.Target{functions.TargetXDP, functions.TargetKernel, functions.TargetUser} {
		tr, err := New(&functions.Context{ID: "t", LinkType: functions.LinkEthernet, Target: target, Params: p})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.addHandler("b: *; max(ttl) > 1 and sum(ecn) > 0; dstip/24; 20ms"); err != nil {
			t.Errorf("%v: %v", target, err)
		}
		_, err = tr.addHandler("c: proto=tcp; sum(is_lost) > 0; 5-tuple; 10ms")
		if ebpf := target != functions.TargetUser; ebpf != (err != nil) || ebpf && !strings.Contains(err.Error(), "event c reads is_lost") {
			t.Errorf("%v: adding an event on is_lost: %v", target, err)
		}
		if want := 2 + btoi(target == functions.TargetUser); len(tr.List()) != want {
			t.Errorf("%v: events %v", target, tr.List())
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestAddInEBPFAfterIdle: in eBPF the Go half learns that time passes
// from its drains, one per epoch, flows or none: an event added after a
// long idle stretch starts with the interval after the present one, as in
// userspace (where an idle live source moves the packet clock), and not
// with the one after the last epoch that had flows, which would report the
// present epoch's packets from before the event was added.
func TestAddInEBPFAfterIdle(t *testing.T) {
	p, err := class.Bind([]functions.Arg{{Key: "event", Value: functions.Raw{Kind: functions.RawString, Text: "a: *; count() > 0; 5-tuple; 10ms"}}})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(&functions.Context{ID: "t", LinkType: functions.LinkEthernet, Target: functions.TargetXDP, Params: p})
	if err != nil {
		t.Fatal(err)
	}
	var recs []string
	tr.SetEmit(func(b *buffers.Batch) {
		for _, e := range b.E[:b.N] {
			j, err := record.AppendJSON(nil, b.PBuf.Data(e.Slot))
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, string(j))
		}
	})
	const ep, e0 = int64(10_000_000), int64(170_000_000_000)
	tr.Tick(e0 * ep) // the flowspace starts the Go half's clock
	flows := func(e int64, n int) {
		if n == 0 {
			tr.Drain(e, nil, nil, 0, 2)
			return
		}
		k, v := drainInput(e, n, 2)
		tr.Drain(e, k, v, n, 2)
	}
	flows(e0, 1)
	for e := e0 + 1; e < e0+50; e++ {
		flows(e, 0) // idle: the flow map of each epoch is drained empty
	}
	// Epoch e0+49 has been drained: the present is in epoch e0+50.
	if _, err := tr.addHandler("b: *; count() > 0; 5-tuple; 10ms"); err != nil {
		t.Fatal(err)
	}
	flows(e0+50, 1)
	flows(e0+51, 1)
	reports := map[string][]int64{}
	for _, r := range recs {
		var v struct {
			Event string
			TS    int64
		}
		if err := json.Unmarshal([]byte(r), &v); err != nil {
			t.Fatal(err)
		}
		reports[v.Event] = append(reports[v.Event], v.TS/ep-e0)
	}
	if !slices.Equal(reports["a"], []int64{0, 50, 51}) || !slices.Equal(reports["b"], []int64{51}) {
		t.Errorf("reports by epoch (from e0): %v; want a at 0, 50, 51 and b, added in epoch 50, at 51 only", reports)
	}
}

// TestAddInEBPFInGrace: an epoch is drained only after its end and a
// grace, so in the first moments of an epoch the monitor is still in the
// one before. An event added then, the flowspace having told the Go half
// the present (Present, before a handler runs), starts with the interval
// after the present one, as in userspace: the present epoch, whose packets
// before the add are already in the flow map, is not reported for it.
func TestAddInEBPFInGrace(t *testing.T) {
	for _, iv := range []int64{1, 3} {
		p, err := class.Bind([]functions.Arg{{Key: "event", Value: functions.Raw{Kind: functions.RawString, Text: "a: *; count() > 0; 5-tuple; 10ms"}}})
		if err != nil {
			t.Fatal(err)
		}
		tr, err := New(&functions.Context{ID: "t", LinkType: functions.LinkEthernet, Target: functions.TargetXDP, Params: p})
		if err != nil {
			t.Fatal(err)
		}
		var recs []string
		tr.SetEmit(func(b *buffers.Batch) {
			for _, e := range b.E[:b.N] {
				j, _ := record.AppendJSON(nil, b.PBuf.Data(e.Slot))
				recs = append(recs, string(j))
			}
		})
		const ep, e0 = int64(10_000_000), int64(170_000_000_002) // e0+2 starts an interval of 3 epochs
		tr.Tick(e0 * ep)
		flows := func(e int64) {
			k, v := drainInput(e, 1, 2)
			tr.Drain(e, k, v, 1, 2)
		}
		flows(e0)
		// The present is 1 ms into epoch e0+2; e0+1 is not drained yet.
		tr.Present((e0+2)*ep + 1_000_000)
		if _, err := tr.addHandler(fmt.Sprintf("b: *; count() > 0; 5-tuple; %dms", 10*iv)); err != nil {
			t.Fatal(err)
		}
		for e := e0 + 1; e < e0+2+2*iv; e++ {
			flows(e)
		}
		var got []int64
		for _, r := range recs {
			var v struct {
				Event string
				TS    int64
			}
			if err := json.Unmarshal([]byte(r), &v); err != nil {
				t.Fatal(err)
			}
			if v.Event == "b" {
				got = append(got, v.TS/ep-e0)
			}
		}
		// The first whole interval after epoch e0+2: e0+3, or e0+5 for 3
		// epochs (intervals aligned to multiples of themselves).
		want := []int64{3}
		if iv == 3 {
			want = []int64{5}
		}
		if !slices.Equal(got, want) {
			t.Errorf("interval of %d epochs: b reported for the intervals starting at epochs %v (from e0), want %v", iv, got, want)
		}
	}
}
