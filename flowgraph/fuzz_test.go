package flowgraph_test

import (
	"testing"

	"github.com/ffpf-go/ffpf/flowgraph"
)

// FuzzPopulate drives the whole control path — parser, checker, graph
// builder, parameter binding, filter compilation, overlay, canonical form —
// with hostile expressions: it must never panic, and whatever populates must
// populate again from its canonical form.
func FuzzPopulate(f *testing.F) {
	for _, s := range []string{
		`[[(dev,expr=eth0)|(dev,expr=eth1)] > (BPF,expr="tcp and dst port 80")] > [(pktcount)|(bytecount)]`,
		`x:(gen,packets=5K,seed=2) > [(bpf,"tcp") | (bpf,"udp")] > (pktcount); x > (bytecount)`,
		`(bpf,expr="vlan and ip6") > (export,file=out.pcap)`,
		`(gen,malformed=0.5,vlan=1,ipv6=0.5,flows=3) > (pktcount) > (bytecount)`,
		`a:(bpf,"tcp") > b:(pktcount); b > a`,
		`[(gen)|(gen,seed=3)] > (bpf,"len > 100")`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		rt := flowgraph.New(flowgraph.Config{})
		req, err := rt.Populate(expr, flowgraph.RequestOptions{Unfed: true})
		if err != nil {
			if !flowgraph.IsInvalid(err) {
				t.Fatalf("%q: populate error %v is not a validation error", expr, err)
			}
			return
		}
		canon := req.Canonical()
		rt2 := flowgraph.New(flowgraph.Config{})
		req2, err := rt2.Populate(canon, flowgraph.RequestOptions{Unfed: true})
		if err != nil {
			t.Fatalf("%q populates but its canonical form %q does not: %v", expr, canon, err)
		}
		if len(req2.Functions()) != len(req.Functions()) || req2.Canonical() != canon {
			t.Fatalf("%q: canonical form %q is not stable (%q)", expr, canon, req2.Canonical())
		}
	})
}
