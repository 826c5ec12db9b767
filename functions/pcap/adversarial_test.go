// Adversarial files for the index (index.go): it must give exactly the
// Reader's records and errors whatever the bytes, including payloads that
// are pcap record chains themselves, cuts and corruption at window and
// segment boundaries, all four magics, and batches that switch between
// zero-copy and copying.

package pcap

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
)

// fb builds classic pcap files, in any of the four magics.
type fb struct {
	o     binary.ByteOrder
	nanos bool
	b     []byte
}

func newFB(o binary.ByteOrder, nanos bool, snap uint32) *fb {
	f := &fb{o: o, nanos: nanos}
	h := make([]byte, 24)
	m := uint32(0xa1b2c3d4)
	if nanos {
		m = 0xa1b23c4d
	}
	o.PutUint32(h, m)
	o.PutUint16(h[4:], 2)
	o.PutUint16(h[6:], 4)
	o.PutUint32(h[16:], snap)
	o.PutUint32(h[20:], 1)
	f.b = h
	return f
}

func (f *fb) hdr(sec, frac, incl, orig uint32) []byte {
	h := make([]byte, 16)
	f.o.PutUint32(h, sec)
	f.o.PutUint32(h[4:], frac)
	f.o.PutUint32(h[8:], incl)
	f.o.PutUint32(h[12:], orig)
	return h
}

func (f *fb) rec(sec, frac, incl, orig uint32, data []byte) {
	f.b = append(f.b, f.hdr(sec, frac, incl, orig)...)
	f.b = append(f.b, data...)
}

// fakeChain returns a valid-looking chain of k records (plausible for
// sync) totalling exactly n bytes if possible, plus delta bytes.
func (f *fb) fakeChain(rng *rand.Rand, sec uint32, n int, k int) []byte {
	var out []byte
	for i := 0; i < k && len(out)+16 < n; i++ {
		rem := n - len(out) - 16
		m := rem
		if i < k-1 {
			m = 1 + rng.Intn(max(1, rem/(k-i)))
		}
		if m < 1 {
			m = 1
		}
		data := make([]byte, m)
		for j := range data {
			data[j] = byte(1 + rng.Intn(255))
		}
		out = append(out, f.hdr(sec+uint32(rng.Intn(10)), uint32(rng.Intn(999999)), uint32(m), uint32(m+rng.Intn(3)))...)
		out = append(out, data...)
	}
	for len(out) < n {
		out = append(out, 0xee)
	}
	return out[:n]
}

// hostile builds a file whose outer records carry inner pcap chains
// (longer than syncDepth) that end exactly at, one byte before or one byte
// after the outer record's end, mixed with zero-length, orig<incl, and
// normal records.
func hostile(seed int64, o binary.ByteOrder, nanos bool, size int) []byte {
	rng := rand.New(rand.NewSource(seed))
	f := newFB(o, nanos, 65535)
	sec := uint32(1700000000)
	for len(f.b) < size {
		fr := uint32(rng.Intn(999999))
		switch rng.Intn(10) {
		case 0: // zero-length
			f.rec(sec, fr, 0, uint32(rng.Intn(100)), nil)
		case 1: // orig < incl
			d := make([]byte, 1+rng.Intn(200))
			rng.Read(d)
			f.rec(sec, fr, uint32(len(d)), uint32(rng.Intn(len(d))), d)
		case 2, 3: // short normal
			d := make([]byte, 40+rng.Intn(1500))
			rng.Read(d)
			f.rec(sec, fr, uint32(len(d)), uint32(len(d)), d)
		default: // nested chain, rejoining (or one byte off)
			n := 200 + rng.Intn(60000)
			k := syncDepth + rng.Intn(20)
			inner := f.fakeChain(rng, sec, n+[]int{0, 0, -1, 1, 16, -16}[rng.Intn(6)], k)
			// the outer incl is n; the inner chain is n±δ bytes long
			if len(inner) > n {
				inner = inner[:n] // the chain then jumps past the outer end
			} else {
				for len(inner) < n {
					inner = append(inner, 0)
				}
			}
			f.rec(sec, fr, uint32(n), uint32(n), inner)
		}
		if rng.Intn(100) == 0 {
			sec++
		}
	}
	return f.b
}

func refRead(t *testing.T, path string, size int) ([]rec, error) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := NewReader(f, path, int64(size))
	if err != nil {
		t.Fatal(err)
	}
	return readAll(t, r)
}

