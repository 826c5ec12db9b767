package pcap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/gen"
)

type rec struct {
	data []byte
	wire int
	ts   int64
}

func genRecords(n int, cfg gen.Config) []rec {
	cfg.Packets = int64(n)
	g := gen.New(cfg)
	buf := make([]byte, gen.MaxFrameLen)
	var out []rec
	for {
		c, w, ts, ok := g.Next(buf)
		if !ok {
			return out
		}
		out = append(out, rec{append([]byte(nil), buf[:c]...), w, ts})
	}
}

// classic encodes records as a classic pcap file.
func classic(order binary.ByteOrder, nanos bool, link uint32, snap uint32, recs []rec) []byte {
	var b bytes.Buffer
	magic := uint32(0xa1b2c3d4)
	if nanos {
		magic = 0xa1b23c4d
	}
	h := make([]byte, 24)
	order.PutUint32(h, magic)
	order.PutUint16(h[4:], 2)
	order.PutUint16(h[6:], 4)
	order.PutUint32(h[16:], snap)
	order.PutUint32(h[20:], link)
	b.Write(h)
	for _, r := range recs {
		rh := make([]byte, 16)
		sec, frac := r.ts/1e9, r.ts%1e9
		if !nanos {
			frac /= 1000
		}
		order.PutUint32(rh, uint32(sec))
		order.PutUint32(rh[4:], uint32(frac))
		order.PutUint32(rh[8:], uint32(len(r.data)))
		order.PutUint32(rh[12:], uint32(r.wire))
		b.Write(rh)
		b.Write(r.data)
	}
	return b.Bytes()
}

func readAll(t *testing.T, r *Reader) ([]rec, error) {
	t.Helper()
	var out []rec
	for {
		d, w, ts, err := r.Next()
		if err != nil {
			if err == io.EOF {
				return out, nil
			}
			return out, err
		}
		out = append(out, rec{append([]byte(nil), d...), w, ts})
	}
}

func same(t *testing.T, got, want []rec, tsUnit int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i].data, want[i].data) || got[i].wire != want[i].wire ||
			got[i].ts != want[i].ts/tsUnit*tsUnit {
			t.Fatalf("record %d differs: got %d/%d bytes ts %d, want %d/%d ts %d", i,
				len(got[i].data), got[i].wire, got[i].ts, len(want[i].data), want[i].wire, want[i].ts)
		}
	}
}

func write(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestClassicMagics(t *testing.T) {
	recs := genRecords(3000, gen.Config{Malformed: 0.05, VLAN: 0.1})
	for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		for _, nanos := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/nanos=%v", order, nanos), func(t *testing.T) {
				p := write(t, "x.pcap", classic(order, nanos, 1, 1518, recs))
				r, err := Open(p)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				if r.Format() != Classic || r.LinkType() != functions.LinkEthernet || r.Snaplen() != 1518 {
					t.Fatalf("format %v link %v snaplen %d", r.Format(), r.LinkType(), r.Snaplen())
				}
				got, err := readAll(t, r)
				if err != nil {
					t.Fatal(err)
				}
				unit := int64(1000)
				if nanos {
					unit = 1
				}
				same(t, got, recs, unit)
				if r.Offset() != r.Size() || r.Records() != 3000 {
					t.Fatalf("offset %d of %d, %d records", r.Offset(), r.Size(), r.Records())
				}
			})
		}
	}
}

// TestAgainstPcapgo cross-checks the reader with gopacket's on a generated
// trace written by gen.WritePcap.
func TestAgainstPcapgo(t *testing.T) {
	var buf bytes.Buffer
	if err := gen.WritePcap(&buf, gen.Config{Packets: 5000, Malformed: 0.05, IPv6: 0.3}, 0); err != nil {
		t.Fatal(err)
	}
	pr, err := pcapgo.NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	want := gopacketRecs(pr)
	r, err := NewReader(bytes.NewReader(buf.Bytes()), "gen.pcap", 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, r)
	if err != nil {
		t.Fatal(err)
	}
	same(t, got, want, 1)
}

