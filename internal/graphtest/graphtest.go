// Package graphtest runs a flowgraph expression to its end for tests: the
// populate, instantiate, activate and wait that a test of a graph's
// results goes through, failing the test at the first error; and reads
// back the capture files such a graph writes.
package graphtest

import (
	"context"
	"os"
	"testing"

	"github.com/google/gopacket/pcapgo"

	"github.com/ffpf-go/ffpf/flowgraph"
)

// Run runs expr in a runtime of its own, in userspace, until its sources
// end, and returns the runtime, closed when the test ends (its functions'
// state stays readable until then).
func Run(t testing.TB, expr string) *flowgraph.Runtime {
	t.Helper()
	rt := flowgraph.New(flowgraph.Config{})
	t.Cleanup(func() { rt.Close() })
	if _, err := rt.Populate(expr, flowgraph.RequestOptions{}); err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	if err := rt.Activate(context.Background()); err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	if err := rt.Wait(); err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return rt
}

// ReadPcap reads the packets of a classic pcap file and their times (ns
// since the Unix epoch).
func ReadPcap(t testing.TB, path string) (data [][]byte, ts []int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for {
		d, ci, err := r.ReadPacketData()
		if err != nil {
			return data, ts
		}
		data, ts = append(data, d), append(ts, ci.Timestamp.UnixNano())
	}
}
