package trumpet

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
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