// ngFile builds pcapng files block by block, in either byte order.
type ngFile struct {
	o binary.ByteOrder
	b bytes.Buffer
}

func (f *ngFile) block(typ uint32, body []byte) {
	body = append(body, make([]byte, (4-len(body)%4)%4)...)
	n := uint32(12 + len(body))
	h := make([]byte, 8)
	f.o.PutUint32(h, typ)
	f.o.PutUint32(h[4:], n)
	f.b.Write(h)
	f.b.Write(body)
	t := make([]byte, 4)
	f.o.PutUint32(t, n)
	f.b.Write(t)
}

func (f *ngFile) section() {
	b := make([]byte, 16)
	f.o.PutUint32(b, 0x1a2b3c4d)
	f.o.PutUint16(b[4:], 1)
	binary.LittleEndian.PutUint64(b[8:], ^uint64(0))
	f.block(0x0a0d0d0a, b)
}

func (f *ngFile) opt(code uint16, v []byte) []byte {
	b := make([]byte, 4, 4+len(v)+3)
	f.o.PutUint16(b, code)
	f.o.PutUint16(b[2:], uint16(len(v)))
	b = append(b, v...)
	return append(b, make([]byte, (4-len(v)%4)%4)...)
}

func (f *ngFile) iface(link uint16, snap uint32, opts ...[]byte) {
	b := make([]byte, 8)
	f.o.PutUint16(b, link)
	f.o.PutUint32(b[4:], snap)
	for _, o := range opts {
		b = append(b, o...)
	}
	if len(opts) > 0 {
		b = append(b, 0, 0, 0, 0)
	}
	f.block(1, b)
}

func (f *ngFile) epb(ifc uint32, tsUnits uint64, data []byte, wire int, opts ...[]byte) {
	b := make([]byte, 20)
	f.o.PutUint32(b, ifc)
	f.o.PutUint32(b[4:], uint32(tsUnits>>32))
	f.o.PutUint32(b[8:], uint32(tsUnits))
	f.o.PutUint32(b[12:], uint32(len(data)))
	f.o.PutUint32(b[16:], uint32(wire))
	b = append(b, data...)
	b = append(b, make([]byte, (4-len(data)%4)%4)...)
	for _, o := range opts {
		b = append(b, o...)
	}
	f.block(6, b)
}

