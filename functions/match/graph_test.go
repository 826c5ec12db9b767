package match_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/functions"
	_ "github.com/ffpf-go/ffpf/functions/builtin"
	"github.com/ffpf-go/ffpf/functions/gen"
	"github.com/ffpf-go/ffpf/functions/match"
)

// run runs expr and returns its functions' states by id.
func run(t *testing.T, expr string) map[string]flowgraph.FunctionState {
	t.Helper()
	rt := flowgraph.New(flowgraph.Config{})
	defer rt.Close()
	if _, err := rt.Populate(expr, flowgraph.RequestOptions{}); err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	if err := rt.Activate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	out := map[string]flowgraph.FunctionState{}
	for _, f := range rt.Functions() {
		out[f.ID] = f
	}
	return out
}

// exact counts the packets of the gen trace cfg that pred accepts.
func exact(t *testing.T, cfg gen.Config, pred string) uint64 {
	m, err := match.Compile(pred, functions.LinkEthernet)
	if err != nil {
		t.Fatal(err)
	}
	g := gen.New(cfg)
	p := buffers.NewPBuf(1, 2048)
	buf := make([]byte, 2048)
	var n uint64
	for {
		c, w, ts, ok := g.Next(buf)
		if !ok {
			return n
		}
		p.Store(0, buf[:c], uint32(w), ts, 0)
		if m.Eval(p, 0) {
			n++
		}
	}
}

func TestGraph(t *testing.T) {
	cfg := gen.Config{Seed: 4, Packets: 20000, VLAN: 0.1, IPv6: 0.3, Malformed: 0.1}
	pred := "tcp.dport == 443 or ipv6 and udp.len > 100"
	want := exact(t, cfg, pred)
	st := run(t, `(gen,packets=20000,seed=4,vlan=0.1,ipv6=0.3,malformed=0.1) > total:(counter) > (match,"total.packets >= 1 and (`+pred+`)") > (pktcount)`)
	if m := st["match#1"]; m.In != 20000 || m.Out != want || m.Filtered != 20000-want || want == 0 {
		t.Errorf("match: %+v, want out %d", m, want)
	}
	// A function that reads the state of one before it on its route sees
	// it as the writer left it after the packet at hand (MAFIA's
	// per-packet pipeline), whatever the batch size: the packets pass
	// while the counter's bytes, this packet's included, stay below 1 KB.
	var below uint64
	g := gen.New(gen.Config{Seed: 1, Packets: 20000})
	buf := make([]byte, 2048)
	for sum := uint64(0); ; {
		_, w, _, ok := g.Next(buf)
		if !ok {
			break
		}
		if sum += uint64(w); sum < 1024 {
			below++
		}
	}
	st = run(t, `(gen,packets=20000,seed=1) > total:(counter,value=bytes) > (match,"total.value < 1KB or total.packets == 0") > (pktcount)`)
	if m := st["match#1"]; m.Out != below || m.In != 20000 || below == 0 {
		t.Errorf("match: %+v, want out %d", m, below)
	}
}

func TestGraphErrors(t *testing.T) {
	for expr, want := range map[string]string{
		`(gen) > (match,"x.value > 1") > (pktcount)`:                         `no function of this request is labelled "x"`,
		`(gen) > (match,"tcp.dprot == 1")`:                                   "did you mean tcp.dport?",
		`(gen) > (match,"total.value > 1") > total:(counter)`:                "cycle",
		`(gen) > total:(counter,report=3,key=srcip) > (match,"pkt.len > 1")`: "records",
		`(gen) > total:(counter) > (match,"total.bytse > 1") > (pktcount)`:   "did you mean total.bytes?",
	} {
		rt := flowgraph.New(flowgraph.Config{})
		_, err := rt.Populate(expr, flowgraph.RequestOptions{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", expr, err, want)
		}
		rt.Close()
	}
	// A writer whose class does not list its readable names fails at
	// instantiation when it is not readable.
	for expr, want := range map[string]string{
		`(gen,packets=10) > x:(pktcount) > (match,"x.packets > 1")`: "has no state a predicate can read",
	} {
		rt := flowgraph.New(flowgraph.Config{})
		if _, err := rt.Populate(expr, flowgraph.RequestOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := rt.Instantiate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: instantiate: %v, want an error with %q", expr, err, want)
		}
		rt.Close()
	}
}
