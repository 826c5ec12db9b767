package flowkey_test

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/gen"
	"github.com/ffpf-go/ffpf/functions/internal/p4test"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// keyDigest is a function that lowers a key and sends it, its hash with
// a salt and whether the packet has one, as a digest.
type keyDigest struct{ sp *flowkey.Spec }

func (d keyDigest) Lower(b *p4gen.Builder) error {
	k := d.sp.LowerP4(b)
	h1, h2 := k.Hashes(b)
	pos := flowkey.Positions(b, h1, h2, "pos", 3, 11)
	fields := []p4gen.Field{{Name: "has", Bits: 1}, {Name: "h1", Bits: 32}, {Name: "h2", Bits: 16}, {Name: "p2", Bits: 32}}
	vals := []p4gen.Expr{k.Has, h1, h2, pos[2]}
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
// malformed frames; its hashes and positions are P4Hashes' and P4Index's.
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
		p, _, err := p4gen.Assemble("k", []p4gen.Node{{ID: "k#1", Fn: keyDigest{sp}}}, 1)
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
				if got[4+i] != k[i] {
					t.Fatalf("%s: % x: word %d is %#x on the switch, %#x by Extract", s, f, i, got[4+i], k[i])
				}
			}
			h1, h2 := sp.P4Hashes(&k)
			if got[1] != uint64(h1) || got[2] != uint64(h2) || got[3] != uint64(flowkey.P4Index(h1, h2, 2, 11)) {
				t.Fatalf("%s: % x: hashes %#x %#x, position %d on the switch; P4Hashes %#x %#x, P4Index %d",
					s, f, got[1], got[2], got[3], h1, h2, flowkey.P4Index(h1, h2, 2, 11))
			}
		}
		if keys < 1000 || none < 100 {
			t.Errorf("%s: %d frames with a key, %d without: too few to compare", s, keys, none)
		}
	}
}

// Why a switch's rows are not salted CRCs: crc32(salt ‖ key) xor
// crc32(salt′ ‖ key) is the same for every key, so two keys that meet in
// one salted row meet in all. The rows P4Index gives differ: of the pairs
// of keys that meet in row 0, about 1/width meet in row 1 too.
func TestSaltedCRCsCollideTogether(t *testing.T) {
	sp, _ := flowkey.Parse("5tuple")
	var keys []flowkey.Key
	for _, p := range p4test.Trace(gen.Config{Seed: 2, Packets: 3000, Flows: 3000}) {
		var k flowkey.Key
		if sp.Extract(functions.LinkEthernet, p.Data, &k) {
			keys = append(keys, k)
		}
	}
	salted := func(salt uint32, k *flowkey.Key) uint32 {
		b := binary.BigEndian.AppendUint32(nil, salt)
		for _, w := range k[:sp.Words()] {
			b = binary.BigEndian.AppendUint64(b, w)
		}
		return crc32.ChecksumIEEE(b)
	}
	d := salted(1, &keys[0]) ^ salted(2, &keys[0])
	for i := range keys {
		if salted(1, &keys[i])^salted(2, &keys[i]) != d {
			t.Fatal("salted CRCs differ by more than a constant")
		}
	}
	const bits = 8
	row := make([][2]uint32, len(keys))
	for i := range keys {
		h1, h2 := sp.P4Hashes(&keys[i])
		row[i] = [2]uint32{flowkey.P4Index(h1, h2, 0, bits), flowkey.P4Index(h1, h2, 1, bits)}
	}
	meet0, meet1 := 0, 0
	for i := range keys {
		for j := i + 1; j < len(keys); j++ {
			if row[i][0] != row[j][0] || keys[i] == keys[j] {
				continue
			}
			meet0++
			if row[i][1] == row[j][1] {
				meet1++
			}
		}
	}
	if meet0 < 1000 || float64(meet1) > 3*float64(meet0)/(1<<bits)+3 {
		t.Errorf("of %d pairs that meet in row 0, %d meet in row 1 (width %d)", meet0, meet1, 1<<bits)
	}
}