func TestPcapng(t *testing.T) {
	recs := genRecords(2000, gen.Config{Malformed: 0.05, VLAN: 0.1})
	for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		t.Run(fmt.Sprint(order), func(t *testing.T) {
			f := &ngFile{o: order}
			f.section()
			f.block(4, []byte{0, 0, 0, 0})                                                // name resolution block: skipped
			f.iface(1, 0)                                                                 // µs
			f.iface(1, 0, f.opt(9, []byte{9}), f.opt(14, []byte{0, 0, 0, 0, 0, 0, 0, 0})) // ns (one snap length for all, as libpcap requires)
			f.iface(1, 0, f.opt(9, []byte{0x80 | 20}))                                    // 2^-20 s
			var want []rec
			for i, r := range recs[:1000] {
				ifc := uint32(i % 3)
				var units uint64
				ts := r.ts
				switch ifc {
				case 0:
					units = uint64(r.ts / 1000)
					ts = r.ts / 1000 * 1000
				case 1:
					units = uint64(r.ts)
				case 2:
					units = uint64(r.ts/1e9)<<20 | uint64(r.ts%1e9)<<20/1e9
					ts = int64(units>>20)*1e9 + int64((units&(1<<20-1))*1e9>>20)
				}
				if i%7 == 0 {
					f.epb(ifc, units, r.data, r.wire, f.opt(1, []byte("a comment")), []byte{0, 0, 0, 0})
				} else {
					f.epb(ifc, units, r.data, r.wire)
				}
				want = append(want, rec{r.data, r.wire, ts})
				if i == 500 {
					f.block(5, make([]byte, 12)) // interface statistics: skipped
					f.block(0x40000bad, []byte("custom"))
				}
			}
			// a second section, with one interface, an obsolete packet
			// block and a simple packet block
			f.section()
			f.iface(1, 262144) // the same snapshot as 0
			r := recs[1000]
			pb := make([]byte, 20)
			f.o.PutUint16(pb, 0)
			f.o.PutUint32(pb[12:], uint32(len(r.data)))
			f.o.PutUint32(pb[16:], uint32(r.wire))
			f.o.PutUint32(pb[4:], uint32(uint64(r.ts/1000)>>32))
			f.o.PutUint32(pb[8:], uint32(uint64(r.ts/1000)))
			f.block(2, append(pb, r.data...))
			want = append(want, rec{r.data, r.wire, r.ts / 1000 * 1000})
			r = recs[1001]
			sp := make([]byte, 4)
			f.o.PutUint32(sp, uint32(len(r.data)))
			f.block(3, append(sp, r.data...))
			want = append(want, rec{r.data, len(r.data), 0})

			rd, err := NewReader(bytes.NewReader(f.b.Bytes()), "x.pcapng", int64(f.b.Len()))
			if err != nil {
				t.Fatal(err)
			}
			if rd.Format() != NG || rd.LinkType() != functions.LinkEthernet || rd.Snaplen() != SlotLimit {
				t.Fatalf("format %v link %v snaplen %d", rd.Format(), rd.LinkType(), rd.Snaplen())
			}
			got, err := readAll(t, rd)
			if err != nil {
				t.Fatal(err)
			}
			same(t, got, want, 1)
		})
	}
}

// TestPcapngWriter reads what gopacket's pcapng writer produces and
// compares with gopacket's pcapng reader.
func TestPcapngWriter(t *testing.T) {
	recs := genRecords(3000, gen.Config{Malformed: 0.05})
	var buf bytes.Buffer
	w, err := pcapgo.NewNgWriter(&buf, layers.LinkTypeEthernet)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, r.ts), CaptureLength: len(r.data), Length: r.wire}
		if err := w.WritePacket(ci, r.data); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	ng, err := pcapgo.NewNgReader(bytes.NewReader(buf.Bytes()), pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	want := gopacketRecs(ng)
	r, err := NewReader(bytes.NewReader(buf.Bytes()), "w.pcapng", 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, r)
	if err != nil {
		t.Fatal(err)
	}
	same(t, got, want, 1)
}

func TestMixedLinkTypes(t *testing.T) {
	recs := genRecords(10, gen.Config{})
	f := &ngFile{o: binary.LittleEndian}
	f.section()
	f.iface(1, 0)
	for _, r := range recs[:5] {
		f.epb(0, 0, r.data, r.wire)
	}
	f.iface(101, 0)
	f.epb(1, 0, []byte{0x45, 0}, 2)
	p := write(t, "mixed.pcapng", f.b.Bytes())
	r, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, r)
	if len(got) != 5 || err == nil {
		t.Fatalf("%d records, error %v", len(got), err)
	}
	msg := err.Error()
	for _, s := range []string{p, "interface 1", "record 6", "RAW", "EN10MB"} {
		if !strings.Contains(msg, s) {
			t.Errorf("error %q does not mention %q", msg, s)
		}
	}
	t.Log(msg)
	// when the interfaces come first, Open fails
	f = &ngFile{o: binary.LittleEndian}
	f.section()
	f.iface(1, 0)
	f.iface(113, 0)
	if _, err := Open(write(t, "mixed2.pcapng", f.b.Bytes())); err == nil || !strings.Contains(err.Error(), "LINUX_SLL") {
		t.Fatalf("Open: %v", err)
	}
}

