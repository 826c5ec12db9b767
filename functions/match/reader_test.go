package match

import (
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

// Fields reads the values the predicates compare, and says which are
// absent, without allocating.
func TestFieldsReader(t *testing.T) {
	r, err := NewFields(functions.LinkEthernet, "ipv4.src", "tcp.dport", "udp.dport", "pkt.len")
	if err != nil {
		t.Fatal(err)
	}
	p := buffers.NewPBuf(2, 4096)
	tcp4 := cat(eth(0x800), ip4(6, 0, tcp(1234, 80, 0x12)))
	p.Store(0, tcp4, uint32(len(tcp4)), 1, 0)
	p.Store(1, tcp4[:20], uint32(len(tcp4)), 1, 0) // cut inside IPv4
	r.Set(p, 0)
	for i, want := range []int64{0x0a010203, 80, -1, 54} {
		v, ok := r.Int(i)
		if ok != (want >= 0) || ok && v != want {
			t.Errorf("field %d = %d %v, want %d", i, v, ok, want)
		}
	}
	r.Set(p, 1)
	if _, ok := r.Int(0); ok {
		t.Error("ipv4.src of a cut packet")
	}
	if v, ok := r.Int(3); !ok || v != 54 {
		t.Errorf("pkt.len of the cut packet = %d", v)
	}
	if a := testing.AllocsPerRun(100, func() { r.Set(p, 0); r.Int(0); r.Int(1) }); a != 0 {
		t.Errorf("%v allocations", a)
	}
	for name, msg := range map[string]string{"ipv4.srcc": "did you mean ipv4.src", "ipv6.src": "128-bit", "zzz": "fields are"} {
		if _, err := NewFields(functions.LinkEthernet, name); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
