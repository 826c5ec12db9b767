package flowgraph

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/ffpf-go/ffpf/functions/gen"
)

// TestChurnReleasesMemory: a flowgraph that runs for ever while requests
// come and go (a service) keeps nothing of those that went. Each request
// here reads a capture file to its end; before, every source ever run
// stayed reachable (its worker's context registered with the flowspace's,
// its stream's end in the flowspace's maps): 1.3 MB a request.
func TestChurnReleasesMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	gen.WritePcap(f, gen.Config{Packets: 100, Seed: 1}, 65535)
	f.Close()
	rt := New(Config{})
	defer rt.Close()
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	var h0 uint64
	for i := range 300 {
		if i == 50 {
			h0 = heap()
		}
		r, err := rt.Populate(fmt.Sprintf(`(bpf,"tcp or port %d") > (pktcount)`, i%7), RequestOptions{DefaultSource: `(pcap,file="` + path + `")`})
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.Instantiate(); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := rt.Activate(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		for ended := false; !ended; ended, _ = r.Ended() {
			runtime.Gosched()
		}
		if err := rt.Remove(r); err != nil {
			t.Fatal(err)
		}
	}
	if h1 := heap(); h1 > h0+32<<20 {
		t.Errorf("250 requests that came and went grew the heap from %d to %d MB", h0>>20, h1>>20)
	}
}