func TestTruncated(t *testing.T) {
	recs := genRecords(300, gen.Config{})
	full := classic(binary.LittleEndian, false, 1, 65535, recs)
	// offsets of each record
	offs := []int{24}
	for _, r := range recs {
		offs = append(offs, offs[len(offs)-1]+16+len(r.data))
	}
	for _, k := range []int{1, 150, 299} {
		for _, cut := range []int{offs[k] + 3, offs[k] + 16, offs[k] + 20} {
			p := write(t, "trace.pcap", full[:cut])
			r, err := Open(p)
			if err != nil {
				t.Fatal(err)
			}
			s := NewSource(r)
			pb := buffers.NewPBuf(256, 65535)
			b := buffers.NewBatch(pb, 0, 256, 0)
			n := 0
			var ferr error
			for ferr == nil {
				b.Reset()
				ferr = s.Fill(b)
				if ferr != nil && b.N != 0 {
					t.Fatal("error returned with packets")
				}
				n += b.N
			}
			if n != k {
				t.Fatalf("cut at %d: %d complete records, want %d", cut, n, k)
			}
			want := fmt.Sprintf("%s: truncated at record %d (byte offset %d): unexpected end of file", p, k+1, offs[k])
			if ferr.Error() != want {
				t.Fatalf("error %q, want %q", ferr, want)
			}
			if err := s.Fill(b); err != ferr {
				t.Fatalf("second Fill after the error: %v", err)
			}
			s.Close()
		}
	}
	// a cut inside the file header
	if _, err := Open(write(t, "hdr.pcap", full[:10])); err == nil || !strings.Contains(err.Error(), "truncated file header") {
		t.Fatalf("short header: %v", err)
	}
	// pcapng cut inside a block
	f := &ngFile{o: binary.LittleEndian}
	f.section()
	f.iface(1, 0)
	for _, r := range recs[:3] {
		f.epb(0, 0, r.data, r.wire)
	}
	ng := f.b.Bytes()
	r, err := NewReader(bytes.NewReader(ng[:len(ng)-5]), "t.pcapng", 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, r)
	if len(got) != 2 || err == nil || !strings.Contains(err.Error(), "t.pcapng: truncated at record 3 (byte offset") {
		t.Fatalf("%d records, %v", len(got), err)
	}
}

