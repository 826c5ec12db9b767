package inproc

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ffpf-go/ffpf/buffers"
)

// producer fills regions of its own PBuf with numbered packets and sends
// the even ones (tag "even") and those divisible by 3 (tag "three") up,
// by reference or copied, as a source worker does.
func produce(t *testing.T, ctx context.Context, b *Bridge, pool *Pool, batches int) {
	copyUp := pool != nil
	const k = 3
	p := buffers.NewPBuf(k*buffers.MaxBatch, 64)
	regions := make([]*Region, k)
	for i := range regions {
		regions[i] = NewRegion(p, uint32(i*buffers.MaxBatch), true)
	}
	seq := uint32(0)
	for n := range batches {
		r := regions[n%k]
		if err := r.Wait(ctx); err != nil {
			t.Error(err)
			return
		}
		src := buffers.NewBatch(p, r.Base, buffers.MaxBatch, 0)
		for range buffers.MaxBatch {
			pkt := []byte{byte(seq), byte(seq >> 8), byte(seq >> 16), byte(seq >> 24)}
			src.Append(pkt, 60, int64(seq))
			seq++
		}
		m, err := b.Message(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		m.Stream, m.Region = "s", r
		seen := map[uint32]bool{}
		for _, tag := range []string{"even", "three"} {
			m.Out = append(m.Out, Out{Tag: tag})
			o := &m.Out[len(m.Out)-1].Batch
			o.PBuf, o.Base = p, r.Base
			for _, e := range src.Entries() {
				v := p.Meta(e.Slot).Timestamp
				if (tag == "even" && v%2 == 0) || (tag == "three" && v%3 == 0) {
					o.E[o.N] = e
					o.N++
					seen[e.Slot] = true
				}
			}
		}
		m.Packets = len(seen)
		if copyUp {
			if err := b.CopyUp(ctx, m, pool); err != nil {
				t.Error(err)
				return
			}
		} else {
			r.Hold()
		}
		if err := b.Send(ctx, m); err != nil {
			t.Error(err)
			return
		}
	}
	b.Close()
}

func TestBridgeDeliversEveryPacketOnce(t *testing.T) {
	for _, copyUp := range []bool{false, true} {
		b := New("test")
		var pool *Pool
		if copyUp {
			pool = NewPool(64)
		}
		const batches = 200
		go produce(t, context.Background(), b, pool, batches)
		next := map[string]int64{"even": 0, "three": 0}
		for m := b.Receive(context.Background()); m != nil; m = b.Receive(context.Background()) {
			for _, o := range m.Out {
				step := map[string]int64{"even": 2, "three": 3}[o.Tag.(string)]
				for _, e := range o.Batch.Entries() {
					d := o.Batch.PBuf.Data(e.Slot)
					v := int64(d[0]) | int64(d[1])<<8 | int64(d[2])<<16 | int64(d[3])<<24
					ts := o.Batch.PBuf.Meta(e.Slot).Timestamp
					if v != next[o.Tag.(string)] || ts != v {
						t.Fatalf("copy=%v %s: got packet %d (timestamp %d), want %d", copyUp, o.Tag, v, ts, next[o.Tag.(string)])
					}
					next[o.Tag.(string)] += step
				}
			}
			b.Done(m)
		}
		total := int64(batches * buffers.MaxBatch)
		if next["even"] != total || next["three"] < total || next["three"] > total+2 {
			t.Errorf("copy=%v: received up to %v of %d", copyUp, next, total)
		}
		s := b.Stats()
		want := uint64(0)
		for v := range total {
			if v%2 == 0 || v%3 == 0 {
				want++
			}
		}
		if s.In != want || s.Out != want || s.Dropped != 0 {
			t.Errorf("copy=%v: stats %+v, want %d in and out", copyUp, s, want)
		}
		if copyUp && (s.Copied != want || s.Referred != 0) || !copyUp && (s.Copied != 0 || s.Referred != want) {
			t.Errorf("copy=%v: copied %d, referred to in place %d", copyUp, s.Copied, s.Referred)
		}
	}
}

func TestBridgeStopCountsWhatIsInFlight(t *testing.T) {
	b := New("test")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p := buffers.NewPBuf(buffers.MaxBatch, 64)
		r := NewRegion(p, 0, true)
		for {
			m, err := b.Message(ctx)
			if err != nil {
				return
			}
			m.Region, m.Packets = r, 10
			r.Hold()
			if b.Send(ctx, m) != nil {
				return
			}
		}
	}()
	// Nobody receives: the producer fills the queue and blocks.
	for deadline := time.Now().Add(30 * time.Second); b.Stats().In == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the producer sent nothing")
		}
	}
	cancel()
	<-done
	b.Drain()
	s := b.Stats()
	if s.In == 0 || s.In != s.Out+s.Dropped || s.Out != 0 {
		t.Errorf("stats after stop: %+v", s)
	}
}

