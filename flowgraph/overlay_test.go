package flowgraph

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

// gatedSource emits packets like testSource, but only as many as the test
// allows, so that requests can be added and removed at known points.
type gatedSource struct {
	testSource
	allow *atomic.Int64
}

func (s *gatedSource) Fill(b *buffers.Batch) error {
	for b.Room() > 0 && s.i < s.n && s.allow.Load() > 0 {
		slot := b.NextSlot()
		slot[0], slot[1] = byte(s.i), byte(s.i%3)
		b.Commit(60, 60, s.i)
		s.i++
		s.allow.Add(-1)
	}
	if s.i >= s.n {
		return io.EOF
	}
	if b.N == 0 {
		time.Sleep(200 * time.Microsecond) // a quiet live source
	}
	return nil
}

func gatedRegistry(t *testing.T, allow *atomic.Int64) *functions.Registry {
	reg := placeRegistry(t)
	if err := reg.Register(&functions.Class{Name: "gated", Params: []functions.Param{{Name: "n", Type: functions.Int, Default: "30000"}},
		NewSource: func(ctx *functions.Context) (functions.Source, error) {
			nOpened.Add(1)
			return &gatedSource{testSource{n: ctx.Params.Int("n"), lt: functions.LinkEthernet}, allow}, nil
		}}); err != nil {
		t.Fatal(err)
	}
	return reg
}

// waitFor waits until the sources have emitted n packets in total (not
// until they went their way through the graph: waitUntil that).
func waitFor(t *testing.T, rt *Runtime, n uint64) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("the sources emitted %d packets", n), func() bool { return rt.Packets() >= n })
}

// waitUntil waits until cond holds: the tests wait for what they need to
// have happened, not for a time; the deadline only ends a test that hangs.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(100 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting (30 s) until %s", what)
		}
	}
}

// running waits until packets flow in rt.
func running(t *testing.T, rt *Runtime) { t.Helper(); waitFor(t, rt, 1) }

// state returns the state of function id now.
func state(rt *Runtime, id string) FunctionState {
	for _, f := range rt.Functions() {
		if f.ID == id {
			return f
		}
	}
	return FunctionState{}
}

