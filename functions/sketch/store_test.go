package sketch

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/gen"
)

func storeOn(t *testing.T, args ...functions.Arg) *Store {
	t.Helper()
	p, err := storeClass.Bind(args)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewStore(&functions.Context{ID: "store#1", Params: p, LinkType: functions.LinkEthernet, Ann: 1})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func word(k, v string) functions.Arg {
	return functions.Arg{Key: k, Value: functions.Raw{Kind: functions.RawWord, Text: v}}
}

func num(k, v string) functions.Arg {
	return functions.Arg{Key: k, Value: functions.Raw{Kind: functions.RawNumber, Text: v}}
}

// TestStoreChanges: the packets a store passes with pass=new are exactly
// those a separate simulation of its cells (a map from cell to value, the
// positions flowkey.Index gives) says none of their key's cells held; and
// against each flow's true changes of value (its first included, unless
// it is the 0 empty cells hold), what other flows sharing cells cause,
// changes hidden and changes made up, is rare in a wide sketch and common
// in a narrow one.
func TestStoreChanges(t *testing.T) {
	cfg := gen.Config{Seed: 12, Packets: 20000, Flows: 200, VLAN: 0.1}
	sp, _ := flowkey.Parse("5tuple")
	const value = "ipv4.id & 8" // a flow's packets change it now and then
	for _, tc := range []struct {
		width     uint32
		maxMissed float64 // of the true changes
	}{{65536, 0.02}, {16, 1}} {
		s := storeOn(t, word("value", value), word("pass", "new"), num("width", fmt.Sprint(tc.width)), num("depth", "4"))
		g := gen.New(cfg)
		pb := buffers.NewPBuf(buffers.MaxBatch, gen.MaxFrameLen)
		b := buffers.NewBatch(pb, 0, buffers.MaxBatch, 0)
		rng := rand.New(rand.NewPCG(3, 4))
		cells := map[uint32]uint64{}
		prev := map[flowkey.Key]uint64{}
		var k flowkey.Key
		var changes, simulated, missed, madeUp int
		for done := false; !done; {
			b.Reset()
			size := 1 + rng.IntN(buffers.MaxBatch)
			for b.N < size {
				n, w, ts, ok := g.Next(b.NextSlot())
				if !ok {
					done = true
					break
				}
				b.Commit(uint32(n), uint32(w), ts)
			}
			// What the cells say before the batch, packet by packet.
			want := make([]bool, b.N)
			for j := range b.N {
				d := pb.Data(b.Base + uint32(j))
				off := ipv4At(d)
				if !sp.Extract(functions.LinkEthernet, d, &k) || off < 0 {
					continue
				}
				v, h := uint64(d[off+5]&8), sp.Hash(&k, seed)
				held := false
				for r := range uint32(4) {
					c := r*tc.width + flowkey.Index(h, r, tc.width)
					held = held || cells[c] == v
					cells[c] = v
				}
				want[j] = !held
				truth := prev[k] != v
				prev[k] = v
				switch {
				case want[j] && !truth:
					madeUp++
				case truth:
					changes++
					if !want[j] {
						missed++
					}
				}
				if want[j] {
					simulated++
				}
			}
			in := b.N
			s.Process(b)
			passed := map[uint32]bool{}
			for _, e := range b.E[:b.N] {
				passed[e.Slot] = true
			}
			for j := range in {
				if passed[b.Base+uint32(j)] != want[j] {
					t.Fatalf("width %d: a packet passed %v, the simulation says %v", tc.width, passed[b.Base+uint32(j)], want[j])
				}
			}
		}
		if got := s.m.Load64(s.changes); int(got) != simulated {
			t.Errorf("width %d: %d changes counted, %d simulated", tc.width, got, simulated)
		}
		if changes < 1000 || float64(missed+madeUp) > tc.maxMissed*float64(changes) {
			t.Errorf("width %d: of %d true changes %d missed, %d made up", tc.width, changes, missed, madeUp)
		}
		if tc.width == 16 && (missed < changes/10 || madeUp < changes/10) {
			t.Errorf("width 16: %d of %d changes missed, %d made up: the narrow sketch should err both ways", missed, changes, madeUp)
		}
		t.Logf("width %d: %d changes, %d missed, %d made up", tc.width, changes, missed, madeUp)
	}
}

// TestStoreReads: any and all say what the key's cells held before the
// packet wrote its value.
func TestStoreReads(t *testing.T) {
	s := storeOn(t, word("value", "pkt.len"), num("width", "1024"), num("depth", "3"))
	anyR, _ := s.ReadInt("any")
	allR, _ := s.ReadInt("all")
	pb := buffers.NewPBuf(8, 200)
	b := buffers.NewBatch(pb, 0, 8, 0)
	frame := func(n int) []byte {
		f := make([]byte, n)
		copy(f[12:], []byte{0x08, 0x00, 0x45, 0, 0, 60, 0, 0, 0, 0, 64, 17})
		copy(f[26:], []byte{10, 0, 0, 1, 10, 0, 0, 2, 0, 1, 0, 2})
		return f
	}
	for _, n := range []int{100, 100, 120, 100} {
		b.Append(frame(n), uint32(n), 1)
	}
	s.Process(b)
	got := [][2]int64{}
	for i := range uint32(4) {
		got = append(got, [2]int64{anyR(pb, i), allR(pb, i)})
	}
	if want := [][2]int64{{0, 0}, {1, 1}, {0, 0}, {0, 0}}; !equal(got, want) {
		t.Errorf("any, all: %v, want %v", got, want)
	}
	if s.m.Load64(s.changes) != 3 {
		t.Errorf("changes %d", s.m.Load64(s.changes))
	}
}

func equal(a, b [][2]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ipv4At is the offset of the IPv4 header of an Ethernet frame (after its
// VLAN tags), or -1.
func ipv4At(d []byte) int {
	off := 12
	for len(d) >= off+6 {
		if t := uint16(d[off])<<8 | uint16(d[off+1]); t != 0x8100 && t != 0x88a8 && t != 0x9100 {
			break
		}
		off += 4
	}
	if len(d) < off+2+20 || d[off] != 0x08 || d[off+1] != 0 || d[off+2]>>4 != 4 {
		return -1
	}
	return off + 2
}
