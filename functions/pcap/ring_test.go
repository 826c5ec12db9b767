package pcap

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions/gen"
)

// TestRingStraddles reads files whose records and blocks straddle the
// ring's chunks in every way through the ring source (refering to records
// in place, batches of every size, some filled into a PBuf of the
// caller's), against the Reader on its plain buffer: records up to the
// longest a record may be, pcapng blocks held whole up to maxEnsure,
// blocks longer than that skipped through several chunks, and each file
// cut at places near chunk ends.
func TestRingStraddles(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	payload := func(n int) []byte {
		d := make([]byte, n)
		rng.Read(d)
		return d
	}
	size := func() int {
		switch rng.Intn(8) {
		case 0:
			return MaxRecordLen - rng.Intn(3)
		case 1:
			return rng.Intn(ringChunk)
		case 2:
			return 0
		}
		return rng.Intn(1600)
	}
	var recs []rec
	for n := 0; n < 6*ringChunk*ringChunks; {
		d := payload(min(size(), MaxRecordLen))
		recs = append(recs, rec{d, len(d) + rng.Intn(3), int64(1700000000+len(recs)) * 1e9})
		n += 16 + len(d)
	}
	files := map[string][]byte{}
	for _, o := range orders {
		files["classic-"+o.name] = classic(o.o, o.nanos, 1, 0, recs)
	}
	for _, o := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		f := &ngFile{o: o}
		f.section()
		f.iface(1, 0)
		for i, r := range recs {
			switch i % 97 {
			case 5: // a block held whole, longer than a chunk
				f.epb(0, uint64(r.ts/1000), r.data, r.wire, bigOpts(f, maxEnsure-28-len(r.data)-64)...)
			case 17: // a packet block too long to hold: its tail is skipped
				f.epb(0, uint64(r.ts/1000), r.data, r.wire, bigOpts(f, 3*ringChunk)...)
			case 40: // a block of no interest, skipped across chunks
				f.block(0x40000bad, payload(2*ringChunk+rng.Intn(ringChunk)))
				f.epb(0, uint64(r.ts/1000), r.data, r.wire)
			default:
				f.epb(0, uint64(r.ts/1000), r.data, r.wire)
			}
		}
		files[fmt.Sprintf("ng-%v", o)] = f.b.Bytes()
	}
	for name, b := range files {
		compareFile(t, name, b, 0, 1, 2, 3)
		for _, cut := range []int{bufSize + 1, bufSize + ringChunk - 3, len(b) - 1, len(b) - ringChunk - 7, len(b) / 2} {
			compareFile(t, fmt.Sprintf("%s-cut%d", name, cut), b[:cut], 0, 3)
		}
	}
}

// bigOpts returns enhanced packet block options of about n bytes in all.
func bigOpts(f *ngFile, n int) [][]byte {
	var opts [][]byte
	for n > 4 {
		k := min(n-4, 60000)
		opts = append(opts, f.opt(1, make([]byte, k)))
		n -= 4 + k
	}
	return opts
}

// TestRingFillAllocatesNothing fills the ring source's own view batch
// after batch, wrapping around the ring many times.
func TestRingFillAllocatesNothing(t *testing.T) {
	var buf bytes.Buffer
	gen.WritePcap(&buf, gen.Config{Packets: 60000}, 0)
	r, err := OpenAccess(write(t, "ring.pcap", buf.Bytes()), AccessRing)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.ring == nil {
		t.Fatal("not read through a ring")
	}
	s := NewSource(r)
	b := buffers.NewBatch(s.PBuf(), 0, buffers.MaxBatch, 0)
	if a := testing.AllocsPerRun(100, func() { b.Reset(); s.Fill(b) }); a != 0 {
		t.Fatalf("Fill allocates %.1f times per batch", a)
	}
}
