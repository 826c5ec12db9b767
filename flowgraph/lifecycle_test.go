package flowgraph

// Adversarial tests of the flowspaces, the Go flowspace engine, the
// in-process bridge and the flowgraph lifecycle (placement, plan,
// Instantiate/Remove while running, Stop/cancel mid-flight).

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/user"
	"github.com/ffpf-go/ffpf/functions"
)

// afterClose counts calls of Process on a closecheck function that was
// already closed (a released function still in the datapath).
var afterClose atomic.Int64

// closeCheck is a function that notices being run after Close; slow makes
// each batch take that long, so that bridges beneath it fill up.
type closeCheck struct {
	closed atomic.Bool
	slow   time.Duration
	n      uint64 // plain on purpose: Process and Close must not overlap
	m      *buffers.MBuf
}

func (c *closeCheck) Process(b *buffers.Batch) {
	if c.closed.Load() {
		afterClose.Add(1)
	}
	c.n += uint64(b.N)
	c.m.Add64(0, uint64(b.N))
	if c.slow > 0 {
		time.Sleep(c.slow)
	}
}
func (c *closeCheck) MBuf() *buffers.MBuf { return c.m }
func (c *closeCheck) Close() error {
	c.closed.Store(true)
	c.n = 0 // a function releases its state on Close
	return nil
}

// dropSource is a slow source that reports drops before it, like a live
// capture: each Fill takes a while and the kernel lost one more packet.
type dropSource struct {
	testSource
	drops atomic.Uint64
	pause time.Duration
}

func (s *dropSource) Fill(b *buffers.Batch) error {
	time.Sleep(s.pause)
	s.drops.Add(1)
	return s.testSource.Fill(b)
}
func (s *dropSource) Drops() uint64 { return s.drops.Load() }

// bigSource is src with a larger capture length (its slots are bigger).
type bigSource struct{ testSource }

func (s *bigSource) Info() functions.SourceInfo {
	return functions.SourceInfo{Name: "big", LinkType: s.lt, MaxCapLen: 1500}
}