// TestOverlayWhileRunning: a request added to a running flowgraph shares
// its prefix without disturbing the shared functions' counts; removing the
// first request leaves the second's results intact and releases only what
// the first used alone.
func TestOverlayWhileRunning(t *testing.T) {
	var allow atomic.Int64
	for _, hier := range []string{"userspace", "hierarchy"} {
		t.Run(hier, func(t *testing.T) {
			reg := gatedRegistry(t, &allow)
			cfg := Config{Registry: reg}
			src := "(gated)"
			if hier == "hierarchy" {
				// The packets enter at the micro-engines: even runs there,
				// mod3 on the board above, the counts in the kernel, and
				// the routes change across two bridges while they run.
				cfg.Hierarchy = treeWith(t, reg, fig4, "gated", 30000)
				src = "(cap,if=eth2)"
			}
			rt := New(cfg)
			r1, err := rt.Populate(src+` > (even) > (count,tag=one)`, RequestOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := rt.Instantiate(); err != nil {
				t.Fatal(err)
			}
			if err := rt.Activate(context.Background()); err != nil {
				t.Fatal(err)
			}
			// A reader polls the state while requests come and go (the race
			// detector watches).
			stop := make(chan struct{})
			polled := make(chan struct{})
			go func() {
				defer close(polled)
				for {
					select {
					case <-stop:
						return
					default:
					}
					rt.Functions()
					rt.Progress()
					rt.Plan()
					rt.Bridges()
					time.Sleep(100 * time.Microsecond)
				}
			}()
			defer func() { close(stop); <-polled }()
			allow.Store(10000)
			waitFor(t, rt, 10000)
			// The second request must see packets from 10000 on only:
			// wait until the first 10000 went their way (5000 even ones
			// counted by the first request) before adding it.
			waitUntil(t, "the first request counted 5000", func() bool { return state(rt, "count#1").In == 5000 })

			r2, err := rt.Populate(src+` > (even) > [(count,tag=two) | (mod3) > (count,tag=three)]`, RequestOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := rt.Instantiate(); err != nil {
				t.Fatal(err)
			}
			allow.Store(10000)
			waitFor(t, rt, 20000)

			closed := nClosed.Load()
			if err := rt.Remove(r1); err != nil {
				t.Fatal(err)
			}
			if got := nClosed.Load() - closed; got != 1 {
				t.Errorf("removing the first request closed %d functions, want 1 (its own count)", got)
			}
			allow.Store(10000)
			if err := rt.Wait(); err != nil {
				t.Fatal(err)
			}
			rt.Close()

			st := map[string]FunctionState{}
			for _, f := range rt.Functions() {
				st[f.ID] = f
				if f.In != f.Out+f.Filtered+f.Dropped {
					t.Errorf("%s: in %d != out %d + filtered %d + dropped %d", f.ID, f.In, f.Out, f.Filtered, f.Dropped)
				}
			}
			if _, ok := st["count#1"]; ok {
				t.Error("the removed request's count is still in the flowgraph")
			}
			// The shared prefix ran every packet once, without a gap.
			srcID := r2.Functions()[0].ID
			if st[srcID].Out != 30000 || st["even#1"].In != 30000 || st["even#1"].Out != 15000 {
				t.Errorf("shared prefix: source out %d, even in %d out %d; want 30000, 30000, 15000",
					st[srcID].Out, st["even#1"].In, st["even#1"].Out)
			}
			if hier == "hierarchy" {
				where := st["even#1"].Flowspace + " " + st["mod3#1"].Flowspace + " " + st["count#2"].Flowspace
				if where != "me0 ixp0 kernel" {
					t.Errorf("even, mod3, count ran in %s", where)
				}
			}
			// The second request saw packets 10000..29999: 10000 even ones,
			// 3333 of them divisible by 3 as well (multiples of 6 from 10002 to 29994).
			if got := packets(st["count#2"]); got != 10000 {
				t.Errorf("count two = %d, want 10000", got)
			}
			if got := packets(st["count#3"]); got != 3333 {
				t.Errorf("count three = %d, want 3333", got)
			}
			if got := r2.Functions()[0].ID; got != r1.Functions()[0].ID {
				t.Errorf("second request starts with %s, want the shared %s", got, r1.Functions()[0].ID)
			}
		})
	}
}

func TestFlowgroupsIsolate(t *testing.T) {
	reg := testRegistry(t)
	rt := New(Config{Registry: reg})
	alice, _ := Flowgroup(GroupUID, Credentials{UID: 1000})
	bob, _ := Flowgroup(GroupUID, Credentials{UID: 1001})
	expr := `(src,n=1000) > (even) > (count)`
	ra, err := rt.Populate(expr, RequestOptions{Group: alice})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := rt.Populate(expr, RequestOptions{Group: bob})
	if err != nil {
		t.Fatal(err)
	}
	ra2, err := rt.Populate(expr, RequestOptions{Group: alice})
	if err != nil {
		t.Fatal(err)
	}
	opened := nOpened.Load()
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	// Two groups: two sources (two PBufs), two counts; alice's second
	// request shares her first one's functions.
	if got := nOpened.Load() - opened; got != 4 {
		t.Errorf("opened %d sources and counts, want 4", got)
	}
	rt.Activate(context.Background())
	rt.Wait()
	rt.Close()
	a, b := ra.Functions(), rb.Functions()
	for i := range a {
		if a[i].ID == b[i].ID {
			t.Errorf("groups share %s", a[i].ID)
		}
		if ra2.Functions()[i].ID != a[i].ID {
			t.Errorf("one group's identical requests do not share %s", a[i].ID)
		}
	}
	if packets(a[2]) != 500 || packets(b[2]) != 500 {
		t.Errorf("counts %d and %d, want 500 each", packets(a[2]), packets(b[2]))
	}
	if _, err := ra.Lookup(a[2].ID); err != nil {
		t.Errorf("alice cannot read her own count: %v", err)
	}
	_, err = ra.Lookup(b[2].ID)
	if err == nil {
		t.Fatalf("alice reads bob's %s", b[2].ID)
	}
	_, errMissing := ra.Lookup("count#99")
	if err.Error() != "no function "+b[2].ID+" in flowgroup \"uid:1000\"" || errMissing == nil {
		t.Errorf("error %q: should read as for a function that does not exist (%v)", err, errMissing)
	}
	if n := len(rt.FunctionsOf(bob)); n != 3 {
		t.Errorf("bob's group has %d functions, want 3", n)
	}
	if _, err := Flowgroup("world", Self()); err == nil || !IsInvalid(err) {
		t.Errorf("unknown policy: %v", err)
	}
}

// TestFailedInstantiateLeavesNothing: a function that fails to instantiate
// half way through a hierarchy makes Instantiate release everything it
// created, in every flowspace; on a running flowgraph, what ran before
// runs on undisturbed; Close leaves no goroutine behind.
func TestFailedInstantiateLeavesNothing(t *testing.T) {
	before := runtime.NumGoroutine()
	var allow atomic.Int64
	reg := gatedRegistry(t, &allow)
	rt := New(Config{Registry: reg, Hierarchy: treeWith(t, reg, fig4, "gated", 20000)})
	if _, err := rt.Populate(`(cap,if=eth2) > (even) > (count) > (broken)`, RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	o, c := nOpened.Load(), nClosed.Load()
	err := rt.Instantiate()
	if err == nil || !strings.Contains(err.Error(), "broken#1: cannot open the device") {
		t.Fatalf("err = %v", err)
	}
	if opened, closed := nOpened.Load()-o, nClosed.Load()-c; opened != 2 || closed != 2 {
		t.Errorf("opened %d (want the traffic source and the count), closed %d: something stayed open", opened, closed)
	}
	rt.Close()

	// Now on a running flowgraph.
	rt = New(Config{Registry: reg, Hierarchy: treeWith(t, reg, fig4, "gated", 20000)})
	if _, err := rt.Populate(`(cap,if=eth2) > (even) > (count,tag=a)`, RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Activate(context.Background()); err != nil {
		t.Fatal(err)
	}
	allow.Store(10000)
	waitFor(t, rt, 10000)
	bad, err := rt.Populate(`(cap,if=eth2) > (even) > (mod3) > (count,tag=b) > (broken)`, RequestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o, c = nOpened.Load(), nClosed.Load()
	if err := rt.Instantiate(); err == nil {
		t.Fatal("instantiated a broken function")
	}
	if opened, closed := nOpened.Load()-o, nClosed.Load()-c; opened != 1 || closed != 1 {
		t.Errorf("opened %d (the new count), closed %d", opened, closed)
	}
	if err := rt.Remove(bad); err != nil {
		t.Fatal(err)
	}
	allow.Store(10000)
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range rt.Functions() {
		if f.Class == "count" && f.State["packets"] != uint64(10000) {
			t.Errorf("the running count saw %v packets, want 10000", f.State["packets"])
		}
	}
	noLeak(t, before)
}