func TestHugeRecord(t *testing.T) {
	recs := genRecords(3, gen.Config{})
	data := classic(binary.LittleEndian, false, 1, 65535, recs)
	off := len(data)
	h := make([]byte, 16)
	binary.LittleEndian.PutUint32(h[8:], 0xfffffff0)
	binary.LittleEndian.PutUint32(h[12:], 0xfffffff0)
	data = append(data, h...)
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	r, err := NewReader(bytes.NewReader(data), "big.pcap", 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, r)
	runtime.ReadMemStats(&ms1)
	want := fmt.Sprintf("big.pcap: record 4 (byte offset %d) claims 4294967280 captured bytes, more than the 262144 a record may hold: the file is corrupt", off)
	if len(got) != 3 || err == nil || err.Error() != want {
		t.Fatalf("%d records, error %v\nwant %s", len(got), err, want)
	}
	if d := ms1.TotalAlloc - ms0.TotalAlloc; d > 8<<20 {
		t.Fatalf("allocated %d bytes", d)
	}
	// the same in pcapng
	f := &ngFile{o: binary.BigEndian}
	f.section()
	f.iface(1, 0)
	b := make([]byte, 20)
	binary.BigEndian.PutUint32(b[12:], 1<<30)
	f.block(6, b)
	r, _ = NewReader(bytes.NewReader(f.b.Bytes()), "big.pcapng", 0)
	if _, err := readAll(t, r); err == nil || !strings.Contains(err.Error(), "big.pcapng: corrupt block at byte offset 48 (before record 1): record 1 has 1073741824 captured bytes, more than the snap length 262144") {
		t.Fatalf("pcapng: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, path string
		data       []byte
		want       string
	}{
		{"missing", filepath.Join(dir, "nope.pcap"), nil, "cannot open " + filepath.Join(dir, "nope.pcap") + ": no such file or directory"},
		{"dir", dir, nil, "cannot read " + dir + ": is a directory"},
		{"empty", "", []byte{}, " is empty, not a pcap or pcapng file"},
		{"short", "", []byte{1, 2}, " is not a pcap or pcapng file (only 2 bytes long)"},
		{"text", "", []byte("hello world, this is not a capture"), " is not a pcap or pcapng file (it starts with 0x68656c6c)"},
		{"gzip", "", []byte{0x1f, 0x8b, 8, 0, 0, 0}, " is gzip-compressed: decompress it first"},
		{"version", "", classic(binary.LittleEndian, false, 1, 100, nil)[:4], "truncated file header"},
	}
	for _, c := range cases {
		p := c.path
		if c.data != nil {
			p = write(t, c.name, c.data)
		}
		_, err := Open(p)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v, want it to name %s and say %q", c.name, err, p, c.want)
		}
	}
	_, err := Open(filepath.Join(dir, "nope.pcap"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file error does not wrap fs.ErrNotExist")
	}
	hdr := classic(binary.BigEndian, false, 1, 100, nil)
	binary.BigEndian.PutUint16(hdr[4:], 3)
	if _, err := Open(write(t, "v3.pcap", hdr)); err == nil || !strings.Contains(err.Error(), "unsupported pcap format version 3.4") {
		t.Errorf("version 3: %v", err)
	}
}

// TestCorruptNeverPanics mutates valid files at random and reads them to
// the end: errors are fine, panics, hangs and huge allocations are not.
func TestCorruptNeverPanics(t *testing.T) {
	recs := genRecords(40, gen.Config{Malformed: 0.1})
	f := &ngFile{o: binary.LittleEndian}
	f.section()
	f.iface(1, 0, f.opt(9, []byte{9}))
	for _, r := range recs {
		f.epb(0, uint64(r.ts), r.data, r.wire)
	}
	seeds := [][]byte{classic(binary.BigEndian, true, 1, 1600, recs), f.b.Bytes()}
	rnd := uint64(1)
	next := func() uint64 { rnd ^= rnd << 13; rnd ^= rnd >> 7; rnd ^= rnd << 17; return rnd }
	for i := 0; i < 3000; i++ {
		d := append([]byte(nil), seeds[i%2]...)
		for k := 0; k < 1+int(next()%4); k++ {
			// mostly hit the headers: the first 64 bytes and record headers
			pos := int(next() % uint64(len(d)))
			if next()%2 == 0 {
				pos = int(next() % 64)
			}
			d[pos] = byte(next())
		}
		if next()%4 == 0 {
			d = d[:next()%uint64(len(d))]
		}
		readCorrupt(t, d)
	}
}

func readCorrupt(t *testing.T, d []byte) {
	r, err := NewReader(bytes.NewReader(d), "fuzz", int64(len(d)))
	if err != nil {
		return
	}
	for i := 0; i < 10000; i++ {
		if _, _, _, err := r.Next(); err != nil {
			return
		}
	}
	t.Fatal("reader did not end on a small file")
}

func FuzzReader(f *testing.F) {
	recs := genRecords(5, gen.Config{Malformed: 0.2})
	f.Add(classic(binary.LittleEndian, false, 1, 65535, recs))
	ng := &ngFile{o: binary.BigEndian}
	ng.section()
	ng.iface(1, 0)
	for _, r := range recs {
		ng.epb(0, 1, r.data, r.wire)
	}
	f.Add(ng.b.Bytes())
	f.Fuzz(func(t *testing.T, d []byte) { readCorrupt(t, d) })
}

func TestClassAndFill(t *testing.T) {
	recs := genRecords(2000, gen.Config{Malformed: 0.05})
	p := write(t, "trace.pcap", classic(binary.LittleEndian, false, 1, 1522, recs))
	c, ok := functions.Default.Lookup("pcap")
	if !ok || !c.IsSource() {
		t.Fatal("class pcap not registered as a source")
	}
	params, err := c.Bind([]functions.Arg{{Value: functions.Raw{Kind: functions.RawWord, Text: p}}})
	if err != nil || params.Str("file") != p {
		t.Fatalf("bare value does not bind to file: %v", err)
	}
	if _, err := c.Bind(nil); err == nil || !strings.Contains(err.Error(), "needs parameter file") {
		t.Fatalf("missing file: %v", err)
	}
	bad, _ := c.Bind([]functions.Arg{{Value: functions.Raw{Kind: functions.RawWord, Text: p + ".missing"}}})
	if _, err := c.NewSource(&functions.Context{Params: bad}); err == nil || !strings.Contains(err.Error(), p+".missing: no such file") {
		t.Fatalf("instantiating a missing file: %v", err)
	}
	src, err := c.NewSource(&functions.Context{Params: params})
	if err != nil {
		t.Fatal(err)
	}
	info := src.Info()
	st, _ := os.Stat(p)
	if info.Name != p || info.LinkType != functions.LinkEthernet || info.MaxCapLen != 1522 || info.Size != st.Size() {
		t.Fatalf("info %+v", info)
	}
	// slots shorter than some records: truncated, wire length kept
	pb := buffers.NewPBuf(512, 1000)
	b := buffers.NewBatch(pb, 256, 256, 3)
	var got []rec
	for {
		b.Reset()
		err := src.Fill(b)
		for _, e := range b.Entries() {
			m := pb.Meta(e.Slot)
			if m.Source != 3 {
				t.Fatal("source index not recorded")
			}
			got = append(got, rec{append([]byte(nil), pb.Data(e.Slot)...), int(m.WireLen), m.Timestamp})
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	want := make([]rec, len(recs))
	for i, r := range recs {
		want[i] = rec{r.data[:min(1000, len(r.data))], max(r.wire, len(r.data)), r.ts}
	}
	same(t, got, want, 1000)
	if d, tot := src.(functions.Progresser).Progress(); d != tot || tot != st.Size() {
		t.Fatalf("progress %d of %d", d, tot)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestFillNoAllocs(t *testing.T) {
	var buf bytes.Buffer
	gen.WritePcap(&buf, gen.Config{Packets: 60000}, 0)
	r, err := NewReader(bytes.NewReader(buf.Bytes()), "x", 0)
	if err != nil {
		t.Fatal(err)
	}
	s := NewSource(r)
	pb := buffers.NewPBuf(256, gen.MaxFrameLen)
	b := buffers.NewBatch(pb, 0, 256, 0)
	if a := testing.AllocsPerRun(200, func() { b.Reset(); s.Fill(b) }); a != 0 {
		t.Fatalf("Fill allocates %.1f times per batch", a)
	}
	// pcapng
	f := &ngFile{o: binary.LittleEndian}
	f.section()
	f.iface(1, 0)
	for _, r := range genRecords(60000, gen.Config{}) {
		f.epb(0, uint64(r.ts/1000), r.data, r.wire)
	}
	r, _ = NewReader(bytes.NewReader(f.b.Bytes()), "x", 0)
	s = NewSource(r)
	if a := testing.AllocsPerRun(200, func() { b.Reset(); s.Fill(b) }); a != 0 {
		t.Fatalf("pcapng Fill allocates %.1f times per batch", a)
	}
}

func TestCloseDuringFill(t *testing.T) {
	var buf bytes.Buffer
	gen.WritePcap(&buf, gen.Config{Packets: 100000}, 0)
	p := write(t, "big.pcap", buf.Bytes())
	r, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	s := NewSource(r)
	var wg sync.WaitGroup
	wg.Add(1)
	var last error
	go func() {
		defer wg.Done()
		pb := buffers.NewPBuf(256, gen.MaxFrameLen)
		b := buffers.NewBatch(pb, 0, 256, 0)
		for {
			b.Reset()
			if err := s.Fill(b); err != nil {
				last = err
				return
			}
		}
	}()
	time.Sleep(2 * time.Millisecond)
	s.Close()
	wg.Wait()
	if last != io.EOF {
		t.Fatalf("Fill after Close: %v", last)
	}
}

func BenchmarkFill(b *testing.B) {
	var buf bytes.Buffer
	gen.WritePcap(&buf, gen.Config{Packets: 100000}, 0)
	p := filepath.Join(b.TempDir(), "bench.pcap")
	os.WriteFile(p, buf.Bytes(), 0o644)
	pb := buffers.NewPBuf(256, gen.MaxFrameLen)
	bt := buffers.NewBatch(pb, 0, 256, 0)
	b.SetBytes(int64(buf.Len()))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := Open(p)
		if err != nil {
			b.Fatal(err)
		}
		s := NewSource(r)
		for {
			bt.Reset()
			if s.Fill(bt) != nil {
				break
			}
		}
		s.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100000), "ns/pkt")
}

// BenchmarkFile reads the file named by $FFPF_BENCH_PCAP through the
// source, e.g. a trace written by `ffpf gen`, to compare with
// `time tcpdump -r FILE -w /dev/null`.
func BenchmarkFile(b *testing.B) {
	path := os.Getenv("FFPF_BENCH_PCAP")
	if path == "" {
		b.Skip("set FFPF_BENCH_PCAP to a capture file")
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	b.ReportAllocs()
	var pkts int
	for i := 0; i < b.N; i++ {
		r, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		s := NewSource(r)
		pb := buffers.NewPBuf(512, s.Info().MaxCapLen)
		bs := [2]*buffers.Batch{buffers.NewBatch(pb, 0, 256, 0), buffers.NewBatch(pb, 256, 256, 0)}
		for j := 0; ; j++ {
			bt := bs[j&1]
			bt.Reset()
			if err := s.Fill(bt); err != nil {
				if err != io.EOF {
					b.Fatal(err)
				}
				break
			}
			pkts += bt.N
		}
		s.Close()
	}
	b.ReportMetric(float64(pkts)/b.Elapsed().Seconds(), "pkts/s")
}

func TestValidate(t *testing.T) {
	c, _ := functions.Default.Lookup("pcap")
	good := write(t, "good.pcap", classic(binary.LittleEndian, false, 113, 100, nil))
	bad := write(t, "bad.pcap", []byte("not a capture file"))
	// a file that cannot be read is not a bad request: instantiation
	// reports it (a runtime error)
	for path, lt := range map[string]functions.LinkType{good: functions.LinkLinuxSLL, bad: functions.LinkEthernet,
		good + ".missing": functions.LinkEthernet} {
		p, _ := c.Bind([]functions.Arg{{Value: functions.Raw{Kind: functions.RawWord, Text: path}}})
		ctx := &functions.Context{Params: p}
		if err := c.Validate(ctx); err != nil || ctx.LinkType != lt {
			t.Errorf("%s: Validate: %v, link type %v", path, err, ctx.LinkType)
		}
	}
}

// gopacketRecs reads every record through one of gopacket's readers, the
// reference these tests compare against.
func gopacketRecs(r interface {
	ReadPacketData() ([]byte, gopacket.CaptureInfo, error)
}) []rec {
	var out []rec
	for {
		d, ci, err := r.ReadPacketData()
		if err != nil {
			return out
		}
		out = append(out, rec{d, ci.Length, ci.Timestamp.UnixNano()})
	}
}
