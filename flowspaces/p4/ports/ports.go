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

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/gen"
	"github.com/ffpf-go/ffpf/functions/pcap"
)

// FileIn replays a capture file (pcap or pcapng) into a port.
type FileIn struct {
	path string
	r    *pcap.Reader
}

// OpenFileIn opens a capture file of Ethernet frames.
func OpenFileIn(path string) (*FileIn, error) {
	r, err := pcap.OpenAccess(path, pcap.AccessRead)
	if err != nil {
		return nil, fmt.Errorf("port file: %v", err) // it names the file
	}
	if lt := r.LinkType(); lt != functions.LinkEthernet {
		r.Close()
		return nil, fmt.Errorf("port file %s: link type %v; a switch port takes Ethernet frames", path, lt)
	}
	return &FileIn{path: path, r: r}, nil
}

// Next returns the next frame (valid until the next call) and its capture
// time; io.EOF at the end.
func (p *FileIn) Next() ([]byte, time.Time, error) {
	data, _, ts, err := p.r.Next()
	if errors.Is(err, io.EOF) {
		return nil, time.Time{}, io.EOF
	}
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("port file %s: %v", p.path, err)
	}
	return data, time.Unix(0, ts), nil
}

// Close closes the file.
func (p *FileIn) Close() error { return p.r.Close() }

// FileOut records the frames leaving a port as a pcap file (nanosecond
// timestamps).
type FileOut struct {
	mu sync.Mutex
	f  *os.File
	bw *bufio.Writer
	w  *gen.PcapWriter
	n  uint64
}

// CreateFileOut creates (or truncates) a pcap file of Ethernet frames.
func CreateFileOut(path string) (*FileOut, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("port file %s: %v", path, err)
	}
	bw := bufio.NewWriter(f)
	w, err := gen.NewPcapWriterNanos(bw, 65536)
	if err != nil {
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
	return p.w.Write(frame, len(frame), t.UnixNano())
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
