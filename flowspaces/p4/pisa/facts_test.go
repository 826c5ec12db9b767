package pisa

import (
	"testing"

	"github.com/ffpf-go/ffpf/functions/p4gen"
	"github.com/ffpf-go/ffpf/functions/p4gen/p4gentest"
)

// factsProgram sends a packet to port 1 when its ethertype is IPv4's,
// else to port 2; with also, a second ethertype leads the parser to
// the IPv4 state.
func factsProgram(also uint64) *p4gen.Program {
	prog := p4gen.NewProgram("facts")
	if also != 0 {
		st := prog.Parser[0]
		st.Cases = append([]p4gen.Case{{Values: []uint64{also}, Next: "parse_ipv4"}}, st.Cases...)
	}
	etype := p4gen.F("eth_type", "ether_type")
	prog.Ingress = []p4gen.Stmt{
		p4gen.Assign{Dst: p4gen.Std("egress_spec"), X: p4gen.Mux{Cond: p4gen.B(p4gen.Eq, etype, p4gen.C(p4gen.EtherIPv4, 16)),
			Then: p4gen.C(1, 9), Else: p4gen.C(2, 9)}},
	}
	return prog
}

// A residual starts from what every path through the parser to its
// valid headers fixes: an IPv4 packet's ethertype is IPv4's, and the
// test of it folds to a port. When a second ethertype also leads to
// the IPv4 state, the paths disagree and the test stays: packets of
// either ethertype leave by the reference's port.
func TestParserFacts(t *testing.T) {
	var ipv4 []byte
	for _, f := range p4gentest.Frames(5, 200, 20) {
		if len(f) > 54 && f[12] == 8 && f[13] == 0 && f[14] == 0x45 && f[23] == 6 {
			ipv4 = f
			break
		}
	}
	if ipv4 == nil {
		t.Fatal("no IPv4/TCP frame")
	}
	other := append([]byte(nil), ipv4...)
	other[12], other[13] = 0x80, 0x00

	folds := func(m *Model) bool {
		p := m.newPkt()
		m.arrive(&p, p4gen.Arrival{Data: ipv4}, true)
		if err := m.parse(&p); err != nil {
			t.Fatal(err)
		}
		res := m.residual(p.vbits)
		a, ok := res[0].(p4gen.Assign)
		_, k := a.X.(p4gen.Const)
		return ok && k
	}
	for _, also := range []uint64{0, 0x8000} {
		prog := factsProgram(also)
		if err := prog.Validate(); err != nil {
			t.Fatal(err)
		}
		m, err := Load(prog, roomy)
		if err != nil {
			t.Fatal(err)
		}
		if f := folds(m); f != (also == 0) {
			t.Fatalf("second ethertype %#x: the residual's test of the ethertype folds: %v", also, f)
		}
		ref := p4gen.NewSwitch(prog)
		for i, f := range [][]byte{ipv4, other, ipv4, other} {
			want, err := ref.Process(p4gen.Arrival{Data: f, Port: 3})
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.Process(p4gen.Arrival{Data: f, Port: 3})
			if err != nil {
				t.Fatal(err)
			}
			if d := diffResult(want, got); d != "" {
				t.Fatalf("second ethertype %#x, packet %d: %s", also, i, d)
			}
		}
		if m.vars.n == 0 {
			t.Fatal("no variants")
		}
	}
}
