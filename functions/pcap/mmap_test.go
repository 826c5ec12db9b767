package pcap

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions/gen"
)

// TestMappedEqualsBuffered reads the same files mapped (Open) and through
// the read buffer (NewReader): same records, same errors, also for cut and
// corrupted files.
func TestMappedEqualsBuffered(t *testing.T) {
	dir := t.TempDir()
	var whole bytes.Buffer
	if err := gen.WritePcap(&whole, gen.Config{Seed: 3, Packets: 5000, Malformed: 0.05}, 0); err != nil {
		t.Fatal(err)
	}
	b := whole.Bytes()
	corrupt := append([]byte(nil), b...)
	copy(corrupt[len(corrupt)/2:], []byte{0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 0x7f})
	for name, content := range map[string][]byte{
		"whole": b, "cut": b[:len(b)/3], "cut-in-header": b[:len(b)-len(b)/7], "corrupt": corrupt,
	} {
		path := filepath.Join(dir, name+".pcap")
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
		mapped, err := OpenAccess(path, AccessMap)
		if err != nil {
			t.Fatal(err)
		}
		if mapped.Mapped() == nil {
			t.Fatalf("%s: not mapped", name)
		}
		f, _ := os.Open(path)
		buffered, err := NewReader(f, path, int64(len(content)))
		if err != nil {
			t.Fatal(err)
		}
		a, errA := readAll(t, mapped)
		c, errB := readAll(t, buffered)
		if len(a) != len(c) || (errA == nil) != (errB == nil) || (errA != nil && errA.Error() != errB.Error()) {
			t.Fatalf("%s: mapped %d records (%v), buffered %d (%v)", name, len(a), errA, len(c), errB)
		}
		for i := range a {
			if !bytes.Equal(a[i].data, c[i].data) || a[i].wire != c[i].wire || a[i].ts != c[i].ts {
				t.Fatalf("%s: record %d differs", name, i)
			}
		}
		mapped.Close()
		f.Close()
	}
}

// TestZeroCopyFill checks that a source on its own view refers to the
// mapped records (no copy) and honours the snap length.
func TestZeroCopyFill(t *testing.T) {
	r, s := mappedSource(t, gen.Config{Seed: 1, Packets: 1000})
	defer s.Close()
	s.snaplen = 100
	view := s.PBuf()
	if view == nil || !view.IsView() {
		t.Fatal("mapped source offers no view")
	}
	b := buffers.NewBatch(view, 0, buffers.MaxBatch, 0)
	n, long := 0, 0
	for {
		b.Reset()
		err := s.Fill(b)
		for _, e := range b.Entries() {
			d, m := view.Data(e.Slot), view.Meta(e.Slot)
			if len(d) > 100 || m.WireLen < uint32(len(d)) {
				t.Fatalf("caplen %d wire %d", len(d), m.WireLen)
			}
			if m.WireLen > 100 {
				long++
			}
			mem := r.Mapped()
			if len(d) > 0 && &mem[m.Offset] != &d[0] {
				t.Fatal("packet was copied")
			}
		}
		n += b.N
		if errors.Is(err, io.EOF) {
			break
		}
	}
	if n != 1000 || long == 0 {
		t.Errorf("%d packets, %d longer than the snap length", n, long)
	}
}

// TestIndexEqualsReader replays files through the zero-copy source (index
// on its own goroutine, handing over to the Reader at whatever it cannot
// take) and through the Reader alone: same records, same error. The files
// include tiny records (chains fill up), a record with orig < incl (the index
// leaves it to the Reader), a payload that looks like pcap records (a false
// sync), and cuts and corruption at many places; some batches switch to
// copying half way.
func TestIndexEqualsReader(t *testing.T) {
	var whole bytes.Buffer
	if err := gen.WritePcap(&whole, gen.Config{Seed: 9, Packets: 30000, Malformed: 0.05}, 0); err != nil {
		t.Fatal(err)
	}
	base := whole.Bytes()
	files := map[string][]byte{"whole": base}
	// A fake chain of plausible headers inside a record's payload.
	fake := append([]byte(nil), base...)
	for off := len(fake) / 3; off < len(fake)/3+200; off += 16 {
		copy(fake[off:], []byte{1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	}
	files["fake-sync"] = fake
	odd := append([]byte(nil), base...)
	le := func(b []byte, v uint32) { b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24) }
	le(odd[24+12:], 1) // first record: orig 1 < incl
	files["orig<incl"] = odd
	short := append([]byte(nil), base...)
	le(short[16:], 100) // a snap length that most records exceed: cut to it
	files["snaplen100"] = short
	var tiny bytes.Buffer
	tiny.Write(base[:24])
	for i := range 20000 {
		var h [16]byte
		le(h[0:], 1700000000)
		le(h[4:], uint32(i%1000000))
		tiny.Write(h[:]) // 0-byte records
	}
	files["tiny"] = tiny.Bytes()
	for i, frac := range []int{2, 3, 5, 7, 11} {
		files[fmt.Sprintf("cut%d", i)] = base[:len(base)*frac/(frac+1)]
		c := append([]byte(nil), base...)
		le(c[len(c)/frac+7:], 0x7fffffff)
		files[fmt.Sprintf("corrupt%d", i)] = c
	}
	for name, content := range files {
		// mode 0: full zero-copy batches; 2: random sizes, some copying
		compareFile(t, name, content, 0, 2)
	}
}

func TestZeroCopyFillAllocatesNothing(t *testing.T) {
	_, s := mappedSource(t, gen.Config{Seed: 2, Packets: 40000})
	defer s.Close()
	b := buffers.NewBatch(s.PBuf(), 0, buffers.MaxBatch, 0)
	fill := func() {
		b.Reset()
		if err := s.Fill(b); err != nil || b.N != buffers.MaxBatch {
			t.Fatalf("fill: %d, %v", b.N, err)
		}
	}
	fill() // starts the index
	if a := testing.AllocsPerRun(100, fill); a != 0 {
		t.Errorf("zero-copy Fill allocates %v per batch", a)
	}
}

// mappedSource writes a generated trace to a file and opens a source on it,
// mapped.
func mappedSource(t *testing.T, cfg gen.Config) (*Reader, *Source) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "t.pcap")
	f, _ := os.Create(path)
	if err := gen.WritePcap(f, cfg, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r, err := OpenAccess(path, AccessMap)
	if err != nil {
		t.Fatal(err)
	}
	if r.Mapped() == nil {
		t.Fatal("not mapped")
	}
	return r, NewSource(r)
}
