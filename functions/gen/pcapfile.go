package gen

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// WritePcap writes the trace cfg describes to w as a classic pcap file
// (LINKTYPE_ETHERNET, microsecond timestamps, little-endian) whose header
// records snaplen (0: MaxFrameLen), each frame truncated to it. It needs a
// packet count: with cfg.Packets 0 the trace has no end.
func WritePcap(w io.Writer, cfg Config, snaplen int) error {
	if snaplen <= 0 {
		snaplen = MaxFrameLen
	}
	if cfg.Packets <= 0 {
		return fmt.Errorf("gen: WritePcap needs a packet count")
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	pw, err := NewPcapWriter(bw, snaplen)
	if err != nil {
		return err
	}
	g := New(cfg)
	buf := make([]byte, min(snaplen, MaxFrameLen))
	for {
		c, n, ts, ok := g.Next(buf)
		if !ok {
			break
		}
		if err := pw.Write(buf[:c], n, ts); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// PcapWriter writes frames to a classic pcap file: LINKTYPE_ETHERNET,
// microsecond timestamps, little-endian, as Wireshark and tcpdump write
// them. It does not buffer: give it a buffered writer.
type PcapWriter struct {
	w     io.Writer
	hdr   [16]byte
	nanos bool
}

// NewPcapWriter writes the file header, recording snaplen, to w.
func NewPcapWriter(w io.Writer, snaplen int) (*PcapWriter, error) {
	return newPcapWriter(w, snaplen, false)
}

// NewPcapWriterNanos is NewPcapWriter for a file of nanosecond
// timestamps (the magic a1b23c4d), which keep ts whole.
func NewPcapWriterNanos(w io.Writer, snaplen int) (*PcapWriter, error) {
	return newPcapWriter(w, snaplen, true)
}

func newPcapWriter(w io.Writer, snaplen int, nanos bool) (*PcapWriter, error) {
	var h [24]byte
	magic := uint32(0xa1b2c3d4) // microseconds
	if nanos {
		magic = 0xa1b23c4d
	}
	binary.LittleEndian.PutUint32(h[0:], magic)
	binary.LittleEndian.PutUint16(h[4:], 2) // version 2.4
	binary.LittleEndian.PutUint16(h[6:], 4)
	// thiszone and sigfigs stay 0
	binary.LittleEndian.PutUint32(h[16:], uint32(snaplen))
	binary.LittleEndian.PutUint32(h[20:], 1) // LINKTYPE_ETHERNET
	_, err := w.Write(h[:])
	return &PcapWriter{w: w, nanos: nanos}, err
}

// Write appends a record: the captured bytes of a frame that was wire
// bytes long, taken at ts nanoseconds since the epoch (written in
// microseconds, rounded down, unless the file is of nanoseconds).
func (p *PcapWriter) Write(frame []byte, wire int, ts int64) error {
	if len(frame) > wire {
		return fmt.Errorf("gen: a record of %d bytes captured of %d on the wire", len(frame), wire)
	}
	sec, ns := ts/1e9, ts%1e9
	if ns < 0 {
		sec, ns = sec-1, ns+1e9
	}
	binary.LittleEndian.PutUint32(p.hdr[0:], uint32(sec))
	frac := ns / 1e3
	if p.nanos {
		frac = ns
	}
	binary.LittleEndian.PutUint32(p.hdr[4:], uint32(frac))
	binary.LittleEndian.PutUint32(p.hdr[8:], uint32(len(frame)))
	binary.LittleEndian.PutUint32(p.hdr[12:], uint32(wire))
	if _, err := p.w.Write(p.hdr[:]); err != nil {
		return err
	}
	_, err := p.w.Write(frame)
	return err
}
