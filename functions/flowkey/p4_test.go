package flowkey_test

import (
	"fmt"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/gen"
	"github.com/ffpf-go/ffpf/functions/internal/p4test"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// keyDigest is a function that lowers a key and sends it, its hash with
// a salt and whether the packet has one, as a digest.
type keyDigest struct {
	sp   *flowkey.Spec
	salt uint32
}

func (d keyDigest) Lower(b *p4gen.Builder) error {
	k := d.sp.LowerP4(b)
	h := b.Meta("h", 32)
	b.Add(k.Hash(h, d.salt, 0))
	fields := []p4gen.Field{{Name: "has", Bits: 1}, {Name: "h", Bits: 32}}
	vals := []p4gen.Expr{k.Has, h}
	for i, w := range k.Words {
		fields = append(fields, p4gen.Field{Name: fmt.Sprint("w", i), Bits: 64})
		vals = append(vals, w)
	}
	b.Add(p4gen.Digest{Type: b.Digest("key", fields), Values: vals})
	return nil
}

// The key a switch computes is the key Extract computes, word for word,
// and no key exactly when Extract has none, on every adversarial frame cut
// at every length and on generated traffic with VLAN tags, IPv6 and
// malformed frames; its hash is P4Hash.
func TestP4KeysEqualExtract(t *testing.T) {
	frames := p4test.Cuts(p4test.Adversarial())
	for _, p := range p4test.Trace(gen.Config{Seed: 7, Packets: 2000, Malformed: 0.25, VLAN: 0.3, IPv6: 0.4}) {
		frames = append(frames, p.Data)
	}
	specs := []string{"5tuple", "srcip/24,dstport", "dstip", "vlan", "srcmac,dstmac", "proto", "srcip/30/64,dstip/0",
		"dstip/20/100,srcport,vlan", "srcport,dstport,proto,vlan,srcmac"}
	for _, s := range specs {
		sp, err := flowkey.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		p, _, err := p4gen.Assemble("k", []p4gen.Node{{ID: "k#1", Fn: keyDigest{sp, 0x9e3779b9}}}, 1)
		if err != nil {
			t.Fatal(err)
		}
		sw := p4gen.NewSwitch(p)
		keys, none := 0, 0
		for _, f := range frames {
			r, err := sw.Process(p4gen.Arrival{Data: f, Port: 2})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Digests) != 1 {
				t.Fatalf("%s: %d digests", s, len(r.Digests))
			}
			got := r.Digests[0].Values
			var k flowkey.Key
			ok := sp.Extract(functions.LinkEthernet, f, &k)
			if (got[0] == 1) != ok {
				t.Fatalf("%s: % x: switch has a key %v, Extract %v", s, f, got[0] == 1, ok)
			}
			if !ok {
				none++
				continue
			}
			keys++
			for i := range sp.Words() {
				if got[2+i] != k[i] {
					t.Fatalf("%s: % x: word %d is %#x on the switch, %#x by Extract", s, f, i, got[2+i], k[i])
				}
			}
			if h := sp.P4Hash(&k, 0x9e3779b9); got[1] != uint64(h) {
				t.Fatalf("%s: % x: hash %#x on the switch, P4Hash %#x", s, f, got[1], h)
			}
		}
		if keys < 1000 || none < 100 {
			t.Errorf("%s: %d frames with a key, %d without: too few to compare", s, keys, none)
		}
	}
}
