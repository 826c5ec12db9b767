package flowgraph

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/flowspaces"
)

// bigRequest returns an expression of about n functions over the four
// interfaces of fig4: per interface a fork of filter chains that end in
// counts, and joins of branches of two interfaces, so that placement puts
// functions on every level of the hierarchy.
func bigRequest(n int) (string, int) {
	var chains []string
	fns := 4 // the sources, shared by every chain that names them
	ifaces := []string{"eth0", "eth1", "eth2", "eth3"}
	for i := 0; fns < n; i++ {
		a, b := ifaces[i%4], ifaces[(i+1)%4]
		// Four filters, a join and a count.
		chains = append(chains, fmt.Sprintf(
			"[(cap,if=%s) > (keep,mod=7,at=%d) > (keep,mod=3,at=%d) | (cap,if=%s) > (keep,mod=5,at=%d) > (mod3)] > (keep,mod=11,at=%d) > (count,tag=c%d)",
			a, i, i, b, i, i, i))
		fns += 6
	}
	return strings.Join(chains, "; "), fns
}

// BenchmarkPlace1000 parses, places and instantiates (functions, buffers,
// routes and bridges) a flowgraph of 1,000 functions on a four-level
// hierarchy. The target is under 50 ms.
func BenchmarkPlace1000(b *testing.B) {
	expr, n := bigRequest(1000)
	reg := placeRegistry(b)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		rt := New(Config{Registry: reg, Hierarchy: tree(b, reg, fig4, 1)})
		b.StartTimer()
		if _, err := rt.Populate(expr, RequestOptions{}); err != nil {
			b.Fatal(err)
		}
		if err := rt.Instantiate(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		rt.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N), "ms/graph")
	b.ReportMetric(float64(n), "functions")
}

// TestPlace1000 checks that the benchmark's graph is what it claims: about
// 1,000 functions, on every level of the hierarchy, and that it runs.
func TestPlace1000(t *testing.T) {
	expr, n := bigRequest(1000)
	reg := placeRegistry(t)
	rt := New(Config{Registry: reg, Hierarchy: tree(t, reg, fig4, 2000)})
	if _, err := rt.Populate(expr, RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	fns := rt.Plan().Functions
	if len(fns) != n || n < 1000 {
		t.Fatalf("%d functions, want %d >= 1000", len(fns), n)
	}
	levels := map[string]int{}
	for _, f := range fns {
		levels[f.Flowspace]++
	}
	for _, fs := range []string{"user", "kernel", "ixp0", "me0", "nic0", "nic1"} {
		if levels[fs] == 0 {
			t.Errorf("nothing placed in %s: %v", fs, levels)
		}
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Activate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	rt.Close()
	for _, f := range rt.Functions() {
		if f.In != f.Out+f.Filtered+f.Dropped {
			t.Fatalf("%s: in %d != out %d + filtered %d + dropped %d", f.ID, f.In, f.Out, f.Filtered, f.Dropped)
		}
	}
}

// BenchmarkBridge measures the cost of crossing a barrier: a board that
// filters (even: half the packets pass) under userspace that processes
// what passes. "local" runs both in the board (nothing crosses), the
// others carry the filtered packets up by reference or by a copy.
func BenchmarkBridge(b *testing.B) {
	const packets = 1 << 20
	for _, mode := range []struct {
		name     string
		classes  []string
		strategy flowspaces.Strategy
	}{
		{"local", []string{"even", "all"}, flowspaces.ZeroCopy},
		{"zerocopy", []string{"even"}, flowspaces.ZeroCopy},
		{"copyonce", []string{"even"}, flowspaces.CopyOnce},
	} {
		b.Run(mode.name, func(b *testing.B) {
			reg := placeRegistry(b)
			def := fsDef{name: "user", kids: []fsDef{{name: "board", classes: mode.classes, ifaces: []string{"eth0"}, strategy: mode.strategy}}}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				rt := New(Config{Registry: reg, Hierarchy: tree(b, reg, def, packets)})
				if _, err := rt.Populate(`(cap,if=eth0) > (even) > (all)`, RequestOptions{}); err != nil {
					b.Fatal(err)
				}
				if err := rt.Instantiate(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				rt.Activate(context.Background())
				if err := rt.Wait(); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				rt.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.N)*packets/b.Elapsed().Seconds()/1e6, "Mpps")
		})
	}
}