func TestRegionWaitsForEveryReference(t *testing.T) {
	r := NewRegion(buffers.NewPBuf(buffers.MaxBatch, 64), 0, true)
	r.Hold()
	r.Hold()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := r.Wait(ctx); err == nil {
		t.Fatal("Wait returned while referred to")
	}
	r.Release()
	go func() { time.Sleep(time.Millisecond); r.Release() }()
	if err := r.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestClockOnlyMessages: a stream whose clock moves while no packet came
// sends a clock-only message (no region, no packet), once per move; a
// partial batch carries the clock itself. Clock messages count in Clocks,
// not in the packet counters.
func TestClockOnlyMessages(t *testing.T) {
	ctx := context.Background()
	b := New("test")
	s := &Stream{Up: b, Source: "src", Mask: 1, Tags: []any{"f"}, Snap: 64, Pool: NewPool(64)}
	s.Peers = []*Stream{s}
	s.Clock(ctx, 100)
	s.Clock(ctx, 100) // not moved: nothing
	m := b.Receive(ctx)
	if m.Region != nil || m.Packets != 0 || m.Now != 100 || m.Stream != "src" {
		t.Fatalf("clock-only message: region %v, %d packets, now %d, stream %v", m.Region, m.Packets, m.Now, m.Stream)
	}
	b.Done(m)
	s.Add(ctx, 1, []byte{1, 2, 3}, 3, 150, 0, nil)
	s.Clock(ctx, 200) // the partial batch will carry it
	s.Flush(ctx)
	m = b.Receive(ctx)
	if m.Region == nil || m.Packets != 1 || m.Now != 200 {
		t.Fatalf("data message: %d packets, now %d; want 1 and 200", m.Packets, m.Now)
	}
	b.Done(m)
	s.Clock(ctx, 200) // carried already
	select {
	case m := <-b.ch[0]:
		t.Fatalf("a message with now %d for a clock that did not move", m.Now)
	default:
	}
	if st := b.Stats(); st.In != 1 || st.Out != 1 || st.Dropped != 0 || st.Messages != 1 || st.Clocks != 1 {
		t.Errorf("stats %+v, want 1 packet in and out, 1 message, 1 clock message", st)
	}
}

// TestLanes: a bridge of several lanes carries each lane's messages, in
// the order they were sent, to that lane's receiver alone; closing the
// bridge ends every lane; the counters count each lane's packets.
func TestLanes(t *testing.T) {
	ctx := context.Background()
	b := NewLanes("test", 3)
	if b.Lanes() != 3 {
		t.Fatalf("%d lanes", b.Lanes())
	}
	got := make([][]int64, 3)
	var wg sync.WaitGroup
	for lane := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := b.ReceiveLane(ctx, lane); m != nil; m = b.ReceiveLane(ctx, lane) {
				if m.Lane%3 != lane {
					t.Errorf("lane %d received a message of lane %d", lane, m.Lane)
				}
				got[lane] = append(got[lane], m.Now)
				b.Done(m)
			}
		}()
	}
	for i := range 30 {
		m, err := b.Message(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m.Lane, m.Now, m.Packets = i%4, int64(i), 1 // lane 3 is lane 0
		b.Send(ctx, m)
	}
	b.Close()
	wg.Wait()
	for lane, nows := range got {
		var want []int64
		for i := range 30 {
			if i%4%3 == lane {
				want = append(want, int64(i))
			}
		}
		if !slices.Equal(nows, want) {
			t.Errorf("lane %d received %v, want %v", lane, nows, want)
		}
	}
	if s := b.Stats(); s.In != 30 || s.Out != 30 || !slices.Equal(s.Lanes, []uint64{uint64(len(got[0])), uint64(len(got[1])), uint64(len(got[2]))}) {
		t.Errorf("stats %+v", s)
	}
}
