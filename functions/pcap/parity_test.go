package pcap

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/rand"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/gen"
)

// TestValidateDescribesCapture checks the capture a pcap function reports
// for its file: the header's link-type field as written (FCS bits
// included), the byte order against this machine's, the snap length as
// written; for pcapng, the first section's order and first interface's.
func TestValidateDescribesCapture(t *testing.T) {
	c, _ := functions.Default.Lookup("pcap")
	other := binary.ByteOrder(binary.BigEndian)
	if hostBig {
		other = binary.LittleEndian
	}
	ng := &ngFile{o: other}
	ng.section()
	ng.iface(113, 1000)
	ng.iface(113, 1000)
	for name, tc := range map[string]struct {
		content []byte
		want    functions.Capture
	}{
		"fcs.pcap":     {classic(binary.NativeEndian, false, 1|1<<26|4<<28, 0, nil), functions.Capture{File: true, LinkTypeField: 1 | 1<<26 | 4<<28, Snaplen: 0}},
		"other.pcap":   {classic(other, true, 276, 96, nil), functions.Capture{File: true, LinkTypeField: 276, Swapped: true, Snaplen: 96}},
		"other.pcapng": {ng.b.Bytes(), functions.Capture{File: true, LinkTypeField: 113, Swapped: true, Snaplen: 1000}},
	} {
		p, _ := c.Bind([]functions.Arg{{Value: functions.Raw{Kind: functions.RawWord, Text: write(t, name, tc.content)}}})
		ctx := &functions.Context{Params: p}
		if err := c.Validate(ctx); err != nil || len(ctx.Captures) != 1 || ctx.Captures[0] != tc.want {
			t.Errorf("%s: Validate: %v, captures %+v, want %+v", name, err, ctx.Captures, tc.want)
		}
	}
}

// TestLongRecordsCutOnEveryPath reads a file whose records are longer than
// its snap length, and whose wire lengths are below the captured ones,
// through the Reader, the copying source and the mapped source with its
// index: every path gives libpcap's records (cut to the snapshot, the
// wire length as written).
func TestLongRecordsCutOnEveryPath(t *testing.T) {
	recs := genRecords(20000, gen.Config{Seed: 4})
	for i := range recs {
		if i%3 == 0 {
			recs[i].wire = len(recs[i].data) / 2 // below the captured length
		}
	}
	const snap = 100
	for _, o := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		content := classic(o, false, 1, snap, recs)
		path := write(t, "long.pcap", content)
		want := make([]rec, len(recs))
		for i, r := range recs {
			want[i] = rec{r.data[:min(snap, len(r.data))], r.wire, r.ts / 1000 * 1000}
		}
		r, err := OpenAccess(path, AccessRead)
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAll(t, r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		same(t, got, want, 1)
		// the mapped source, its index and its copying mode against the Reader
		compareFile(t, "long", content, 0, 1, 2, 3)
	}
}

// TestPcapngSnapshot checks libpcap's rules for pcapng snap lengths: a
// record longer than the snapshot is an error, and so is an interface
// whose snap length differs from the first one's.
func TestPcapngSnapshot(t *testing.T) {
	f := &ngFile{o: binary.LittleEndian}
	f.section()
	f.iface(1, 64)
	f.epb(0, 1, make([]byte, 60), 60)
	f.epb(0, 2, make([]byte, 65), 65)
	r, err := NewReader(bytes.NewReader(f.b.Bytes()), "long.pcapng", 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, r)
	if len(got) != 1 || err == nil || !strings.Contains(err.Error(), "record 2 has 65 captured bytes, more than the snap length 64") {
		t.Errorf("%d records, %v", len(got), err)
	}
	f = &ngFile{o: binary.LittleEndian}
	f.section()
	f.iface(1, 64)
	f.iface(1, 0)
	if _, err := NewReader(bytes.NewReader(f.b.Bytes()), "two.pcapng", 0); err == nil || !strings.Contains(err.Error(), "interface 1 (byte offset 48, before record 1) has snap length 0 but the first interface 64") {
		t.Errorf("two snap lengths: %v", err)
	}
}

// TestSlabEqualsReader reads files through the copying source's own PBuf
// (the slab), in batches of random sizes, some filled in two calls, and
// compares with the Reader: same records, same errors.
func TestSlabEqualsReader(t *testing.T) {
	recs := genRecords(20000, gen.Config{Seed: 6, Malformed: 0.05})
	whole := classic(binary.LittleEndian, true, 1, 300, recs)
	for name, content := range map[string][]byte{"whole": whole, "cut": whole[:len(whole)*2/3]} {
		path := write(t, name+".pcap", content)
		want, wantErr := refRead(t, path, len(content))
		r, err := OpenAccess(path, AccessRead)
		if err != nil {
			t.Fatal(err)
		}
		s := NewSource(r)
		pb := s.PBuf()
		if pb == nil || r.Mapped() != nil {
			t.Fatal("a read file's source has no slab")
		}
		rng := rand.New(rand.NewSource(1))
		var got []rec
		var gotErr error
		for gotErr == nil {
			b := buffers.NewBatch(pb, 0, 1+rng.Intn(buffers.MaxBatch), 0)
			gotErr = s.Fill(b)
			if gotErr == nil && rng.Intn(4) == 0 && b.Room() > 0 {
				gotErr = s.Fill(b) // appends to what the batch holds
			}
			for _, e := range b.Entries() {
				m := pb.Meta(e.Slot)
				got = append(got, rec{append([]byte(nil), pb.Data(e.Slot)...), int(m.WireLen), m.Timestamp})
			}
		}
		s.Close()
		if gotErr == io.EOF {
			gotErr = nil
		}
		if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
			t.Fatalf("%s: slab %v, Reader %v", name, gotErr, wantErr)
		}
		same(t, got, want, 1)
	}
}
