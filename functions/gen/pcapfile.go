package gen

import (
	"bufio"
	"fmt"
	"io"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
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
	pw := pcapgo.NewWriter(bw)
	if err := pw.WriteFileHeader(uint32(snaplen), layers.LinkTypeEthernet); err != nil {
		return err
	}
	g := New(cfg)
	buf := make([]byte, min(snaplen, MaxFrameLen))
	for {
		c, n, ts, ok := g.Next(buf)
		if !ok {
			break
		}
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, ts), CaptureLength: c, Length: n}
		if err := pw.WritePacket(ci, buf[:c]); err != nil {
			return err
		}
	}
	return bw.Flush()
}
