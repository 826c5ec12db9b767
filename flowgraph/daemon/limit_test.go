package daemon

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/flowgraph/daemon/client"
)

// TestSubmitCount: a request submitted with a packet limit of its own
// beside a request for the same expression without one shares none of its
// functions; it sees exactly what ffpf run -c (or --capture-count) sees
// on the same source (exactly N packets at its ends, its reader's tap, and
// not one packet read past the N-th), then it is listed as ended with its
// limit counted and its state final, while the other goes on.
func TestSubmitCount(t *testing.T) {
	const expr = `(gen,packets=0) > (bpf,"tcp") > (pktcount)`
	d := startDaemon(t, Config{})
	c := dial(t, d)
	other, err := c.Submit(client.SubmitArgs{Expr: expr, Keep: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args client.SubmitArgs
		run  flowgraph.Config
		at   string
	}{
		{client.SubmitArgs{Expr: expr, Count: 100}, flowgraph.Config{Limit: 100}, "ends"},
		{client.SubmitArgs{Expr: expr, Count: 1}, flowgraph.Config{Limit: 1}, "ends"},
		{client.SubmitArgs{Expr: expr, CaptureCount: 1000}, flowgraph.Config{CaptureLimit: 1000}, "capture"},
	} {
		what := fmt.Sprintf("count %d, capture_count %d", tc.args.Count, tc.args.CaptureCount)
		own, err := c.Submit(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		st := waitEnded(t, c, own.ID)
		n := tc.args.Count + tc.args.CaptureCount
		if st.Request.State != "ended" || st.Request.Limit == nil || *st.Request.Limit != (client.Limit{Packets: n, At: tc.at, Counted: n}) {
			t.Fatalf("%s: listed as %s with limit %+v", what, st.Request.State, st.Request.Limit)
		}
		l, err := c.List()
		if err != nil {
			t.Fatal(err)
		}
		var mine, others []string
		for _, r := range l.Requests {
			switch r.ID {
			case own.ID:
				mine = r.Functions
				if r.State != "ended" {
					t.Errorf("%s: ls lists it %s", what, r.State)
				}
			case other.ID:
				others = r.Functions
				if r.State != "active" {
					t.Errorf("%s: ls lists the request without a limit %s", what, r.State)
				}
			}
		}
		for _, id := range mine {
			if slices.Contains(others, id) {
				t.Errorf("%s: %s is shared with the request without a limit", what, id)
			}
		}
		// What ffpf run sees with the same limit.
		want := runToEnd(t, tc.run, expr)
		for _, f := range st.Functions {
			if f.Refs != 1 {
				t.Errorf("%s: %s has %d references", what, f.ID, f.Refs)
			}
			if f.In != f.Out+f.Filtered+f.Dropped {
				t.Errorf("%s: %s: in %d != out %d + filtered %d + dropped %d", what, f.ID, f.In, f.Out, f.Filtered, f.Dropped)
			}
			if f.Class == tapClassName {
				if w := want["pktcount"]; f.In != w.Out {
					t.Errorf("%s: the tap got %d packets, want %d", what, f.In, w.Out)
				}
				continue
			}
			w := want[f.Class]
			if f.In != w.In || f.Out != w.Out || f.Filtered != w.Filtered || fmt.Sprint(f.State) != fmt.Sprint(w.State) {
				t.Errorf("%s: %s: in %d out %d filtered %d state %v; ffpf run: in %d out %d filtered %d state %v",
					what, f.ID, f.In, f.Out, f.Filtered, f.State, w.In, w.Out, w.Filtered, w.State)
			}
		}
		if tc.args.Count > 0 && fnByClass(st.Functions, "pktcount")[0].Out != uint64(tc.args.Count) {
			t.Errorf("%s: pktcount passed %d", what, fnByClass(st.Functions, "pktcount")[0].Out)
		}
		if tc.args.CaptureCount > 0 && st.Packets != uint64(tc.args.CaptureCount) {
			t.Errorf("%s: the source read %d", what, st.Packets)
		}
		// The other goes on, and the ended request's state stays.
		o1, _ := c.Stat(other.ID)
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
			o2, err := c.Stat(other.ID)
			if err != nil {
				t.Fatal(err)
			}
			if fnByClass(o2.Functions, "pktcount")[0].In > fnByClass(o1.Functions, "pktcount")[0].In {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the request without a limit stopped", what)
			}
		}
		again, err := c.Stat(own.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(again.Functions, st.Functions) || *again.Request.Limit != *st.Request.Limit {
			t.Errorf("%s: the ended request's state moved:\n%+v\nthen\n%+v", what, st.Functions, again.Functions)
		}
		if err := c.Remove(own.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// runToEnd runs expr as ffpf run does with cfg's limit, and returns its
// functions' final state by class.
func runToEnd(t *testing.T, cfg flowgraph.Config, expr string) map[string]flowgraph.FunctionState {
	t.Helper()
	rt := flowgraph.New(cfg)
	defer rt.Close()
	if _, err := rt.Populate(expr, flowgraph.RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Activate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	out := map[string]flowgraph.FunctionState{}
	for _, f := range rt.Functions() {
		out[f.Class] = f
	}
	return out
}
