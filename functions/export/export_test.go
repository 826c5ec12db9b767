package export

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/gen"
	"github.com/ffpf-go/ffpf/functions/pcap"
)

// pipeline reads in through the pcap source and writes every packet
// through an export function, the way the flowgraph would run
// (pcap,file=in) > (export,file=out).
func pipeline(t *testing.T, in, out string) (packets int) {
	t.Helper()
	pc, _ := functions.Default.Lookup("pcap")
	ex, ok := functions.Default.Lookup("export")
	if !ok || ex.IsSource() || ex.MinInputs != 1 || ex.MaxInputs != -1 {
		t.Fatal("class export not registered as a function with inputs 1..")
	}
	pp, err := pc.Bind([]functions.Arg{{Value: functions.Raw{Kind: functions.RawWord, Text: in}}})
	if err != nil {
		t.Fatal(err)
	}
	src, err := pc.NewSource(&functions.Context{Params: pp})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	info := src.Info()
	ep, err := ex.Bind([]functions.Arg{{Value: functions.Raw{Kind: functions.RawWord, Text: out}}})
	if err != nil {
		t.Fatal(err)
	}
	fn, err := ex.New(&functions.Context{Params: ep, LinkType: info.LinkType, Snaplen: info.MaxCapLen})
	if err != nil {
		t.Fatal(err)
	}
	pb := buffers.NewPBuf(512, info.MaxCapLen)
	bs := []*buffers.Batch{buffers.NewBatch(pb, 0, 256, 0), buffers.NewBatch(pb, 256, 256, 0)}
	for i := 0; ; i++ {
		b := bs[i%2]
		b.Reset()
		err := src.Fill(b)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		in := b.N
		fn.Process(b)
		if b.N != in || b.Dropped != 0 {
			t.Fatalf("export passed %d of %d packets, dropped %d", b.N, in, b.Dropped)
		}
		packets += in
	}
	if err := fn.(functions.Closer).Close(); err != nil {
		t.Fatal(err)
	}
	return packets
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.pcap"), filepath.Join(dir, "out.pcap")
	f, _ := os.Create(in)
	if err := gen.WritePcap(f, gen.Config{Packets: 30000, Malformed: 0.05, VLAN: 0.1, IPv6: 0.3}, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if n := pipeline(t, in, out); n != 30000 {
		t.Fatalf("%d packets", n)
	}
	a, _ := os.ReadFile(in)
	b, _ := os.ReadFile(out)
	if !bytes.Equal(a, b) {
		t.Fatalf("gen.WritePcap → pcap → export is not byte-identical (%d vs %d bytes)", len(a), len(b))
	}
	// and once more through our own output
	out2 := filepath.Join(dir, "out2.pcap")
	pipeline(t, out, out2)
	c, _ := os.ReadFile(out2)
	if !bytes.Equal(a, c) {
		t.Fatal("second round trip differs")
	}
	tcpdump, err := exec.LookPath("tcpdump")
	if err != nil {
		t.Log("tcpdump not found; not checking that it reads the output")
		return
	}
	cmd := exec.Command(tcpdump, "-r", out, "-w", "/dev/null")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("tcpdump -r %s: %v: %s", out, err, stderr.String())
	}
	// count the packets it prints: each line starting with the timestamp,
	// and zero-length records, which it prints as "[Invalid header...]"
	o, err := exec.Command(tcpdump, "-tt", "-nn", "-r", out).Output()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(o), "\n") {
		if strings.HasPrefix(l, "1704067200.") || strings.HasPrefix(l, "[Invalid header") {
			n++
		}
	}
	if n != 30000 {
		t.Fatalf("tcpdump reads %d packets, want 30000", n)
	}
}

