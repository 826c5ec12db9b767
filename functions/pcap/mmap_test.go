package pcap

import (
	"bytes"
	"errors"
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
		mapped, err := Open(path)
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
	path := filepath.Join(t.TempDir(), "t.pcap")
	f, _ := os.Create(path)
	if err := gen.WritePcap(f, gen.Config{Seed: 1, Packets: 1000}, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s := NewSource(r)
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
