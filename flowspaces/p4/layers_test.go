package p4

import (
	"testing"

	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/user"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// A function whose lowering needs the transport walk after one that put
// only the layers in the program (match, then a 5-tuple key): the walk
// goes between the layers and the first function's statements, which
// the switch takes (MAFIA's heavy hitters begin so: match(pkt.input_port
// == 1) >> … >> nbytes.set(…)). It was refused as a rewrite of the
// statements before it.
func TestTransportWalkAfterLayers(t *testing.T) {
	prof := p4gen.Tofino1()
	prof.Stages = 24
	root := user.New(user.Options{Name: "user"})
	sw, err := New(Options{Name: "tor", Address: "127.0.0.1:1", DeviceID: 1, UplinkCPU: true,
		Ports: map[string]uint16{"swp1": 2}, Profile: prof})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := flowspaces.Attach(root, sw, "CPU port", flowspaces.CopyOnce); err != nil {
		t.Fatal(err)
	}
	rt := flowgraph.New(flowgraph.Config{Hierarchy: root})
	defer rt.Close()
	if _, err := rt.Populate(`(match,"pkt.len > 0") > (cms,key=5tuple,width=256,depth=4)`,
		flowgraph.RequestOptions{DefaultSource: "(dev,swp1)"}); err != nil {
		t.Fatal(err)
	}
	for _, f := range rt.Plan().Functions {
		if f.Class == "cms" && f.Flowspace != "tor" {
			t.Fatalf("cms runs in %s (passed over %v), not on the switch", f.Flowspace, f.PassedOver)
		}
	}
}