// srcRead reads path through the zero-copy source of access a (mapped,
// or read into a ring); batch sizes and copy/zero-copy switches follow
// mode.
func srcRead(t *testing.T, path string, mode int, a Access) ([]rec, error) {
	r, err := OpenAccess(path, a)
	if err != nil {
		t.Fatal(err)
	}
	if a == AccessMap && r.Mapped() == nil {
		t.Fatal("not mapped")
	}
	if st, _ := os.Stat(path); a == AccessRing && (r.ring != nil) != (st.Size() > bufSize) {
		t.Fatalf("a file of %d bytes read through a ring: %v", st.Size(), r.ring != nil)
	}
	s := NewSource(r)
	defer s.Close()
	view := s.PBuf()
	own := buffers.NewPBuf(buffers.MaxBatch, MaxRecordLen)
	rng := rand.New(rand.NewSource(int64(mode)))
	var got []rec
	for i := 0; ; i++ {
		pb, n := view, buffers.MaxBatch
		switch mode {
		case 1:
			n = 1 + rng.Intn(buffers.MaxBatch)
		case 2:
			n = 1 + rng.Intn(buffers.MaxBatch)
			if rng.Intn(5) == 0 {
				pb = own
			}
		case 3:
			n = 1 + rng.Intn(3)
		}
		b := buffers.NewBatch(pb, 0, n, 0)
		err := s.Fill(b)
		for _, e := range b.Entries() {
			m := pb.Meta(e.Slot)
			got = append(got, rec{append([]byte(nil), pb.Data(e.Slot)...), int(m.WireLen), m.Timestamp})
		}
		if err != nil {
			if err == io.EOF {
				return got, nil
			}
			return got, err
		}
	}
}

func compareFile(t *testing.T, name string, content []byte, modes ...int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".pcap")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	want, wantErr := refRead(t, path, len(content))
	if len(modes) == 0 {
		modes = []int{0}
	}
	for _, a := range []Access{AccessMap, AccessRing} {
		for _, mode := range modes {
			got, gotErr := srcRead(t, path, mode, a)
			if len(got) != len(want) || (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
				t.Fatalf("%s %v mode %d: source %d records (%v), Reader %d (%v)", name, a, mode, len(got), gotErr, len(want), wantErr)
			}
			for i := range got {
				if !bytes.Equal(got[i].data, want[i].data) || got[i].wire != want[i].wire || got[i].ts != want[i].ts {
					t.Fatalf("%s %v mode %d: record %d differs", name, a, mode, i)
				}
			}
		}
	}
}

var orders = []struct {
	name  string
	o     binary.ByteOrder
	nanos bool
}{{"le-us", binary.LittleEndian, false}, {"be-us", binary.BigEndian, false}, {"le-ns", binary.LittleEndian, true}, {"be-ns", binary.BigEndian, true}}

func TestAdvHostile(t *testing.T) {
	for _, o := range orders {
		for seed := int64(0); seed < int64(rounds(4)); seed++ {
			b := hostile(seed, o.o, o.nanos, 6<<20+int(seed)*333333)
			compareFile(t, fmt.Sprintf("%s-%d", o.name, seed), b, 0, 1, 2)
			// cuts: mid-record, mid-header, at window-ish boundaries
			for _, cut := range []int{24 + 2<<20, 24 + 2<<20 + 7, 24 + 2<<20 - 3, len(b) / 3, len(b) - 5, 24 + 4<<20 + 15} {
				compareFile(t, fmt.Sprintf("%s-%d-cut%d", o.name, seed, cut), b[:cut], 0)
			}
			// a record claiming too much in a later segment
			c := append([]byte(nil), b...)
			pos := 24
			for pos < len(c)*5/8 { // walk the real chain
				incl := o.o.Uint32(c[pos+8:])
				pos += 16 + int(incl)
			}
			o.o.PutUint32(c[pos+8:], MaxRecordLen+1)
			compareFile(t, fmt.Sprintf("%s-%d-toolong", o.name, seed), c, 0, 1)
			o.o.PutUint32(c[pos+8:], MaxRecordLen) // exactly the limit, may run past the end
			compareFile(t, fmt.Sprintf("%s-%d-limit", o.name, seed), c, 0, 1)
		}
	}
}

// Records of exactly segmentBytes: every segment guess is a record boundary,
// window ends coincide with record ends, and the file ends exactly at a
// window end (or one byte either side).
func TestAdvAligned(t *testing.T) {
	for _, o := range orders {
		f := newFB(o.o, o.nanos, 0)
		d := make([]byte, segmentBytes-16)
		for i := range d {
			d[i] = byte(i*7 + 1)
		}
		for i := 0; i < 3*chainCount; i++ {
			f.rec(1700000000, uint32(i), uint32(len(d)), uint32(len(d)), d)
		}
		b := f.b
		compareFile(t, o.name+"-aligned", b, 0, 1, 3)
		for _, cut := range []int{len(b) - 1, len(b) - segmentBytes, len(b) - segmentBytes + 1, len(b) - segmentBytes + 15, len(b) - segmentBytes + 16, 24 + chainCount*segmentBytes, 24 + chainCount*segmentBytes + 1} {
			compareFile(t, fmt.Sprintf("%s-aligned-cut%d", o.name, cut), b[:cut], 0)
		}
		compareFile(t, o.name+"-aligned-tail", append(append([]byte(nil), b...), 1, 2, 3), 0)
	}
}