func lifecycleRegistry(t testing.TB) *functions.Registry {
	r := placeRegistry(t)
	must := func(c *functions.Class) {
		t.Helper()
		if err := r.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	must(&functions.Class{Name: "closecheck", MinInputs: 1, MaxInputs: -1, State: counterState("packets"),
		Params: []functions.Param{{Name: "slow", Type: functions.Int, Default: "0"}, {Name: "tag", Type: functions.String}},
		New: func(ctx *functions.Context) (functions.Function, error) {
			return &closeCheck{slow: time.Duration(ctx.Params.Int("slow")) * time.Microsecond,
				m: buffers.NewMBuf(8, buffers.Native, buffers.Field{Name: "packets", Type: buffers.U64})}, nil
		}})
	must(&functions.Class{Name: "dropsrc", Params: []functions.Param{{Name: "n", Type: functions.Int, Default: "1000000000"},
		{Name: "pause", Type: functions.Int, Default: "1000"}},
		NewSource: func(ctx *functions.Context) (functions.Source, error) {
			return &dropSource{testSource: testSource{n: ctx.Params.Int("n"), lt: functions.LinkEthernet},
				pause: time.Duration(ctx.Params.Int("pause")) * time.Microsecond}, nil
		}})
	must(&functions.Class{Name: "big", Params: []functions.Param{{Name: "n", Type: functions.Int, Default: "1000"}},
		NewSource: func(ctx *functions.Context) (functions.Source, error) {
			return &bigSource{testSource{n: ctx.Params.Int("n"), lt: functions.LinkEthernet}}, nil
		}})
	return r
}

// traffic returns what a simulated interface replays: (class,n=n).
func traffic(t testing.TB, reg *functions.Registry, class string, n int64) *user.Traffic {
	t.Helper()
	c, ok := reg.Lookup(class)
	if !ok {
		t.Fatalf("no class %s", class)
	}
	p, err := c.Bind([]functions.Arg{{Key: "n", Value: functions.Raw{Kind: functions.RawNumber, Text: fmt.Sprint(n)}}})
	if err != nil {
		t.Fatal(err)
	}
	return &user.Traffic{Term: "(" + class + ")", Class: c, Params: p}
}

// twoLevel is userspace with one board beneath, nic0, that runs classes
// and whose interfaces replay the given traffic.
func twoLevel(t testing.TB, classes []string, s flowspaces.Strategy, ifaces map[string]*user.Traffic) flowspaces.Flowspace {
	t.Helper()
	root := user.New(user.Options{Name: "user"})
	nic := user.New(user.Options{Name: "nic0", Kind: flowspaces.KindTest, Classes: classes, Interfaces: ifaces})
	if _, err := flowspaces.Attach(root, nic, "test", s); err != nil {
		t.Fatal(err)
	}
	return root
}

func stateByID(rt *Runtime) map[string]FunctionState {
	st := map[string]FunctionState{}
	for _, f := range rt.Functions() {
		st[f.ID] = f
	}
	return st
}

func checkInvariants(t *testing.T, what string, rt *Runtime) {
	t.Helper()
	for _, f := range rt.Functions() {
		if f.In != f.Out+f.Filtered+f.Dropped {
			t.Errorf("%s: %s in %s: in %d != out %d + filtered %d + dropped %d", what, f.ID, f.Flowspace, f.In, f.Out, f.Filtered, f.Dropped)
		}
	}
	for _, b := range rt.Bridges() {
		if b.In != b.Out+b.Dropped {
			t.Errorf("%s: bridge %s>%s: in %d != out %d + dropped %d (%d packets unaccounted for)", what, b.From, b.To, b.In, b.Out, b.Dropped, int64(b.In)-int64(b.Out+b.Dropped))
		}
	}
}

func bridge(rt *Runtime, from, to string) BridgeState {
	for _, b := range rt.Bridges() {
		if b.From == from && b.To == to {
			return b
		}
	}
	return BridgeState{}
}

func noLeak(t *testing.T, before int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); runtime.NumGoroutine() > before; {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines before, %d after Close:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCancelMidFlightAccounting: cancelling the context given to
// Activate (what ^C does in ffpf run) during heavy traffic across bridges
// must leave every bridge with in = out + dropped: the packets in flight
// count as the bridge's dropped. Nothing may panic or stay behind.
func TestCancelMidFlightAccounting(t *testing.T) {
	before := runtime.NumGoroutine()
	bad := 0
	for i := range 30 {
		reg := lifecycleRegistry(t)
		rt := New(Config{Registry: reg, Hierarchy: tree(t, reg, fig4, 1<<40)})
		for _, e := range []string{
			`[(cap,if=eth0)|(cap,if=eth1)] > (even) > (closecheck,tag=a,slow=20)`,
			`(cap,if=eth2) > (even) > (mod3) > (closecheck,tag=b)`,
			`(cap,if=eth3) > (keep,mod=3) > (count)`,
		} {
			if _, err := rt.Populate(e, RequestOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := rt.Instantiate(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		if err := rt.Activate(ctx); err != nil {
			t.Fatal(err)
		}
		running(t, rt) // mid-flight: traffic flows, then a few ms more
		time.Sleep(time.Duration(2+i%5) * time.Millisecond)
		cancel()
		done := make(chan error, 1)
		go func() { done <- rt.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Wait hangs after cancel")
		}
		if err := rt.Close(); err != nil {
			t.Fatal(err)
		}
		for _, b := range rt.Bridges() {
			if b.In != b.Out+b.Dropped {
				bad++
				t.Errorf("run %d: bridge %s>%s: in %d != out %d + dropped %d", i, b.From, b.To, b.In, b.Out, b.Dropped)
			}
		}
		checkInvariants(t, fmt.Sprint("run ", i), rt)
		if bad > 3 {
			break
		}
	}
	noLeak(t, before)
}

// TestStopMidFlightNothingLostSilently: on Stop during heavy traffic
// every packet a function beneath passed to be carried up reaches the
// bridge (as in) and every one the bridge gave out reaches the function
// above: the bridge's counters account for all of them.
func TestStopMidFlightNothingLostSilently(t *testing.T) {
	for _, s := range []flowspaces.Strategy{flowspaces.CopyOnce, flowspaces.ZeroCopy} {
		t.Run(string(s), func(t *testing.T) {
			before := runtime.NumGoroutine()
			lost := 0
			for i := range 30 {
				reg := lifecycleRegistry(t)
				root := twoLevel(t, []string{"even"}, s, map[string]*user.Traffic{"eth0": traffic(t, reg, "src", 1<<40)})
				rt := New(Config{Registry: reg, Hierarchy: root})
				if _, err := rt.Populate(`(cap,if=eth0) > (even) > (closecheck,slow=50)`, RequestOptions{}); err != nil {
					t.Fatal(err)
				}
				if err := rt.Instantiate(); err != nil {
					t.Fatal(err)
				}
				if err := rt.Activate(context.Background()); err != nil {
					t.Fatal(err)
				}
				waitUntil(t, "packets crossed the bridge", func() bool { return bridge(rt, "nic0", "user").Out > 0 })
				time.Sleep(time.Duration(1+i%4) * time.Millisecond)
				rt.Stop()
				if err := rt.Close(); err != nil {
					t.Fatal(err)
				}
				st := stateByID(rt)
				b := bridge(rt, "nic0", "user")
				even, top := st["even#1"], st["closecheck#1"]
				if even.Flowspace != "nic0" || top.Flowspace != "user" {
					t.Fatalf("placed even in %s, closecheck in %s", even.Flowspace, top.Flowspace)
				}
				if even.Out != b.In || b.Out != top.In || b.In != b.Out+b.Dropped {
					lost++
					if lost <= 3 {
						t.Errorf("run %d: even passed %d packets up, the bridge took in %d (out %d, dropped %d), the function above got %d: %d lost without a count",
							i, even.Out, b.In, b.Out, b.Dropped, top.In, int64(even.Out)-int64(b.In))
					}
				}
				checkInvariants(t, fmt.Sprint("run ", i), rt)
			}
			if lost > 0 {
				t.Errorf("%d of 30 stops lost packets without counting them", lost)
			}
			noLeak(t, before)
		})
	}
}

// TestAddRequestBelowIdleRoot: a running flowgraph whose root (or a
// board) ran nothing when it was activated must still take new requests
// there: Instantiate works "also while running".
func TestAddRequestBelowIdleRoot(t *testing.T) {
	var allow atomic.Int64
	for _, tc := range []struct{ name, first, second string }{
		// everything of the first request runs on nic0: userspace and the
		// kernel have no worker at activation.
		{"new function in userspace fed from beneath", `(cap,if=eth0) > (even)`, `(cap,if=eth0) > (even) > (all)`},
		{"new source in userspace", `(cap,if=eth0) > (even)`, `(gated) > (count)`},
		{"new interface on an idle board", `(cap,if=eth0) > (even) > (all)`, `(cap,if=eth1) > (even) > (all)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := gatedRegistry(t, &allow)
			allow.Store(0)
			rt := New(Config{Registry: reg, Hierarchy: treeWith(t, reg, fig4, "gated", 30000)})
			defer rt.Close()
			if _, err := rt.Populate(tc.first, RequestOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := rt.Instantiate(); err != nil {
				t.Fatal(err)
			}
			if err := rt.Activate(context.Background()); err != nil {
				t.Fatal(err)
			}
			allow.Store(1000)
			waitFor(t, rt, 1000)
			if _, err := rt.Populate(tc.second, RequestOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := rt.Instantiate(); err != nil {
				t.Fatalf("adding %s to a running flowgraph: %v", tc.second, err)
			}
		})
	}
}

// TestRemoveThenReAdd: removing the only request of a board and
// adding it again while the flowgraph runs (an application restarting).
func TestRemoveThenReAdd(t *testing.T) {
	var allow atomic.Int64
	reg := gatedRegistry(t, &allow)
	allow.Store(0)
	rt := New(Config{Registry: reg, Hierarchy: treeWith(t, reg, fig4, "gated", 1<<30)})
	defer rt.Close()
	keep, err := rt.Populate(`(gated) > (count,tag=root)`, RequestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = keep
	r1, err := rt.Populate(`(cap,if=eth0) > (even) > (count,tag=x)`, RequestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Activate(context.Background()); err != nil {
		t.Fatal(err)
	}
	allow.Store(2000)
	waitFor(t, rt, 2000)
	if err := rt.Remove(r1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if _, err := rt.Populate(`(cap,if=eth0) > (even) > (count,tag=x)`, RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatalf("re-adding a removed request: %v", err)
	}
}

// TestRemoveLeavesNoStaleRoute: a request whose function in
// userspace is fed over a bridge is removed while the bridge is full; the
// released function must never run again (the reader of the bridge must
// not keep the routes of before the removal).
func TestRemoveLeavesNoStaleRoute(t *testing.T) {
	for i := range 10 {
		reg := lifecycleRegistry(t)
		root := twoLevel(t, []string{"even", "keep"}, flowspaces.CopyOnce, map[string]*user.Traffic{
			"eth0": traffic(t, reg, "src", 1<<40)})
		rt := New(Config{Registry: reg, Hierarchy: root})
		// The second request keeps the board's source running.
		r1, err := rt.Populate(`(cap,if=eth0) > (even) > (closecheck,slow=200)`, RequestOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rt.Populate(`(cap,if=eth0) > (keep,mod=3)`, RequestOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := rt.Instantiate(); err != nil {
			t.Fatal(err)
		}
		if err := rt.Activate(context.Background()); err != nil {
			t.Fatal(err)
		}
		// The bridge fills: closecheck is slow.
		waitUntil(t, "the bridge holds packets", func() bool {
			b := bridge(rt, "nic0", "user")
			return b.Out > 0 && b.In > b.Out+b.Dropped
		})
		a := afterClose.Load()
		if err := rt.Remove(r1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
		rt.Stop()
		rt.Close()
		if n := afterClose.Load() - a; n > 0 {
			t.Fatalf("run %d: a removed (released) function processed %d batches after its Close", i, n)
		}
	}
}

// TestRemoveRunningSource: removing a request whose live source is
// in the middle of a Fill: its functions are released only once nothing
// can run them, and the source's drops are counted once.
func TestRemoveRunningSource(t *testing.T) {
	for i := range 10 {
		reg := lifecycleRegistry(t)
		rt := New(Config{Registry: reg})
		r1, err := rt.Populate(`(dropsrc,pause=2000) > (closecheck)`, RequestOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rt.Populate(`(src,n=1000000000) > (count)`, RequestOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := rt.Instantiate(); err != nil {
			t.Fatal(err)
		}
		if err := rt.Activate(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "the live source delivered", func() bool { return state(rt, "closecheck#1").In > 0 })
		time.Sleep(time.Duration(i%3) * time.Millisecond) // in the middle of a Fill (2 ms each), or not
		a := afterClose.Load()
		if err := rt.Remove(r1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
		rt.Stop()
		rt.Close()
		if n := afterClose.Load() - a; n > 0 {
			t.Errorf("run %d: the removed closecheck processed %d batches after its Close", i, n)
		}
		src := r1.Functions()[0]
		if src.In != src.Out+src.Filtered+src.Dropped {
			t.Errorf("run %d: removed source: in %d != out %d + dropped %d", i, src.In, src.Out, src.Dropped)
		}
	}
}

// TestReceivePoolGrowsWhileCopying: a board copies packets up into
// the receive pool of userspace; a request added while it runs brings a
// source with larger packets, so the pool is reallocated while the first
// source copies into it.
func TestReceivePoolGrowsWhileCopying(t *testing.T) {
	reg := lifecycleRegistry(t)
	root := twoLevel(t, []string{"even"}, flowspaces.CopyOnce, map[string]*user.Traffic{
		"eth0": traffic(t, reg, "src", 1<<40), "eth1": traffic(t, reg, "big", 1<<40)})
	rt := New(Config{Registry: reg, Hierarchy: root})
	if _, err := rt.Populate(`(cap,if=eth0) > (even) > (count,tag=a)`, RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Activate(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the first source's packets arrive", func() bool { return state(rt, "count#1").In > 0 })
	if _, err := rt.Populate(`(cap,if=eth1) > (even) > (count,tag=b)`, RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the larger packets arrive", func() bool { return state(rt, "count#2").In > 0 })
	before := state(rt, "count#1").In
	waitUntil(t, "the first source's packets still arrive", func() bool { return state(rt, "count#1").In > before })
	rt.Stop()
	rt.Close()
	checkInvariants(t, "after", rt)
}

// TestGhostAndLocalSource: a function fed at once by a function
// beneath (through a bridge) and by a source of its own flowspace counts
// exactly what it counts when everything runs in userspace.
func TestGhostAndLocalSource(t *testing.T) {
	exprs := []string{
		`[(cap,if=eth0) > (even) | (src,n=3000,link=0)] > (count,tag=j)`,
		`[(cap,if=eth2) > (even) > (mod3) | (src,n=3000,link=0) > (keep,mod=5) | (cap,if=eth1)] > (count,tag=j)`,
		`(src,n=700) > [(even) | (mod3)] > (count,tag=k)`,
	}
	flat := fsDef{name: "user", kids: []fsDef{{name: "all", ifaces: []string{"eth0", "eth1", "eth2", "eth3"}}}}
	for _, expr := range exprs {
		want, got := stateByID(runOn(t, flat, 5000, expr)), stateByID(runOn(t, fig4, 5000, expr))
		for id, w := range want {
			g := got[id]
			if [4]uint64{g.In, g.Out, g.Filtered, g.Dropped} != [4]uint64{w.In, w.Out, w.Filtered, w.Dropped} {
				t.Errorf("%s: %s in %s: %d/%d/%d/%d, in userspace %d/%d/%d/%d", expr, id, g.Flowspace,
					g.In, g.Out, g.Filtered, g.Dropped, w.In, w.Out, w.Filtered, w.Dropped)
			}
		}
	}
}

// TestManyExports: 70 functions on a board whose outputs each go up
// two bridges to a function of their own in userspace.
func TestManyExports(t *testing.T) {
	var b strings.Builder
	b.WriteString("(cap,if=eth0) > [")
	for i := range 70 {
		if i > 0 {
			b.WriteString(" | ")
		}
		fmt.Fprintf(&b, "(keep,mod=%d,at=%d) > (count,tag=c%d)", 2+i%9, i%5, i)
	}
	b.WriteString("]")
	expr := b.String()
	onBoard := fsDef{name: "user", kids: []fsDef{
		{name: "kernel", classes: []string{"even"}, inPlace: true, strategy: flowspaces.ZeroCopy, kids: []fsDef{
			{name: "nic0", classes: []string{"keep"}, ifaces: []string{"eth0"}},
		}},
	}}
	flat := fsDef{name: "user", kids: []fsDef{{name: "all", ifaces: []string{"eth0"}}}}
	want, got := stateByID(runOn(t, flat, 20000, expr)), stateByID(runOn(t, onBoard, 20000, expr))
	for id, w := range want {
		if g := got[id]; g.In != w.In || g.Out != w.Out {
			t.Errorf("%s in %s: in %d out %d; in userspace in %d out %d", id, g.Flowspace, g.In, g.Out, w.In, w.Out)
		}
	}
	if got["keep#1"].Flowspace != "nic0" || got["count#1"].Flowspace != "user" {
		t.Errorf("keep#1 in %s, count#1 in %s", got["keep#1"].Flowspace, got["count#1"].Flowspace)
	}
}

// TestSmallChildEndsFirst: boards whose traffic ends before
// userspace is even activated (a few packets, fewer than a batch, or just
// more than a bridge holds) deliver everything.
func TestSmallChildEndsFirst(t *testing.T) {
	for _, n := range []int{1, 10, 255, 256, 257, 4 * 256, 9*256 + 3} {
		for _, expr := range []string{
			`[(cap,if=eth0)|(cap,if=eth1)] > (even) > (all) > (count)`,
			`(cap,if=eth2) > (even) > (mod3) > (count)`,
			`[(cap,if=eth2)|(cap,if=eth3)|(cap,if=eth0)] > (count)`,
		} {
			reg := placeRegistry(t)
			rt := runClosed(t, Config{Registry: reg, Hierarchy: tree(t, reg, fig4, n)}, expr, fmt.Sprintf("n=%d %s", n, expr))
			st := stateByID(rt)
			var srcs uint64
			for _, f := range st {
				if f.Class == "cap" {
					srcs += f.Out
				}
			}
			// The count's input: by construction of the expressions, what
			// the function before the count passed on (or the sources).
			c := st["count#1"]
			var want uint64
			switch {
			case strings.HasPrefix(expr, "[(cap,if=eth0)|(cap,if=eth1)]"):
				want = st["all#1"].Out
			case strings.Contains(expr, "mod3"):
				want = st["mod3#1"].Out
			default:
				want = srcs
			}
			if c.In != want || srcs != uint64(n)*uint64(strings.Count(expr, "cap,")) {
				t.Errorf("n=%d %s: count saw %d, want %d (sources %d)", n, expr, c.In, want, srcs)
			}
		}
	}
}

// TestLateRequestOnEndedBoard: a request added after a board's
// traffic has ended (userspace still runs) neither hangs nor breaks the
// counts: it sees nothing, or fails cleanly.
func TestLateRequestOnEndedBoard(t *testing.T) {
	var allow atomic.Int64
	reg := gatedRegistry(t, &allow)
	root := tree(t, reg, fig4, 300) // the boards' traffic: 300 packets
	rt := New(Config{Registry: reg, Hierarchy: root})
	if _, err := rt.Populate(`(gated,n=100000) > (count,tag=root)`, RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Populate(`(cap,if=eth0) > (even) > (count,tag=a)`, RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Activate(context.Background()); err != nil {
		t.Fatal(err)
	}
	allow.Store(10)
	waitFor(t, rt, 310)
	time.Sleep(20 * time.Millisecond)
	// Shares cap#1 and even#1 (ended); a new function in userspace.
	if _, err := rt.Populate(`(cap,if=eth0) > (even) > (all) > (count,tag=late)`, RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Logf("late request on an ended board: %v", err)
	}
	// A new function on the ended board itself.
	if _, err := rt.Populate(`(cap,if=eth0) > (keep,mod=3) > (count,tag=late2)`, RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Logf("late request on an ended board: %v", err)
	}
	allow.Store(1 << 40)
	done := make(chan error, 1)
	go func() { done <- rt.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait hangs")
	}
	rt.Close()
	checkInvariants(t, "late", rt)
	st := stateByID(rt)
	if st["even#1"].In != 300 || st["count#2"].In != 150 {
		t.Errorf("even in %d, count a in %d; want 300 and 150", st["even#1"].In, st["count#2"].In)
	}
}

// TestStateReadWhileAdding: reading the functions' state (as a
// progress display or an embedding program does) while requests are added
// to the running flowgraph.
func TestStateReadWhileAdding(t *testing.T) {
	var allow atomic.Int64
	reg := gatedRegistry(t, &allow)
	rt := New(Config{Registry: reg})
	defer rt.Close()
	if _, err := rt.Populate(`(gated) > (even) > (count,tag=a)`, RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Activate(context.Background()); err != nil {
		t.Fatal(err)
	}
	allow.Store(1 << 40)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			rt.Functions()
			rt.Progress()
			rt.Plan()
		}
	}()
	for i := range 20 {
		// Labels an existing function and adds new ones.
		if _, err := rt.Populate(fmt.Sprintf(`(gated) > L%d:(even) > (count,tag=n%d)`, i, i), RequestOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := rt.Instantiate(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}

// TestPlanPBufsMatchEngine: the PBufs the plan lists for a function
// are the PBufs its batches come from when it runs (counted by the pbufs
// class), for functions whose packets are all in PBufs.
func TestPlanPBufsMatchEngine(t *testing.T) {
	defs := map[string]fsDef{"fig4": fig4, "deep": {name: "user", kids: []fsDef{
		{name: "kernel", classes: []string{"even", "pbufs"}, strategy: flowspaces.ZeroCopy, kids: []fsDef{
			{name: "ixp0", classes: []string{"even", "pbufs"}, ifaces: []string{"eth3"}, strategy: flowspaces.ZeroCopy, kids: []fsDef{
				{name: "me0", classes: []string{"even", "pbufs"}, ifaces: []string{"eth2"}},
			}},
			{name: "nic0", classes: []string{"even"}, ifaces: []string{"eth0"}, inPlace: true},
			{name: "nic1", classes: []string{}, ifaces: []string{"eth1"}, strategy: flowspaces.ZeroCopy},
		}},
	}}}
	exprs := []string{
		`[(cap,if=eth0) > (even) | (cap,if=eth1)] > (pbufs)`,
		`[(cap,if=eth2) > (even) | (cap,if=eth3)] > (pbufs)`,
		`[(cap,if=eth2) > (even) | (cap,if=eth3) > (even)] > (all) > (pbufs)`,
		`[(cap,if=eth2) | (cap,if=eth0) | (src,n=600,link=0)] > (all) > (pbufs)`,
		`(cap,if=eth2) > (pbufs)`,
		`(cap,if=eth2) > (even) > (pbufs)`,
		`(cap,if=eth1) > (pbufs)`,
		`(cap,if=eth0) > (even) > (all) > (pbufs)`,
	}
	for name, def := range defs {
		for _, expr := range exprs {
			reg := placeRegistry(t)
			rt := New(Config{Registry: reg, Hierarchy: tree(t, reg, def, 3000)})
			if _, err := rt.Populate(expr, RequestOptions{}); err != nil {
				t.Fatal(err)
			}
			plan := map[string]PlannedFunction{}
			for _, f := range rt.Plan().Functions {
				plan[f.ID] = f
			}
			if err := rt.Instantiate(); err != nil {
				t.Fatal(err)
			}
			rt.Activate(context.Background())
			if err := rt.Wait(); err != nil {
				t.Fatal(err)
			}
			rt.Close()
			for _, f := range rt.Functions() {
				if f.Class != "pbufs" {
					continue
				}
				p := plan[f.ID]
				if len(p.PBufs) == 1 && p.PBufs[0] == InPlace {
					continue
				}
				if got := f.State["pbufs"]; got != uint64(len(p.PBufs)) {
					t.Errorf("%s: %s: %s in %s saw batches of %v PBufs, the plan lists %v", name, expr, f.ID, f.Flowspace, got, p.PBufs)
				}
			}
		}
	}
}

// TestChurnKeepsSharedCounts: requests sharing a board's functions
// are added and removed while heavy traffic crosses two bridges; the
// request that stays from the first packet to the last counts every packet
// its shared prefix passed, and no bridge loses or drops any.
func TestChurnKeepsSharedCounts(t *testing.T) {
	for i := range 5 {
		reg := lifecycleRegistry(t)
		rt := New(Config{Registry: reg, Hierarchy: tree(t, reg, fig4, 400000)})
		if _, err := rt.Populate(`(cap,if=eth2) > (even) > (mod3) > (closecheck,tag=stay)`, RequestOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := rt.Instantiate(); err != nil {
			t.Fatal(err)
		}
		if err := rt.Activate(context.Background()); err != nil {
			t.Fatal(err)
		}
		for j := range 12 {
			var exprs []string
			switch j % 3 {
			case 0:
				exprs = []string{`(cap,if=eth2) > (even) > (closecheck,tag=x)`}
			case 1:
				exprs = []string{`(cap,if=eth2) > (even) > (mod3) > (count,tag=y)`, `(cap,if=eth2) > (keep,mod=5) > (all)`}
			default:
				exprs = []string{`[(cap,if=eth2) > (even) | (cap,if=eth3) > (keep,mod=7)] > (closecheck,tag=z)`}
			}
			var reqs []*Request
			for _, e := range exprs {
				r, err := rt.Populate(e, RequestOptions{})
				if err != nil {
					t.Fatal(err)
				}
				reqs = append(reqs, r)
			}
			if err := rt.Instantiate(); err != nil {
				t.Fatalf("churn %d: %v", j, err)
			}
			time.Sleep(time.Duration(200+i*100) * time.Microsecond)
			for _, r := range reqs {
				if err := rt.Remove(r); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := rt.Wait(); err != nil {
			t.Fatal(err)
		}
		rt.Close()
		checkInvariants(t, fmt.Sprint("churn run ", i), rt)
		st := stateByID(rt)
		if st["cap#1"].Out != 400000 || st["closecheck#1"].In != st["mod3#1"].Out || st["mod3#1"].In != st["even#1"].Out {
			t.Errorf("run %d: source %d, even %d>%d, mod3 %d>%d, the request that stayed saw %d", i, st["cap#1"].Out,
				st["even#1"].In, st["even#1"].Out, st["mod3#1"].In, st["mod3#1"].Out, st["closecheck#1"].In)
		}
		for _, b := range rt.Bridges() {
			if b.Dropped != 0 && b.From != "ixp0" {
				t.Errorf("run %d: bridge %s>%s dropped %d packets without a stop", i, b.From, b.To, b.Dropped)
			}
		}
	}
}

// TestRemoveIsNotADrop: removing a request whose source runs on a
// board while its packets cross a bridge: the design says functions leave
// "between two batches" and bridges drop only on overflow, error or stop;
// a Remove is none of those, yet the removed source's batch in flight is
// counted as the bridge's dropped.
func TestRemoveIsNotADrop(t *testing.T) {
	dropped := 0
	for i := range 10 {
		reg := lifecycleRegistry(t)
		root := twoLevel(t, []string{"even"}, flowspaces.CopyOnce, map[string]*user.Traffic{
			"eth0": traffic(t, reg, "src", 1<<40), "eth1": traffic(t, reg, "src", 1<<40)})
		rt := New(Config{Registry: reg, Hierarchy: root})
		if _, err := rt.Populate(`(cap,if=eth0) > (even) > (closecheck,tag=stay)`, RequestOptions{}); err != nil {
			t.Fatal(err)
		}
		r, err := rt.Populate(`(cap,if=eth1) > (even) > (closecheck,tag=go,slow=100)`, RequestOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.Instantiate(); err != nil {
			t.Fatal(err)
		}
		rt.Activate(context.Background())
		waitUntil(t, "both requests see packets", func() bool {
			return state(rt, "closecheck#1").In > 0 && state(rt, "closecheck#2").In > 0
		})
		if err := rt.Remove(r); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
		b := bridge(rt, "nic0", "user") // before the stop
		rt.Stop()
		rt.Close()
		if b.Dropped != 0 {
			dropped++
			if dropped <= 3 {
				t.Errorf("run %d: bridge nic0>user dropped %d packets on a Remove, without overflow, error or stop", i, b.Dropped)
			}
		}
	}
}

// TestDeepAndWideHierarchy: the deepest hierarchy the path field
// allows (8 levels) and the widest flowspace (15 children): placement
// reaches the bottom and the last child, and packets come all the way up.
func TestDeepAndWideHierarchy(t *testing.T) {
	deep := fsDef{name: "l7", classes: []string{"even"}, ifaces: []string{"deep"}}
	for l := 6; l >= 1; l-- {
		deep = fsDef{name: fmt.Sprintf("l%d", l), classes: []string{"mod3"}, kids: []fsDef{deep}}
	}
	root := fsDef{name: "user"}
	for i := range 14 {
		root.kids = append(root.kids, fsDef{name: fmt.Sprintf("w%d", i), classes: []string{"even"}, ifaces: []string{fmt.Sprintf("w%d", i)}})
	}
	root.kids = append(root.kids, deep)
	reg := placeRegistry(t)
	rt := New(Config{Registry: reg, Hierarchy: tree(t, reg, root, 3000)})
	if _, err := rt.Populate(`[(cap,if=deep) > (even) > (mod3) | (cap,if=w13) > (even)] > (count)`, RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	plan := map[string]PlannedFunction{}
	for _, f := range rt.Plan().Functions {
		plan[f.ID] = f
	}
	for id, want := range map[string]string{"cap#1": "l7 0xe000000f", "even#1": "l7 0xe000000f",
		"mod3#1": "l6 0xe00000ff", "cap#2": "w13 0xdfffffff", "even#2": "w13 0xdfffffff", "count#1": "user 0xffffffff"} {
		if got := plan[id].Flowspace + " " + plan[id].Path; got != want {
			t.Errorf("%s placed %s, want %s", id, got, want)
		}
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	rt.Activate(context.Background())
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	rt.Close()
	checkInvariants(t, "deep", rt)
	st := stateByID(rt)
	if c := packets(st["count#1"]); c != st["mod3#1"].Out+st["even#2"].Out || c == 0 {
		t.Errorf("count saw %d, want %d + %d", c, st["mod3#1"].Out, st["even#2"].Out)
	}
	if len(rt.Bridges()) != 8 {
		t.Errorf("%d bridges, want 8: %+v", len(rt.Bridges()), rt.Bridges())
	}
}

// TestLimitAcrossBoards: the packet limit is shared by the sources of
// every flowspace of the hierarchy. Counted at the ends (ffpf run -c),
// exactly Limit packets reach count, the end, in the root, though even
// filters packets on a board beneath and the units of those it keeps
// travel up with them; counted at capture (--capture-count), exactly Limit packets
// enter. Either way the run ends.
func TestLimitAcrossBoards(t *testing.T) {
	for _, capture := range []bool{false, true} {
		for _, limit := range []int64{1, 255, 1000, 7777} {
			reg := placeRegistry(t)
			cfg := Config{Registry: reg, Hierarchy: tree(t, reg, fig4, 1<<40), Limit: limit}
			if capture {
				cfg.Limit, cfg.CaptureLimit = 0, limit
			}
			rt := runClosed(t, cfg, `[(cap,if=eth0)|(cap,if=eth1)|(cap,if=eth2) > (even)] > (all) > (count)`,
				fmt.Sprintf("limit %d (capture %v)", limit, capture))
			st := stateByID(rt)
			if capture {
				if got := rt.Packets(); got != uint64(limit) {
					t.Errorf("capture limit %d: the sources read %d packets", limit, got)
				}
			} else if got := packets(st["count#1"]); got != uint64(limit) {
				t.Errorf("limit %d: count counted %d packets", limit, got)
			}
			if st["all#1"].In != st["cap#1"].Out+st["cap#2"].Out+st["even#1"].Out {
				t.Errorf("limit %d: all saw %d", limit, st["all#1"].In)
			}
		}
	}
}

// runClosed populates expr on cfg's runtime, runs it to its end (failing
// after 10 s, named what), closes it and checks the invariants.
func runClosed(t *testing.T, cfg Config, expr, what string) *Runtime {
	t.Helper()
	rt := New(cfg)
	if _, err := rt.Populate(expr, RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	rt.Activate(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: Wait hangs", what)
	}
	rt.Close()
	checkInvariants(t, what, rt)
	return rt
}

// TestLimitCountsEachPacketOnce: counted at the ends (ffpf run -c), a
// packet that reaches an end on a board (keep,mod=2 in me0) and goes up
// to reach another in the root (count, after keep,mod=3,at=1 in me0 and
// all in the root) counts once: the sources read exactly the packets that
// bring the ends' union to the limit, and none after.
func TestLimitCountsEachPacketOnce(t *testing.T) {
	for _, limit := range []int{1, 2, 300, 5000} {
		reg := placeRegistry(t)
		rt := runClosed(t, Config{Registry: reg, Hierarchy: tree(t, reg, fig4, 1<<40), Limit: int64(limit)},
			`x:(cap,if=eth2) > (keep,mod=2); x > (keep,mod=3,at=1) > (all) > (count)`, fmt.Sprint("limit ", limit))
		st := stateByID(rt)
		if st["keep#1"].Flowspace != "me0" || st["keep#2"].Flowspace != "me0" || st["count#1"].Flowspace != "user" {
			t.Fatalf("placed %s, %s, %s", st["keep#1"].Flowspace, st["keep#2"].Flowspace, st["count#1"].Flowspace)
		}
		// The source's packet i starts with byte(i).
		even, mod3, read := 0, 0, 0
		for counted := 0; counted < limit; read++ {
			b := byte(read)
			if b%2 == 0 {
				even++
			}
			if b%3 == 1 {
				mod3++
			}
			if b%2 == 0 || b%3 == 1 {
				counted++
			}
		}
		if got := rt.Packets(); got != uint64(read) {
			t.Errorf("limit %d: the source read %d packets, want %d", limit, got, read)
		}
		if k, c := st["keep#1"].Out, packets(st["count#1"]); k != uint64(even) || c != uint64(mod3) {
			t.Errorf("limit %d: keep,mod=2 kept %d and count counted %d, want %d and %d", limit, k, c, even, mod3)
		}
	}
}

// TestPlanPBufsAfterPoolGrows: the plan lists one receive PBuf per
// copy-once bridge; when a request added while running brings longer
// packets, the engine reallocates the bridge's receive pool, and a
// function above then sees its packets in two PBufs.
func TestPlanPBufsAfterPoolGrows(t *testing.T) {
	reg := lifecycleRegistry(t)
	root := twoLevel(t, []string{"even"}, flowspaces.CopyOnce, map[string]*user.Traffic{
		"eth0": traffic(t, reg, "src", 1<<40), "eth1": traffic(t, reg, "big", 1<<40)})
	rt := New(Config{Registry: reg, Hierarchy: root})
	defer rt.Close()
	if _, err := rt.Populate(`(cap,if=eth0) > (even) > (pbufs)`, RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	rt.Activate(context.Background())
	waitUntil(t, "pbufs sees packets", func() bool { return state(rt, "pbufs#1").In > 0 })
	if _, err := rt.Populate(`(cap,if=eth1) > (even) > (count)`, RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	// Stop once batches copied after the growth reached pbufs: the longer
	// packets arrived, and pbufs took more in after that.
	waitUntil(t, "the longer packets arrive", func() bool { return state(rt, "count#1").In > 0 })
	seen := state(rt, "pbufs#1").In
	waitUntil(t, "pbufs sees packets after the growth", func() bool { return state(rt, "pbufs#1").In > seen })
	rt.Stop()
	var planned []string
	for _, f := range rt.Plan().Functions {
		if f.Class == "pbufs" {
			planned = f.PBufs
		}
	}
	for _, f := range rt.Functions() {
		if f.Class == "pbufs" && f.State["pbufs"] != uint64(len(planned)) {
			t.Errorf("pbufs saw batches of %v PBufs, the plan lists %v", f.State["pbufs"], planned)
		}
	}
}
