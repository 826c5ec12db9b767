package p4

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/flowspaces"
	_ "github.com/ffpf-go/ffpf/functions/builtin"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// exampleExprs are the expressions of examples/mafia, each fed from the
// switch's port swp1, and the issue's own graph.
func exampleExprs(tb testing.TB) map[string]string {
	tb.Helper()
	files, _ := filepath.Glob("../../examples/mafia/*.ffpf")
	out := map[string]string{"issue19": `(bpf,"tcp") > (cms,key=5tuple) > (hll,key=dstip)`}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		var lines []string
		for _, l := range strings.Split(string(src), "\n") {
			if !strings.HasPrefix(l, "#") {
				lines = append(lines, l)
			}
		}
		expr := strings.ReplaceAll(strings.Join(lines, "\n"), "file=", "file="+tb.TempDir()+"/")
		out[strings.TrimSuffix(filepath.Base(f), ".ffpf")] = expr
	}
	return out
}

// build places expr from swp1 on a switch and builds its share.
func build(tb testing.TB, addr, expr string) (*Flowspace, *Output, error) {
	root, sw := switchUnder(tb, addr, 1)
	rt := flowgraph.New(flowgraph.Config{Hierarchy: root})
	defer rt.Close()
	if _, err := rt.Populate(expr, flowgraph.RequestOptions{DefaultSource: "(dev,swp1)"}); err != nil {
		return nil, nil, err
	}
	nodes := sw.Placed()
	plan := rt.Plan()
	var want []*flowspaces.Node
	for _, n := range nodes {
		for _, f := range plan.Functions {
			for _, in := range f.Inputs {
				if in == n.ID && f.Flowspace != sw.Name() {
					want = append(want, n)
				}
			}
		}
	}
	a, err := sw.Build(nodes, want)
	if err != nil {
		return nil, nil, err
	}
	out, err := a.Output()
	return sw, out, err
}

// largest returns the example whose share on the switch is the largest
// program (lines of P4).
func largest(b *testing.B) (string, string) {
	name, expr, lines := "", "", -1
	exprs := exampleExprs(b)
	for _, n := range slices.Sorted(maps.Keys(exprs)) {
		e := exprs[n]
		_, out, err := build(b, "127.0.0.1:1", e)
		if err != nil {
			b.Logf("%s is not placed: %v", n, err)
			continue
		}
		if out.Printed.Lines > lines {
			name, expr, lines = n, e, out.Printed.Lines
		}
	}
	return name, expr
}

// BenchmarkBuildInstall: the time to build the largest example's program
// for a switch (place, lower, allocate, print, P4Info, device config),
// and to build and install it over P4Runtime on the PISA model (connect,
// arbitrate, SetForwardingPipelineConfig, digests turned on), as
// 'ffpf run --hierarchy' does before its first packet.
func BenchmarkBuildInstall(b *testing.B) {
	name, expr := largest(b)
	_, out, _ := build(b, "127.0.0.1:1", expr)
	b.Logf("largest example: %s, %d functions on the switch, %d lines of P4, %d stages", name,
		len(out.Resources.Functions), out.Printed.Lines, out.Resources.Depth)
	b.Run("build", func(b *testing.B) {
		for range b.N {
			if _, _, err := build(b, "127.0.0.1:1", expr); err != nil {
				b.Fatal(err)
			}
		}
	})
	m := startModel(b, 1, p4gen.Tofino1())
	b.Run("build+install", func(b *testing.B) {
		for range b.N {
			root, _ := switchUnder(b, m.addr, 1)
			rt := flowgraph.New(flowgraph.Config{Hierarchy: root})
			if _, err := rt.Populate(expr, flowgraph.RequestOptions{DefaultSource: "(dev,swp1)"}); err != nil {
				b.Fatal(err)
			}
			// Instantiate connects the switch's flowspace: its program built,
			// pushed and its digests turned on, as ffpf run does.
			if err := rt.Instantiate(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := rt.Close(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
}