// A large file (≥ 8 MB: readahead and many windows) with hostile content.
func TestAdvLarge(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("large files: run without -short and -race") // the smaller ones cover the same paths
	}
	b := hostile(42, binary.LittleEndian, false, 40<<20)
	compareFile(t, "large", b, 0, 2)
	compareFile(t, "large-cut", b[:len(b)-len(b)/5], 0)
	b = hostile(43, binary.BigEndian, true, 24<<20)
	compareFile(t, "large-be-ns", b, 0)
}

// Zero-length records only: chains fill (4096 a chain) before segments end.
func TestAdvZero(t *testing.T) {
	for _, o := range orders {
		f := newFB(o.o, o.nanos, 0)
		for i := 0; i < rounds(300000); i++ {
			f.rec(1700000000, uint32(i%1000), 0, uint32(i%3), nil)
		}
		compareFile(t, o.name+"-zero", f.b, 0, 1)
		compareFile(t, o.name+"-zero-cut", f.b[:len(f.b)-9], 0)
	}
}

func benchFile(b *testing.B, content []byte, index bool) {
	path := filepath.Join(b.TempDir(), "b.pcap")
	os.WriteFile(path, content, 0o644)
	b.SetBytes(int64(len(content)))
	b.ResetTimer()
	for range b.N {
		r, _ := OpenAccess(path, AccessMap)
		if !index {
			for {
				if _, _, _, err := r.Next(); err != nil {
					break
				}
			}
			r.Close()
			continue
		}
		s := NewSource(r)
		bt := buffers.NewBatch(s.PBuf(), 0, buffers.MaxBatch, 0)
		for {
			bt.Reset()
			if s.Fill(bt) != nil {
				break
			}
		}
		s.Close()
	}
}

// small records; every payload holds an inner chain that rejoins the real one
func smallFile(hostileP bool, size int) []byte {
	rng := rand.New(rand.NewSource(1))
	f := newFB(binary.LittleEndian, false, 65535)
	for len(f.b) < size {
		n := 60 + rng.Intn(1400)
		var d []byte
		if hostileP && n > 5*17 {
			d = f.fakeChain(rng, 1700000000, n, syncDepth+1)
		} else {
			d = make([]byte, n)
			rng.Read(d)
		}
		f.rec(1700000000, uint32(rng.Intn(999999)), uint32(len(d)), uint32(len(d)), d)
	}
	return f.b
}

// The index against the Reader on files of small records, benign and with
// payloads that are themselves pcap record chains (a capture of a pcap
// download), which lure the index's guesses.
func BenchmarkAdvSmallHostileIndex(b *testing.B)  { benchFile(b, smallFile(true, 128<<20), true) }
func BenchmarkAdvSmallHostileReader(b *testing.B) { benchFile(b, smallFile(true, 128<<20), false) }
func BenchmarkAdvSmallBenignIndex(b *testing.B)   { benchFile(b, smallFile(false, 128<<20), true) }
func BenchmarkAdvSmallBenignReader(b *testing.B)  { benchFile(b, smallFile(false, 128<<20), false) }

func TestAdvSmallHostile(t *testing.T) {
	compareFile(t, "small-hostile", smallFile(true, rounds(6)*(6<<20)+1234), 0)
}

func TestAdvRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(99))
	for it := 0; it < rounds(120); it++ {
		o := orders[it%4]
		b := hostile(int64(1000+it), o.o, o.nanos, 300<<10+rng.Intn(5<<20))
		for k := rng.Intn(4); k > 0; k-- { // flip bytes
			p := 24 + rng.Intn(len(b)-24)
			b[p] = byte(rng.Intn(256))
		}
		if rng.Intn(2) == 0 {
			b = b[:24+rng.Intn(len(b)-24)]
		}
		compareFile(t, fmt.Sprintf("rand%d", it), b, rng.Intn(4))
	}
}

func TestAdvHeaderCorrupt(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for it := 0; it < rounds(80); it++ {
		o := orders[it%4]
		b := hostile(int64(5000+it), o.o, o.nanos, 300<<10+rng.Intn(5<<20))
		var heads []int
		for p := 24; p+16 <= len(b); {
			heads = append(heads, p)
			p += 16 + int(o.o.Uint32(b[p+8:]))
		}
		for k := 1 + rng.Intn(3); k > 0; k-- {
			p := heads[rng.Intn(len(heads))]
			incl := o.o.Uint32(b[p+8:])
			v := []uint32{incl + 1, incl - 1, 0, MaxRecordLen, MaxRecordLen + 1, incl + 16, incl + 17, 0xffffffff}[rng.Intn(8)]
			o.o.PutUint32(b[p+8:], v)
		}
		compareFile(t, fmt.Sprintf("hc%d", it), b, rng.Intn(4))
	}
}

// rounds scales a randomised test down under the race detector (which
// makes it ten times slower) and -short.
func rounds(n int) int {
	if raceEnabled || testing.Short() {
		return max(1, n/6)
	}
	return n
}
