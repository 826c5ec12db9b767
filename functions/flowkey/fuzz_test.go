package flowkey

import (
	"encoding/json"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/gen"
)

var fuzzLinks = []functions.LinkType{functions.LinkEthernet, functions.LinkLinuxSLL, functions.LinkSLL2,
	functions.LinkRaw, functions.LinkIPv4, functions.LinkIPv6, functions.LinkNull, functions.LinkLoop}

// TestTruncation cuts well-formed frames at every length: a cut frame has no
// key, or the whole frame's key, or that key without its ports.
func TestTruncation(t *testing.T) {
	sp := mustParse(t, "5tuple,vlan,srcmac,dstmac")
	g := gen.New(gen.Config{Seed: 9, Packets: 400, VLAN: 0.3, IPv6: 0.5})
	buf := make([]byte, gen.MaxFrameLen)
	for {
		n, _, _, more := g.Next(buf)
		if !more {
			break
		}
		var full, k Key
		okFull := sp.Extract(functions.LinkEthernet, buf[:n], &full)
		noPorts := full
		noPorts[0] &^= PortsPresent | 0xffff<<SrcPortShift | 0xffff<<DstPortShift
		for l := 0; l <= n; l++ {
			cut := append([]byte(nil), buf[:l]...) // exact capacity: a read past l panics
			ok := sp.Extract(functions.LinkEthernet, cut, &k)
			if ok && (!okFull || k != full && k != noPorts) {
				t.Fatalf("cut at %d of %d: %s, whole frame %v %s", l, n, sp.Format(&k), okFull, sp.Format(&full))
			}
			if l == n && (ok != okFull || k != full) {
				t.Fatal("not stable")
			}
		}
	}
}

func FuzzExtract(f *testing.F) {
	g := gen.New(gen.Config{Seed: 3, Packets: 200, VLAN: 0.3, IPv6: 0.5, Malformed: 0.5})
	buf := make([]byte, gen.MaxFrameLen)
	for i := 0; ; i++ {
		n, _, _, more := g.Next(buf)
		if !more {
			break
		}
		f.Add(uint8(i), append([]byte(nil), buf[:n]...))
	}
	specs := []*Spec{mustParse(f, "5tuple,vlan,srcmac,dstmac"), mustParse(f, "srcip/20/60,dstip/0,proto")}
	f.Fuzz(func(t *testing.T, sel uint8, data []byte) {
		lt := fuzzLinks[int(sel)%len(fuzzLinks)]
		sp := specs[int(sel>>4)%len(specs)]
		pkt := data[:len(data):len(data)]
		var k1, k2 Key
		ok1 := sp.Extract(lt, pkt, &k1)
		ok2 := sp.Extract(lt, pkt, &k2)
		if ok1 != ok2 || k1 != k2 {
			t.Fatal("Extract is not stable")
		}
		var k3 Key
		if ok3 := sp.extract(lt, pkt, &k3); ok3 != ok1 || k3 != k1 {
			t.Fatalf("the fast path gives %v %x, the general one %v %x", ok1, k1, ok3, k3)
		}
		if !ok1 {
			if k1 != (Key{}) {
				t.Fatal("no key but a non-zero Key")
			}
			return
		}
		for i := sp.Words(); i < MaxWords; i++ {
			if k1[i] != 0 {
				t.Fatalf("word %d beyond the spec is set", i)
			}
		}
		if js := sp.AppendJSON(nil, &k1); !json.Valid(js) {
			t.Fatalf("invalid JSON %s", js)
		}
	})
}
