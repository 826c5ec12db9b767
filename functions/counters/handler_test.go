package counters_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/flowgraph"
	_ "github.com/ffpf-go/ffpf/functions/builtin"
)

// TestHandlers calls a counter's handlers through its request: top K is
// the K largest keys with their counts, reset zeroes the window, and a
// request of another flowgroup does not reach the function.
func TestHandlers(t *testing.T) {
	rt := flowgraph.New(flowgraph.Config{})
	defer rt.Close()
	req, err := rt.Populate("(gen,packets=5000,seed=3) > c:(counter,key=dstport)", flowgraph.RequestOptions{Group: "uid:1"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := rt.Populate("(gen,packets=10,seed=9) > (pktcount)", flowgraph.RequestOptions{Group: "uid:2"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := req.Call("c", "top", "3"); err == nil || !strings.Contains(err.Error(), "Instantiate") {
		t.Fatalf("a handler called before Instantiate: %v", err)
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
	top, err := req.Call("c", "top", "3")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(top)
	var entries []struct {
		Key   map[string]any `json:"key"`
		Value uint64         `json:"value"`
	}
	if err := json.Unmarshal(b, &entries); err != nil || len(entries) != 3 {
		t.Fatalf("top 3 = %s (%v)", b, err)
	}
	if entries[0].Value < entries[1].Value || entries[1].Value < entries[2].Value || entries[2].Value == 0 {
		t.Fatalf("top 3 not largest first: %s", b)
	}
	if _, ok := entries[0].Key["dstport"]; !ok {
		t.Fatalf("top's keys name their fields: %s", b)
	}
	st, err := req.Call("c", "summary", "")
	if err != nil || st.(map[string]any)["packets"].(uint64) != 5000 {
		t.Fatalf("summary = %v, %v", st, err)
	}
	if _, err := req.Call("c", "reset", ""); err != nil {
		t.Fatal(err)
	}
	st, _ = req.Call("c", "summary", "")
	if p := st.(map[string]any)["packets"].(uint64); p != 0 {
		t.Fatalf("after reset: %d packets", p)
	}
	if _, err := req.Call("c", "nosuch", ""); err == nil || !strings.Contains(err.Error(), "reset, summary, top") {
		t.Fatalf("an unknown handler: %v", err)
	}
	if _, err := other.Call("c", "top", "3"); err == nil || !strings.Contains(err.Error(), "no function c") {
		t.Fatalf("a request of another flowgroup reached the counter: %v", err)
	}
	if _, err := other.Call("counter#1", "top", "3"); err == nil {
		t.Fatal("a request of another flowgroup reached the counter by its id")
	}
}
