package p4gen_test

import (
	"bytes"
	"testing"

	"github.com/ffpf-go/ffpf/functions/gen"
	"github.com/ffpf-go/ffpf/functions/internal/p4test"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// The standard program validates, and its parser and deparser give back
// every frame as it came, cut anywhere or malformed: what is extracted is
// emitted in order, and the rest follows as payload.
func TestStdParserRoundTrip(t *testing.T) {
	p := p4gen.NewProgram("std")
	p.Ingress = []p4gen.Stmt{p4gen.Assign{Dst: p4gen.Std("egress_spec"), X: p4gen.C(1, 9)}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	s := p4gen.NewSwitch(p)
	frames := p4test.Cuts(p4test.Adversarial())
	for _, pk := range p4test.Trace(gen.Config{Seed: 3, Packets: 3000, Malformed: 0.2, VLAN: 0.2, IPv6: 0.3}) {
		frames = append(frames, pk.Data)
	}
	for _, f := range frames {
		r, err := s.Process(p4gen.Arrival{Data: f, Port: 2})
		if err != nil {
			t.Fatalf("% x: %v", f, err)
		}
		if len(r.Out) != 1 || !bytes.Equal(r.Out[0].Data, f) {
			t.Fatalf("% x came out as %+v", f, r.Out)
		}
	}
}

// A frame cut inside a header keeps the chunks before the cut: a 24-byte
// IPv4 frame has its protocol, and one cut inside the source address its
// first two bytes, which libpcap reads as the ports of a frame of IHL 3.
func TestStdChunksKeepWhatIsCaptured(t *testing.T) {
	p := p4gen.NewProgram("std")
	proto, pv := p4gen.Hdr("ipv4.proto")
	ttl, tv := p4gen.Hdr("ipv4.ttl")
	got := p4gen.Ref{Path: "meta.got", Bits: 16}
	p.Metadata = append(p.Metadata, p4gen.Field{Name: "got", Bits: 16})
	p.Ingress = []p4gen.Stmt{
		p4gen.If{Cond: pv, Then: []p4gen.Stmt{p4gen.Assign{Dst: got, X: p4gen.Concat(ttl, proto)}}},
		p4gen.If{Cond: p4gen.AllOf(tv, p4gen.B(p4gen.Eq, p4gen.Cast{Bits: 8, X: got}, p4gen.C(6, 8))),
			Then: []p4gen.Stmt{p4gen.Assign{Dst: p4gen.Std("egress_spec"), X: p4gen.C(1, 9)}},
			Else: []p4gen.Stmt{p4gen.MarkToDrop{}}},
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	s := p4gen.NewSwitch(p)
	f := append(p4test.Eth(0x0800), p4test.IPv4(3, 6, 0, [4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}, nil)...)
	for n := 20; n <= len(f); n++ {
		r, _ := s.Process(p4gen.Arrival{Data: f[:n], Port: 2})
		if want := n >= 24; (len(r.Out) == 1) != want {
			t.Errorf("cut at %d: out %v, want %v", n, len(r.Out) == 1, want)
		}
	}
}
