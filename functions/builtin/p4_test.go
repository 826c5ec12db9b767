package builtin_test

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/gen"
	"github.com/ffpf-go/ffpf/functions/internal/p4test"
	"github.com/ffpf-go/ffpf/functions/measure"
	"github.com/ffpf-go/ffpf/functions/p4gen"
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

// MAFIA's Listing 1 on one switch: a match reads, in the pipeline, the
// total a counter before it keeps and the estimate a cms keeps, and passes
// what the same predicate passes on the state the functions' Go halves
// compute with the switch's indexing, packet by packet.
func TestP4NamedStateOnTheSwitch(t *testing.T) {
	ps := p4test.Trace(gen.Config{Seed: 23, Packets: 3000, Malformed: 0.05, IPv6: 0.3, Flows: 40})
	exprs := []string{"(counter,value=bytes)", "(cms,key=5tuple,value=bytes,width=64,depth=3)", `(match,"nbytes.min > 0.01 * total.value")`}
	labels := []string{"total", "nbytes", ""}
	var nodes []p4gen.Node
	var fns []p4test.Fn
	for i, e := range exprs {
		fn := p4test.Parse(t, e)
		fns = append(fns, fn)
		code, err := fn.P4(fmt.Sprintf("f#%d", i+1))
		if err != nil {
			t.Fatalf("%s: %v", e, err)
		}
		n := p4gen.Node{ID: fmt.Sprintf("f#%d", i+1), Label: labels[i], Fn: code}
		if i > 0 {
			n.Inputs = []int{i - 1}
		}
		nodes = append(nodes, n)
	}
	prog, _, err := p4gen.Assemble("listing1", nodes, p4test.Uplink)
	if err != nil {
		t.Fatal(err)
	}
	p4test.Check(t, prog)
	out, _ := p4test.RunSwitch(t, p4test.Install(prog), ps)

	// In Go: the writers' halves for the switch, then the match reading
	// them, one packet at a time (the switch reads the state as each
	// packet leaves it).
	writers := map[string]functions.Function{}
	var gofns []functions.Function
	for i, fn := range fns {
		ctx := fn.Context(fmt.Sprintf("f#%d", i+1), functions.TargetP4)
		if i == 2 {
			ctx = fn.Context("f#3", "")
			ctx.StateOf = func(l string) (functions.Function, bool) { f, ok := writers[l]; return f, ok }
		}
		f, err := fn.Class.New(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if labels[i] != "" {
			writers[labels[i]] = f
		}
		gofns = append(gofns, f)
	}
	passed := 0
	for i := range ps {
		var pass bool
		for _, f := range gofns {
			pass = p4test.RunGo(t, f, ps[i:i+1])[0]
		}
		if pass != out[i] {
			t.Fatalf("packet %d: the switch passes it %v, the Go halves %v", i, out[i], pass)
		}
		if pass {
			passed++
		}
	}
	if passed < 50 || passed > len(ps)-50 {
		t.Errorf("%d of %d packets pass: the test compares too little", passed, len(ps))
	}
	t.Logf("%d of %d packets of heavy flows pass", passed, len(ps))
}
