package flowgraph

import (
	"context"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/flowspaces/user"
	"github.com/ffpf-go/ffpf/functions"
	_ "github.com/ffpf-go/ffpf/functions/gen"
	_ "github.com/ffpf-go/ffpf/functions/sketch"
)

// TestStateBudgetFollowsRequests: the state of a flowspace's functions
// counts while they are there: a request whose state does not fit beside
// another's fails at populate, and fits once the other is removed; a
// request that failed to populate takes nothing.
func TestStateBudgetFollowsRequests(t *testing.T) {
	root := user.New(user.Options{Name: "user", StateLimit: 16 << 20})
	rt := New(Config{Registry: functions.Default, Hierarchy: root})
	defer rt.Close()
	const big = `(gen,packets=100) > (cms,width=300K,depth=4)` // 9.2 MiB
	a, err := rt.Populate(big, RequestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Activate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, used := root.StateLimit(); used < 300000*4*8 || used > 300000*4*8+4096 {
		t.Errorf("%d bytes counted, want the counters' %d and a few", used, 300000*4*8)
	}
	const other = `(gen,packets=100,seed=2) > (cms,width=250K,depth=3)` // 5.7 MiB
	if _, err := rt.Populate(other+` > (cms,width=1K,depth=1) > (cms,width=1M,depth=4)`, RequestOptions{}); err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Fatalf("a request whose state does not fit: %v", err)
	}
	if _, err := rt.Populate(other+` > (cms,width=1K,depth=1)`, RequestOptions{}); err != nil {
		t.Fatalf("a request that fits beside the first (the failed one took nothing): %v", err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Populate(`(gen,packets=100,seed=3) > (cms,width=300K,depth=2)`, RequestOptions{}); err == nil {
		t.Fatal("a third request fits in a full budget")
	}
	if err := rt.Instantiate(); err != nil { // nothing new: the failed request placed nothing
		t.Fatal(err)
	}
	if err := rt.Remove(a); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Populate(`(gen,packets=100,seed=3) > (cms,width=300K,depth=2)`, RequestOptions{}); err != nil {
		t.Fatalf("once the first request is removed: %v", err)
	}
}
