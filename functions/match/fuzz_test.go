package match

import (
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

// FuzzParse: any text either fails to parse or check with an error, or
// compiles into a predicate that evaluates on any frame without panicking.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"tcp.dport == 80", "ipv4.src in 10.0.0.0/8 and not (udp or pkt.len > 1.5KB)",
		"nbytes.min > 0.01 * total.value", "ipv6.dst == ::1 || eth.src == 00:11:22:33:44:55", "-(-1) % 0x10 & 3 >= 100ms / 2",
		"((((", "1e5 > 3", "a.b", ":::", "1.2.3.4/33", "x in ::/0"} {
		f.Add(s)
	}
	frame := cat(eth(0x800, 5), ip4(6, 0, tcp(1, 2, 3)))
	p := buffers.NewPBuf(1, 256)
	p.Store(0, frame, uint32(len(frame)), 0, 0)
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parse(s)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("%q: error %T", s, err)
			}
			return
		}
		n.labels(nil)
		if _, err := compile(n, checkState); err != nil {
			return
		}
		m, err := Compile(s, functions.LinkEthernet)
		if err != nil {
			return // reads named state
		}
		m.Eval(p, 0)
	})
}

// FuzzFrame: a predicate over every field reads nothing beyond the
// captured bytes of any frame, of any link type.
func FuzzFrame(f *testing.F) {
	f.Add(cat(eth(0x800, 5, 6), ip4(6, 0, tcp(1, 2, 3))), uint8(0))
	f.Add(cat(eth(0x86dd), ip6(0, cat(ext(44), ext(6), tcp(1, 2, 3)))), uint8(0))
	f.Add(ip6(58, []byte{128, 0}), uint8(3))
	lts := []functions.LinkType{functions.LinkEthernet, functions.LinkLinuxSLL, functions.LinkSLL2, functions.LinkRaw,
		functions.LinkIPv4, functions.LinkIPv6, functions.LinkNull, functions.LinkLoop}
	ms := make([]*Match, len(lts))
	for i, lt := range lts {
		ms[i] = allFields()
		ms[i].env.lt = lt
	}
	f.Fuzz(func(t *testing.T, frame []byte, lt uint8) {
		if len(frame) > 4096 {
			return
		}
		p := buffers.NewPBuf(1, 4096)
		p.Store(0, frame, uint32(len(frame)), 0, 0)
		ms[int(lt)%len(ms)].Eval(p, 0)
	})
}
