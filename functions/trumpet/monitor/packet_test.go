package monitor

import (
	"encoding/binary"
	"math/rand"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/gen"
)

// TestParseIPv4FastPathIsTheGeneralOne: Parse's path for untagged IPv4
// without options reads every frame as the general path does, on a
// generated trace (malformed and VLAN frames included) and on its IPv4
// frames with their lengths, fragment offsets, protocols, TCP data offsets
// and flags changed, and cut short.
func TestParseIPv4FastPathIsTheGeneralOne(t *testing.T) {
	g := gen.New(gen.Config{Seed: 9, Packets: 20000, Malformed: 0.05, VLAN: 0.2, IPv6: 0.2})
	buf := make([]byte, gen.MaxFrameLen)
	rng := rand.New(rand.NewSource(1))
	fast, checked := 0, 0
	check := func(pkt []byte) {
		var a, b Packet
		okA := Parse(functions.LinkEthernet, pkt, 7, uint32(len(pkt)), &a)
		okB := parse(functions.LinkEthernet, pkt, 7, uint32(len(pkt)), &b)
		if okA != okB || okA && a != b {
			t.Fatalf("%x: Parse %v %+v, the general path %v %+v", pkt, okA, a, okB, b)
		}
		checked++
		if len(pkt) >= 34 && pkt[12] == 0x08 && pkt[13] == 0x00 && pkt[14] == 0x45 {
			fast++
		}
	}
	for {
		c, _, _, ok := g.Next(buf)
		if !ok {
			break
		}
		pkt := append([]byte(nil), buf[:c]...)
		check(pkt)
		if len(pkt) < 34 || pkt[12] != 0x08 || pkt[13] != 0x00 {
			continue
		}
		for range 8 {
			q := append([]byte(nil), pkt...)
			q[14] = 0x45
			switch rng.Intn(6) {
			case 0:
				binary.BigEndian.PutUint16(q[16:], uint16([]int{0, 1, 19, 20, 21, 28, 40, len(q) - 14, len(q) + 50, 65535}[rng.Intn(10)]))
			case 1:
				binary.BigEndian.PutUint16(q[20:], uint16(rng.Intn(4))<<13|[]uint16{0, 1, 2, 0x1000, 0x1fff}[rng.Intn(5)])
			case 2:
				q[23] = []byte{1, 6, 17, 132, 58}[rng.Intn(5)]
			case 3:
				if len(q) >= 48 {
					q[23], q[46] = 6, byte(rng.Intn(16))<<4
				}
			case 4:
				if len(q) >= 48 {
					q[23], q[47] = 6, byte(rng.Intn(256))
				}
			}
			check(q[:34+rng.Intn(len(q)-33)])
			check(q)
		}
	}
	if fast < 1000 {
		t.Fatalf("only %d of %d frames took the fast path", fast, checked)
	}
}
