package flowgraph

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestOwnLimitEndsOneRequest: a request with a packet limit of its own,
// added to a running flowgraph, shares nothing with an identical request
// that has none; counted at its ends, exactly its limit reaches them (a
// packet a board beneath keeps travels up holding a unit of its budget,
// and counts once however many ends it reaches), and its source reads no
// packet past the one that fills it; counted at capture, its source reads
// exactly the limit. Then it has ended, its state stays as it was, and
// the other request reads on.
func TestOwnLimitEndsOneRequest(t *testing.T) {
	const expr = `x:(cap,if=eth2) > (keep,mod=2); x > (keep,mod=3,at=1) > (all) > (count)`
	for _, capture := range []bool{false, true} {
		for _, limit := range []int{1, 300, 5000} {
			what := fmt.Sprintf("limit %d (capture %v)", limit, capture)
			reg := placeRegistry(t)
			rt := New(Config{Registry: reg, Hierarchy: tree(t, reg, fig4, 1<<40)})
			other, err := rt.Populate(expr, RequestOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := rt.Instantiate(); err != nil {
				t.Fatal(err)
			}
			rt.Activate(context.Background())
			waitUntil(t, "the other request runs", func() bool { return state(rt, "count#1").In > 0 })
			opts := RequestOptions{Limit: int64(limit)}
			if capture {
				opts = RequestOptions{CaptureLimit: int64(limit)}
			}
			own, err := rt.Populate(expr, opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range own.Functions() {
				if slices.ContainsFunc(other.Functions(), func(o FunctionState) bool { return o.ID == f.ID }) {
					t.Fatalf("%s: %s is shared with the request without a limit", what, f.ID)
				}
			}
			if err := rt.Instantiate(); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, what+": the request ends", func() bool { ended, _ := own.Ended(); return ended })
			if ended, _ := other.Ended(); ended {
				t.Fatalf("%s: the request without a limit ended too", what)
			}
			got := byRole(t, own.Functions())
			if got["cap"].Flowspace != "me0" || got["keep,mod=2"].Flowspace != "me0" || got["count"].Flowspace != "user" {
				t.Fatalf("%s: placed %s, %s, %s", what, got["cap"].Flowspace, got["keep,mod=2"].Flowspace, got["count"].Flowspace)
			}
			// The source's packet i starts with byte(i): what it reads, and
			// what reaches each end, follows.
			even, mod3, read, counted := 0, 0, 0, 0
			for ; capture && read < limit || !capture && counted < limit; read++ {
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
			if got["cap"].Out != uint64(read) || got["keep,mod=2"].Out != uint64(even) || packets(got["count"]) != uint64(mod3) {
				t.Errorf("%s: the source read %d, keep,mod=2 kept %d, count counted %d; want %d, %d and %d",
					what, got["cap"].Out, got["keep,mod=2"].Out, packets(got["count"]), read, even, mod3)
			}
			if b := own.Budget(); b.Counted() != int64(limit) || !b.Spent() {
				t.Errorf("%s: the budget counted %d (spent %v)", what, b.Counted(), b.Spent())
			}
			// The other goes on; the ended request's state does not move.
			seen := state(rt, "count#1").In
			waitUntil(t, what+": the other request reads on", func() bool { return state(rt, "count#1").In > seen })
			if again := byRole(t, own.Functions()); !reflect.DeepEqual(again, got) {
				t.Errorf("%s: the state of the ended request moved:\n%v\nthen\n%v", what, got, again)
			}
			rt.Stop()
			rt.Close()
			checkInvariants(t, what, rt)
		}
	}
}

// byRole returns the functions of the expression of
// TestOwnLimitEndsOneRequest by class, keep by class and mod.
func byRole(t *testing.T, fs []FunctionState) map[string]FunctionState {
	t.Helper()
	out := map[string]FunctionState{}
	for _, f := range fs {
		k := f.Class
		if k == "keep" {
			k = fmt.Sprintf("keep,mod=%v", f.Params["mod"])
		}
		out[k] = f
	}
	if len(out) != 5 {
		t.Fatalf("functions %v", fs)
	}
	return out
}

// TestOwnLimitRefused: a request's own limit is a number of packets,
// counted in one place, and not in a run that has a limit of its own.
func TestOwnLimitRefused(t *testing.T) {
	reg := testRegistry(t)
	for _, tc := range []struct {
		cfg  Config
		opts RequestOptions
		want string
	}{
		{Config{}, RequestOptions{Limit: -1}, "a number of packets"},
		{Config{}, RequestOptions{CaptureLimit: 1 << 31}, "a number of packets"},
		{Config{}, RequestOptions{Limit: 5, CaptureLimit: 5}, "not both"},
		{Config{Limit: 10}, RequestOptions{Limit: 5}, "in a run that has one"},
	} {
		tc.cfg.Registry = reg
		rt := New(tc.cfg)
		_, err := rt.Populate(`(src) > (count)`, tc.opts)
		if err == nil || !IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v in %+v: err %v, want an invalid request saying %q", tc.opts, tc.cfg, err, tc.want)
		}
		rt.Close()
	}
}
