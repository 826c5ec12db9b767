package monitor_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/trumpet/event"
	"github.com/ffpf-go/ffpf/functions/trumpet/monitor"
)

// idleRig is a monitor whose reports are kept as "event|epoch|srcip value".
type idleRig struct {
	t   *testing.T
	m   *monitor.Monitor
	got map[string]float64
	now int64
}

func newIdleRig(t *testing.T, cfg monitor.Config, lines ...string) *idleRig {
	r := &idleRig{t: t, got: map[string]float64{}}
	cfg.LinkType, cfg.Epoch = functions.LinkEthernet, epoch
	var err error
	r.m, err = monitor.New(cfg, func(tr *monitor.Trigger, start int64, k *monitor.Key, v float64) {
		r.got[fmt.Sprintf("%s|%d|%d.%d.%d.%d", tr.Event.Name, start/epoch, byte(k[1]>>56), byte(k[1]>>48), byte(k[1]>>40), byte(k[1]>>32))] = v
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		r.add(l)
	}
	return r
}

func (r *idleRig) add(line string) {
	ev, err := event.ParseLine(line)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.m.Add(ev); err != nil {
		r.t.Fatal(err)
	}
}

// at moves the packet clock to epoch e, ticking each epoch's end, so
// that each epoch is swept.
func (r *idleRig) at(e int64) {
	r.now = e*epoch + 1
	if r.m.Deadline() == math.MinInt64 {
		r.m.Tick(r.now) // the first tick starts the clock
	}
	for r.now >= r.m.Deadline() {
		r.m.Tick(r.m.Deadline())
	}
}

// send sends n 64-byte packets from 192.168.0.src to 10.0.0.1.
func (r *idleRig) send(src byte, n int) {
	f := udpFrame([4]byte{192, 168, 0, src}, [4]byte{10, 0, 0, 1}, 1000, 80)
	for range n {
		r.now++
		r.m.Process(f, r.now, 64)
	}
}

func (r *idleRig) want(want map[string]float64) {
	r.t.Helper()
	r.at(r.m.Epoch() + 1) // the last epoch ends
	r.m.Flush(r.now)
	if fmt.Sprint(r.got) != fmt.Sprint(want) {
		r.t.Errorf("reports\n got %v\nwant %v", r.got, want)
	}
}

// TestIdleFlowIsForgotten: a flow back after an idle epoch is a new
// flow, though the monitor keeps the dead flow's matches for its return
// (matching it again is most of a new flow's cost): the events added while
// it was dead match it, the ones removed do not; the flow table's room is
// not taken by the dead flows; and the filter table holds it back as any
// new flow.
func TestIdleFlowIsForgotten(t *testing.T) {
	t.Run("events", func(t *testing.T) {
		r := newIdleRig(t, monitor.Config{Flows: 16, Buckets: 16}, "a: dstip=10.0.0.0/8; count() > 0; 5-tuple; 10ms")
		r.at(0)
		r.send(1, 2)
		r.at(2) // the sweep of epoch 1 finds the flow dead
		r.m.Flush(r.now)
		if n := r.m.Flows(); n != 0 {
			t.Errorf("%d flows after an idle epoch", n)
		}
		r.add("b: dstip=10.0.0.1/32; count() > 0; 5-tuple; 10ms")
		if err := r.m.Remove("a"); err != nil {
			t.Fatal(err)
		}
		r.at(3)
		r.send(1, 3)
		if n := r.m.Flows(); n != 1 {
			t.Errorf("%d flows after its return", n)
		}
		r.want(map[string]float64{"a|0|192.168.0.1": 2, "b|3|192.168.0.1": 3})
		if n := r.m.Stats.NewFlows; n != 2 {
			t.Errorf("%d new flows, want 2", n)
		}
	})
	t.Run("room", func(t *testing.T) {
		r := newIdleRig(t, monitor.Config{Flows: 4, Buckets: 16}, "a: dstip=10.0.0.0/8; count() > 0; 5-tuple; 10ms")
		r.at(0)
		for s := range byte(4) {
			r.send(1+s, 1)
		}
		r.at(2) // the four are dead, kept for their matches: the table is full of them
		r.m.Flush(r.now)
		for s := range byte(4) {
			r.send(5+s, 2)
		}
		r.send(1, 1) // back, but its entry went to a new flow: new again
		want := map[string]float64{}
		for s := range 4 {
			want[fmt.Sprintf("a|0|192.168.0.%d", 1+s)] = 1
			want[fmt.Sprintf("a|2|192.168.0.%d", 5+s)] = 2
		}
		r.want(want)
		if st := r.m.Stats; st.Overflow != 1 || st.NewFlows != 8 {
			t.Errorf("overflow %d, new flows %d; want 1 (the last packet), 8", st.Overflow, st.NewFlows)
		}
	})
	t.Run("dos", func(t *testing.T) {
		// 64-byte packets, 200 bytes to enter: the 4th packet of a new
		// flow is its first in the table.
		r := newIdleRig(t, monitor.Config{Flows: 16, Buckets: 16, DoS: 200}, "a: dstip=10.0.0.0/8; count() > 0; 5-tuple; 10ms")
		r.at(0)
		r.send(1, 5)
		r.at(2)
		r.send(1, 5) // back after an idle epoch
		r.send(2, 5) // new
		r.want(map[string]float64{"a|0|192.168.0.1": 2, "a|2|192.168.0.1": 2, "a|2|192.168.0.2": 2})
		if n := r.m.Stats.DoSFiltered; n != 9 {
			t.Errorf("%d packets filtered, want 9", n)
		}
	})
}
