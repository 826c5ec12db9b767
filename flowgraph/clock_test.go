package flowgraph

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/user"
	"github.com/ffpf-go/ffpf/functions"
	_ "github.com/ffpf-go/ffpf/functions/bpf"
	_ "github.com/ffpf-go/ffpf/functions/counters"
	_ "github.com/ffpf-go/ffpf/functions/dev"
	_ "github.com/ffpf-go/ffpf/functions/export"
	"github.com/ffpf-go/ffpf/functions/gen"
)

// TestWindowsEndAboveAFilterThatPassesNothing: a board filters every
// packet of its interface, so nothing crosses its bridge; the windows of a
// counter above still end on the packet clock, because each batch's clock
// crosses in a clock-only message: one record per window of the trace's
// 100 ms, each with no packet, and every function and bridge keeps
// in = out + filtered + dropped (clock messages are not packets).
func TestWindowsEndAboveAFilterThatPassesNothing(t *testing.T) {
	reg := functions.Default
	src, _ := reg.Lookup("gen")
	params, err := src.Bind([]functions.Arg{{Key: "packets", Value: functions.Raw{Kind: functions.RawNumber, Text: "100000"}}})
	if err != nil {
		t.Fatal(err)
	}
	root := user.New(user.Options{Name: "user"})
	nic := user.New(user.Options{Name: "nic0", Kind: flowspaces.KindTest, Classes: []string{"dev", "bpf"},
		Interfaces: map[string]*user.Traffic{"eth0": {Term: "(gen)", Class: src, Params: params}}})
	if _, err := flowspaces.Attach(root, nic, "test", flowspaces.CopyOnce); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "w.jsonl")
	rt := New(Config{Registry: reg, Hierarchy: root})
	defer rt.Close()
	if _, err := rt.Populate(`(dev,eth0) > (bpf,"ether proto 0x88b5") > (counter,window=10ms,report=1) > (export,format=jsonl,file=`+out+`)`, RequestOptions{}); err != nil {
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
	st := stateByID(rt)
	if f := st["bpf#1"]; f.Flowspace != "nic0" || f.In != 100000 || f.Filtered != 100000 {
		t.Fatalf("bpf#1 in %s: in %d, filtered %d; want nic0, every packet filtered", f.Flowspace, f.In, f.Filtered)
	}
	if f := st["counter#1"]; f.Flowspace != "user" || f.In != 0 {
		t.Fatalf("counter#1 in %s got %d packets, want user and none", f.Flowspace, f.In)
	}
	checkInvariants(t, "clock-only", rt)
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var starts []int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec struct {
			TS      int64  `json:"ts"`
			Packets uint64 `json:"packets"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		if rec.Packets != 0 {
			t.Errorf("a window counted %d packets, want 0: %s", rec.Packets, sc.Text())
		}
		starts = append(starts, rec.TS)
	}
	// gen's trace: 100,000 packets at 1 Mpps from DefaultStart, 100 ms.
	first := gen.DefaultStart.UnixNano()
	if len(starts) != 10 {
		t.Fatalf("%d window records, want 10 (every 10 ms of the trace's 100 ms): %v", len(starts), starts)
	}
	for i, s := range starts {
		if want := first + int64(i)*10e6; s != want {
			t.Errorf("window %d starts at %d, want %d", i, s, want)
		}
	}
}
