package builtin_test

import (
	"bytes"
	"math"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/gen"
	"github.com/ffpf-go/ffpf/functions/internal/p4test"
	"github.com/ffpf-go/ffpf/functions/measure"
)

// The graph, (bpf,"tcp") > (cms,key=5tuple) > (hll,key=dstip),
// on one switch: the filter passes what libpcap passes, and the sketches
// behind it keep what their Go halves compute on the packets that passed,
// with cms's total and the distinct destinations within HyperLogLog's
// bound of the exact answer.
func TestP4HeadlineGraph(t *testing.T) {
	ps := p4test.Trace(gen.Config{Seed: 19, Packets: 6000, Malformed: 0.1, VLAN: 0.2, IPv6: 0.3, Flows: 3000})
	fns := []p4test.Fn{p4test.Parse(t, `(bpf,"tcp")`), p4test.Parse(t, "(cms,key=5tuple)"), p4test.Parse(t, "(hll,key=dstip)")}
	s, _ := p4test.Switch(t, fns...)
	out, _ := p4test.RunSwitch(t, s, ps)

	// Userspace, function by function on what the one before passed.
	filter, err := fns[0].Class.New(fns[0].Context("f#1", ""))
	if err != nil {
		t.Fatal(err)
	}
	pass := p4test.RunGo(t, filter, ps)
	var tcp []p4test.Packet
	for i, p := range ps {
		if pass[i] {
			tcp = append(tcp, p)
		}
		if out[i] != pass[i] {
			t.Fatalf("packet %d: the switch passes it %v, userspace %v", i, out[i], pass[i])
		}
	}
	if len(tcp) < 1000 || len(tcp) == len(ps) {
		t.Fatalf("%d of %d packets are TCP", len(tcp), len(ps))
	}
	for i, fn := range fns[1:] {
		id := []string{"f#2", "f#3"}[i]
		got, err := fn.Class.New(fn.Context(id, functions.TargetP4))
		if err != nil {
			t.Fatal(err)
		}
		p4test.Fill(t, s, id, got.(functions.Stateful).MBuf())
		model, err := fn.Class.New(fn.Context(id, functions.TargetP4))
		if err != nil {
			t.Fatal(err)
		}
		p4test.RunGo(t, model, tcp)
		if !bytes.Equal(got.(functions.Stateful).MBuf().Bytes(), model.(functions.Stateful).MBuf().Bytes()) {
			t.Errorf("%s: the switch's state differs from its Go half's on the TCP packets", fn.Expr)
		}
		user, err := fn.Class.New(fn.Context(id, ""))
		if err != nil {
			t.Fatal(err)
		}
		p4test.RunGo(t, user, tcp)
		gs, us := got.(functions.Summarizer).Summary(), user.(functions.Summarizer).Summary()
		if gs["nokey"] != us["nokey"] || gs["total"] != us["total"] {
			t.Errorf("%s: nokey %v, total %v on the switch; %v, %v in userspace", fn.Expr, gs["nokey"], gs["total"], us["nokey"], us["total"])
		}
		if fn.Class.Name == "hll" {
			sp := measure.Spec(fn.Params)
			distinct := map[flowkey.Key]bool{}
			var k flowkey.Key
			for _, p := range tcp {
				if sp.Extract(functions.LinkEthernet, p.Data, &k) {
					distinct[k] = true
				}
			}
			n, est := float64(len(distinct)), gs["estimate"].(float64)
			if math.Abs(est-n) > 3*1.04/math.Sqrt(1<<14)*n {
				t.Errorf("hll: estimate %v of %v distinct destinations", est, n)
			}
		}
	}
}
