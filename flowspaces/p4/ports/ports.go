// Package ports connects the PISA model's ports (flowspaces/p4/pisa) to
// the world, as bmv2's interfaces do: a network interface read and
// written through an AF_PACKET socket, a capture file replayed into a
// port (its timestamps the switch's clock), and a capture file that
// records what leaves a port. `ffpf p4 switch` is made of these.
//
// An interface port delivers each frame as it was on the wire: the VLAN
// tag the kernel took off into the packet's metadata is put back, TPID
// and all, as libpcap does. Frames it could not take (its socket's
// buffer full, or longer than 64 KiB) are counted, never lost silently.
//
// The sharp edge: an interface port sees the frames the kernel delivers
// to a packet socket, offloads included (a GRO-merged frame is one frame
// larger than the MTU); the socket skips the frames the switch itself
// sends.
package ports

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// FileIn replays a capture file (pcap or pcapng) into a port.
type FileIn struct {
	path string
	f    *os.File
	r    interface {
		ReadPacketData() ([]byte, gopacket.CaptureInfo, error)
	}
}

// OpenFileIn opens a capture file of Ethernet frames.
func OpenFileIn(path string) (*FileIn, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("port file %s: %v", path, err)
	}
	br := bufio.NewReaderSize(f, 1<<16)
	magic, _ := br.Peek(4)
	var r interface {
		ReadPacketData() ([]byte, gopacket.CaptureInfo, error)
	}
	var lt layers.LinkType
	if len(magic) == 4 && magic[0] == 0x0a && magic[1] == 0x0d && magic[2] == 0x0d && magic[3] == 0x0a {
		ng, err := pcapgo.NewNgReader(br, pcapgo.DefaultNgReaderOptions)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("port file %s: %v", path, err)
		}
		r, lt = ng, ng.LinkType()
	} else {
		pr, err := pcapgo.NewReader(br)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("port file %s: not a capture file: %v", path, err)
		}
		r, lt = pr, pr.LinkType()
	}
	if lt != layers.LinkTypeEthernet {
		f.Close()
		return nil, fmt.Errorf("port file %s: link type %v; a switch port takes Ethernet frames", path, lt)
	}
	return &FileIn{path: path, f: f, r: r}, nil
}

// Next returns the next frame and its capture time; io.EOF at the end.
func (p *FileIn) Next() ([]byte, time.Time, error) {
	data, ci, err := p.r.ReadPacketData()
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, time.Time{}, io.EOF
	}
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("port file %s: %v", p.path, err)
	}
	return data, ci.Timestamp, nil
}

// Close closes the file.
func (p *FileIn) Close() error { return p.f.Close() }

// FileOut records the frames leaving a port as a pcap file.
type FileOut struct {
	mu sync.Mutex
	f  *os.File
	bw *bufio.Writer
	w  *pcapgo.Writer
	n  uint64
}

// CreateFileOut creates (or truncates) a pcap file of Ethernet frames.
func CreateFileOut(path string) (*FileOut, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("port file %s: %v", path, err)
	}
	bw := bufio.NewWriter(f)
	w := pcapgo.NewWriterNanos(bw)
	if err := w.WriteFileHeader(65536, layers.LinkTypeEthernet); err != nil {
		f.Close()
		return nil, fmt.Errorf("port file %s: %v", path, err)
	}
	return &FileOut{f: f, bw: bw, w: w}, nil
}

// Write records a frame leaving at time t.
func (p *FileOut) Write(frame []byte, t time.Time) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	return p.w.WritePacket(gopacket.CaptureInfo{Timestamp: t, CaptureLength: len(frame), Length: len(frame)}, frame)
}

// Frames returns how many frames were recorded.
func (p *FileOut) Frames() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// Close writes what is buffered and closes the file.
func (p *FileOut) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.bw.Flush(); err != nil {
		p.f.Close()
		return err
	}
	return p.f.Close()
}