// TestLinkTypeAndSnaplen writes a non-Ethernet capture and checks the
// header and a record's fields, including truncation to the snap length.
func TestLinkTypeAndSnaplen(t *testing.T) {
	var out bytes.Buffer
	e, err := New(&out, "mem", functions.LinkRaw, 40)
	if err != nil {
		t.Fatal(err)
	}
	pb := buffers.NewPBuf(4, 100)
	b := buffers.NewBatch(pb, 0, 4, 0)
	pkt := make([]byte, 100)
	pkt[0] = 0x45
	b.Append(pkt, 1500, 1_700_000_000_123_456_789)
	b.Append(pkt[:10], 10, -1) // one nanosecond before 1970
	e.Process(b)
	if b.N != 2 {
		t.Fatalf("passed %d", b.N)
	}
	e.Close()
	d := out.Bytes()
	le := binary.LittleEndian
	if le.Uint32(d) != 0xa1b2c3d4 || le.Uint32(d[16:]) != 40 || le.Uint32(d[20:]) != 101 {
		t.Fatalf("header % x", d[:24])
	}
	r := d[24:]
	if le.Uint32(r) != 1_700_000_000 || le.Uint32(r[4:]) != 123456 || le.Uint32(r[8:]) != 40 || le.Uint32(r[12:]) != 1500 {
		t.Fatalf("record header % x", r[:16])
	}
	r = r[16+40:]
	if int32(le.Uint32(r)) != -1 || le.Uint32(r[4:]) != 999999 || le.Uint32(r[8:]) != 10 {
		t.Fatalf("second record header % x", r[:16])
	}
	rd, err := pcap.NewReader(bytes.NewReader(d), "mem", 0)
	if err != nil || rd.LinkType() != functions.LinkRaw {
		t.Fatalf("reading back: %v", err)
	}
}

// failAfter accepts limit bytes, then fails like a full disk.
type failAfter struct {
	limit, n int
}

func (f *failAfter) Write(p []byte) (int, error) {
	room := f.limit - f.n
	if len(p) <= room {
		f.n += len(p)
		return len(p), nil
	}
	f.n += room
	return room, syscall.ENOSPC
}

func TestWriteError(t *testing.T) {
	// 24-byte header, then room for 2.5 records of 16+100 bytes
	w := &failAfter{limit: 24 + 116*2 + 50}
	e, err := New(w, "full.pcap", functions.LinkEthernet, 200)
	if err != nil {
		t.Fatal(err)
	}
	pb := buffers.NewPBuf(8, 200)
	b := buffers.NewBatch(pb, 0, 8, 0)
	for i := 0; i < 5; i++ {
		b.Append(make([]byte, 100), 100, int64(i))
	}
	b.E[1].Class = 7
	e.Process(b)
	if b.N != 2 || b.Dropped != 3 || b.E[1].Class != 7 {
		t.Fatalf("after a failed write: %d passed, %d dropped", b.N, b.Dropped)
	}
	// later batches are dropped whole
	b.Reset()
	b.Append(make([]byte, 10), 10, 0)
	e.Process(b)
	if b.N != 0 || b.Dropped != 1 {
		t.Fatalf("after the error: %d passed, %d dropped", b.N, b.Dropped)
	}
	err = e.Close()
	if err == nil || err.Error() != "cannot write full.pcap: no space left on device" || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat("/dev/full"); err == nil {
		_, err := Create("/dev/full", functions.LinkEthernet, 1514)
		if err == nil || err.Error() != "cannot write /dev/full: no space left on device" {
			t.Fatalf("Create(/dev/full): %v", err)
		}
	}
	_, err = Create("/nonexistent/dir/out.pcap", functions.LinkEthernet, 1514)
	if err == nil || err.Error() != "cannot create /nonexistent/dir/out.pcap: no such file or directory" {
		t.Fatalf("Create in a missing directory: %v", err)
	}
}

func TestProcessNoAllocs(t *testing.T) {
	e, err := New(io.Discard, "discard", functions.LinkEthernet, gen.MaxFrameLen)
	if err != nil {
		t.Fatal(err)
	}
	s := gen.NewSource(gen.Config{})
	pb := buffers.NewPBuf(256, gen.MaxFrameLen)
	b := buffers.NewBatch(pb, 0, 256, 0)
	if a := testing.AllocsPerRun(100, func() { b.Reset(); s.Fill(b); e.Process(b) }); a != 0 {
		t.Fatalf("Process allocates %.1f times per batch", a)
	}
}

func BenchmarkProcess(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "out.pcap"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	e, _ := New(f, "out.pcap", functions.LinkEthernet, gen.MaxFrameLen)
	s := gen.NewSource(gen.Config{})
	pb := buffers.NewPBuf(256, gen.MaxFrameLen)
	bt := buffers.NewBatch(pb, 0, 256, 0)
	bt.Reset()
	s.Fill(bt)
	var bytes int64
	for _, en := range bt.Entries() {
		bytes += int64(16 + pb.Meta(en.Slot).CapLen)
	}
	b.SetBytes(bytes)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bt.N = 256
		e.Process(bt)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*256), "ns/pkt")
}
