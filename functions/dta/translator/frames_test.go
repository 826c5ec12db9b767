package translator

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/dta/wire"
)

func newFunction(t testing.TB, args ...functions.Arg) *Function {
	t.Helper()
	p, err := Class.Bind(args)
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewFunction(&functions.Context{ID: "dta-translator#1", Params: p, LinkType: functions.LinkEthernet})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// frame wraps payload in Ethernet/IPv4/UDP to port; ipLen and udpLen
// override the length fields when not 0.
func frame(payload []byte, port uint16, proto byte, ipLen, udpLen int) []byte {
	b := make([]byte, 42+len(payload))
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, proto
	if ipLen == 0 {
		ipLen = 28 + len(payload)
	}
	binary.BigEndian.PutUint16(ip[2:], uint16(ipLen))
	u := ip[20:]
	binary.BigEndian.PutUint16(u[2:], port)
	if udpLen == 0 {
		udpLen = 8 + len(payload)
	}
	binary.BigEndian.PutUint16(u[4:], uint16(udpLen))
	copy(u[8:], payload)
	return b
}

func report(r wire.Report) []byte {
	b, _ := r.Append(nil)
	return b
}

// Frames that are not reports are filtered, malformed and refused reports
// dropped, each counted by its reason; in = out + filtered + dropped.
func TestBadFrames(t *testing.T) {
	f := newFunction(t, functions.Arg{Key: "lists", Value: functions.Raw{Kind: functions.RawNumber, Text: "4"}})
	var records int
	f.SetEmit(func(b *buffers.Batch) { records += b.N })
	kw := report(wire.Report{Op: wire.KeyWrite, Redundancy: 2, Key: 1, Data: 2})
	frag := frame(kw, wire.Port, 17, 0, 0)
	frag[14+6] = 0x20 // more fragments
	vlan := append(append(append([]byte(nil), frame(kw, wire.Port, 17, 0, 0)[:12]...), 0x81, 0, 0, 5), frame(kw, wire.Port, 17, 0, 0)[12:]...)
	cases := []struct {
		frame []byte
		field string
	}{
		{frame(kw, wire.Port, 17, 0, 0), "keywrite"},
		{vlan, "keywrite"},
		{frame(kw, 40041, 17, 0, 0), "notdta"},
		{frame(kw, wire.Port, 6, 0, 0), "notdta"},
		{frame(kw, wire.Port, 17, 20, 0), "notdta"},  // IPv4 length shorter than its headers
		{frame(kw, wire.Port, 17, 0, 100), "notdta"}, // UDP length past the IPv4 datagram: a lying length
		{frag, "notdta"},
		{frame(kw, wire.Port, 17, 0, 0)[:40], "notdta"},
		{frame(kw[:5], wire.Port, 17, 0, 0), "short"},
		{frame(kw, wire.Port, 17, 0, 12), "short"}, // UDP length cuts the report
		{frame(kw, wire.Port, 17, 0, 0)[:50], "short"},
		{frame([]byte{0x09, 0, 1, 2}, wire.Port, 17, 0, 0), "opcode"},
		{frame(append(kw, 0), wire.Port, 17, 0, 0), "trailing"},
		{frame(report(wire.Report{Op: wire.KeyWrite, Key: 1}), wire.Port, 17, 0, 0), "redundancy"},
		{frame(report(wire.Report{Op: wire.Append, List: 4}), wire.Port, 17, 0, 0), "list"},
		{frame(report(wire.Report{Op: wire.Postcarding, Hop: 6}), wire.Port, 17, 0, 0), "hop"},
		{frame(report(wire.Report{Op: wire.Append, List: 3}), wire.Port, 17, 0, 0), "append"},
	}
	p := buffers.NewPBuf(len(cases), 256)
	b := buffers.NewBatch(p, 0, len(cases), 0)
	for _, c := range cases {
		b.Append(c.frame, uint32(len(c.frame)), 1)
	}
	f.Process(b)
	want := map[string]uint64{}
	for _, c := range cases {
		want[c.field]++
	}
	snap := f.m.Snapshot()
	for name, n := range want {
		if snap[name] != n {
			t.Errorf("%s = %v, want %d", name, snap[name], n)
		}
	}
	if b.N != 0 || b.Dropped != 8 || records != 4 {
		t.Fatalf("N %d dropped %d records %d; state %v", b.N, b.Dropped, records, snap)
	}
}

// No input crashes the translator: random bytes, and every cut of every
// kind of report.
func TestNoCrash(t *testing.T) {
	f := newFunction(t)
	f.SetEmit(func(*buffers.Batch) {})
	rng := rand.New(rand.NewPCG(3, 4))
	p := buffers.NewPBuf(buffers.MaxBatch, 128)
	b := buffers.NewBatch(p, 0, buffers.MaxBatch, 0)
	var in, dropped int
	for range 200 {
		b.Reset()
		for b.Room() > 0 {
			var fr []byte
			switch rng.IntN(3) {
			case 0:
				fr = make([]byte, rng.IntN(80))
				for i := range fr {
					fr[i] = byte(rng.Uint32())
				}
			default:
				r := wire.Report{Op: wire.Opcode(1 + rng.IntN(4)), Redundancy: uint8(rng.IntN(3)), List: uint32(rng.IntN(20)),
					Hop: uint8(rng.IntN(7)), Key: rng.Uint32(), Data: rng.Uint32(), Counter: rng.Uint64()}
				fr = frame(report(r), wire.Port, 17, 0, 0)
				fr = fr[:rng.IntN(len(fr)+1)]
				if rng.IntN(4) == 0 && len(fr) > 20 {
					fr[14+rng.IntN(len(fr)-14)] ^= byte(rng.Uint32())
				}
			}
			b.Append(fr, uint32(len(fr)), 1)
		}
		in += b.N
		f.Process(b)
		dropped += b.Dropped
	}
	f.Flush(2)
	s := f.m.Snapshot()
	var bad uint64
	for _, k := range []string{"short", "opcode", "trailing", "redundancy", "list", "hop"} {
		bad += s[k].(uint64)
	}
	var good uint64
	for _, k := range []string{"keywrite", "append", "keyincrement", "postcarding"} {
		good += s[k].(uint64)
	}
	if bad != uint64(dropped) || good+bad+s["notdta"].(uint64) != uint64(in) {
		t.Fatalf("%d frames, %d dropped: %v", in, dropped, s)
	}
}

func FuzzPayload(f *testing.F) {
	f.Add(frame(report(wire.Report{Op: wire.KeyWrite, Redundancy: 2, Key: 1, Data: 2}), wire.Port, 17, 0, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, lt := range []functions.LinkType{functions.LinkEthernet, functions.LinkRaw} {
			if p, ok := Payload(lt, b, wire.Port); ok && len(p) > len(b) {
				t.Fatal("payload beyond the frame")
			}
		}
	})
}

// BenchmarkFunction: a frame in, its report translated, the writes out as
// records.
func BenchmarkFunction(b *testing.B) {
	for _, c := range []struct {
		name string
		rep  wire.Report
	}{
		{"keywrite/N=2", wire.Report{Op: wire.KeyWrite, Redundancy: 2, Key: 7, Data: 9}},
		{"append/B=4", wire.Report{Op: wire.Append, List: 3, Data: 9}},
	} {
		b.Run(c.name, func(b *testing.B) {
			f := newFunction(b)
			f.SetEmit(func(*buffers.Batch) {})
			p := buffers.NewPBuf(buffers.MaxBatch, 128)
			in := buffers.NewBatch(p, 0, buffers.MaxBatch, 0)
			for i := 0; in.Room() > 0; i++ {
				r := c.rep
				r.Key, r.Data = uint32(i)*2654435761, uint32(i)
				fr := frame(report(r), wire.Port, 17, 0, 0)
				in.Append(fr, uint32(len(fr)), 1)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += buffers.MaxBatch {
				in.N = buffers.MaxBatch
				f.Process(in)
			}
		})
	}
}
