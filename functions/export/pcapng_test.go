package export

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"syscall"
	"testing"

	"github.com/google/gopacket/pcapgo"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/gen"
)

// gopacket's pcapng reader reads back what NgExporter wrote: every length
// of padding, nanosecond timestamps, wire lengths, truncation to the snap
// length.
func TestPcapngRoundTrip(t *testing.T) {
	var out bytes.Buffer
	e, err := NewNg(&out, "x.pcapng", functions.LinkEthernet, 100)
	if err != nil {
		t.Fatal(err)
	}
	pb := buffers.NewPBuf(8, 200)
	b := buffers.NewBatch(pb, 0, 8, 0)
	type pkt struct {
		data []byte
		wire uint32
		ts   int64
	}
	var in []pkt
	for i := range 6 {
		d := bytes.Repeat([]byte{byte(i + 1)}, 60+i)
		in = append(in, pkt{d, uint32(len(d) + 7*i), 1_700_000_000_123_456_789 + int64(i)})
	}
	in = append(in, pkt{bytes.Repeat([]byte{9}, 150), 1500, 1_700_000_001_000_000_001})
	for _, p := range in {
		b.Append(p.data, p.wire, p.ts)
	}
	e.Process(b)
	if b.N != len(in) || b.Dropped != 0 {
		t.Fatalf("passed %d of %d, dropped %d", b.N, len(in), b.Dropped)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := pcapgo.NewNgReader(bytes.NewReader(out.Bytes()), pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	if r.LinkType() != 1 {
		t.Errorf("link type %v", r.LinkType())
	}
	for i, p := range in {
		data, ci, err := r.ReadPacketData()
		if err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		want := p.data[:min(len(p.data), 100)]
		if !bytes.Equal(data, want) || ci.Length != int(p.wire) || ci.Timestamp.UnixNano() != p.ts {
			t.Errorf("packet %d: %d bytes, wire %d, time %d; want %d, %d, %d", i, len(data), ci.Length,
				ci.Timestamp.UnixNano(), len(want), p.wire, p.ts)
		}
	}
	if _, _, err := r.ReadPacketData(); err != io.EOF {
		t.Errorf("after the packets: %v", err)
	}
}

// A link type above 255 (LINUX_SLL2) is written whole.
func TestPcapngLinkType(t *testing.T) {
	var out bytes.Buffer
	if _, err := NewNg(&out, "x.pcapng", functions.LinkSLL2, 0); err != nil {
		t.Fatal(err)
	}
	h := out.Bytes()
	if len(h) != 72 || binary.LittleEndian.Uint32(h[40:]) != ngIDB || binary.LittleEndian.Uint16(h[48:]) != 276 ||
		binary.LittleEndian.Uint32(h[52:]) != DefaultSnaplen {
		t.Errorf("header % x", h)
	}
}

func TestPcapngWriteError(t *testing.T) {
	// 72-byte header, then room for 2.5 blocks of 28+100+4 bytes
	w := &ngFull{limit: 72 + 132*2 + 50}
	e, err := NewNg(w, "full.pcapng", functions.LinkEthernet, 200)
	if err != nil {
		t.Fatal(err)
	}
	pb := buffers.NewPBuf(8, 200)
	b := buffers.NewBatch(pb, 0, 8, 0)
	for i := range 5 {
		b.Append(make([]byte, 100), 100, int64(i))
	}
	e.Process(b)
	if b.N != 2 || b.Dropped != 3 {
		t.Fatalf("after a failed write: %d passed, %d dropped", b.N, b.Dropped)
	}
	b.Reset()
	b.Append(make([]byte, 10), 10, 0)
	e.Process(b)
	if b.N != 0 || b.Dropped != 1 {
		t.Fatalf("after the error: %d passed, %d dropped", b.N, b.Dropped)
	}
	if err := e.Close(); err == nil || err.Error() != "cannot write full.pcapng: no space left on device" || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Close: %v", err)
	}
}

// The class writes pcapng for a name ending in .pcapng.
func TestPcapngByName(t *testing.T) {
	for name, want := range map[string]bool{"a.pcapng": true, "A.PCAPNG": true, "a.pcap": false, "pcapng": false, "-": false} {
		if IsPcapng(name) != want {
			t.Errorf("IsPcapng(%q) = %v", name, !want)
		}
	}
}

func TestPcapngNoAllocs(t *testing.T) {
	e, err := NewNg(io.Discard, "discard", functions.LinkEthernet, gen.MaxFrameLen)
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

// ngFull is a disk that fills after limit bytes.
type ngFull struct{ limit, n int }

func (f *ngFull) Write(p []byte) (int, error) {
	k := min(len(p), f.limit-f.n)
	f.n += k
	if k < len(p) {
		return k, syscall.ENOSPC
	}
	return k, nil
}
