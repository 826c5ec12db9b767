// Package ports connects the PISA model's ports (flowspaces/p4/pisa) to
// the world, as bmv2's interfaces do: a network interface read and
// written through an AF_PACKET socket, a capture file replayed into a
// port (its timestamps the switch's clock), and a capture file that
// records what leaves a port. `ffpf p4 switch` is made of these.
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
	"net"
	"os"
	"sync"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"golang.org/x/sys/unix"
)

// Iface is a port on a network interface.
type Iface struct {
	name string
	fd   int
	mu   sync.Mutex // writes
	// Errors counts frames the interface refused to send.
	Errors uint64
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// OpenIface opens a packet socket on interface name, in promiscuous mode.
// Root or CAP_NET_RAW is needed.
func OpenIface(name string) (*Iface, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("no network interface %s", name)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return nil, fmt.Errorf("port %s: cannot open a packet socket: %v (root or CAP_NET_RAW is needed)", name, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("port %s: %v", name, err)
	}
	mreq := unix.PacketMreq{Ifindex: int32(ifc.Index), Type: unix.PACKET_MR_PROMISC}
	if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("port %s: promiscuous mode: %v", name, err)
	}
	// A read returns at least every 100 ms, so that Read sees Close.
	tv := unix.Timeval{Usec: 100000}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("port %s: %v", name, err)
	}
	return &Iface{name: name, fd: fd}, nil
}

// Name returns the interface's name.
func (p *Iface) Name() string { return p.name }

// Read calls f with each frame that arrives (the slice is reused) until
// done is closed or the socket fails.
func (p *Iface) Read(done <-chan struct{}, f func(frame []byte)) error {
	buf := make([]byte, 1<<16)
	for {
		select {
		case <-done:
			return nil
		default:
		}
		n, from, err := unix.Recvfrom(p.fd, buf, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("port %s: %v", p.name, err)
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue // what this or another socket sent out of the port
		}
		f(buf[:n])
	}
}

// Write sends a frame out of the interface; a frame it refuses is
// counted in Errors.
func (p *Iface) Write(frame []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		_, err := unix.Write(p.fd, frame)
		if errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.EAGAIN) {
			time.Sleep(50 * time.Microsecond)
			continue
		}
		if err != nil {
			p.Errors++
		}
		return
	}
}

// Close closes the socket.
func (p *Iface) Close() error { return unix.Close(p.fd) }

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
