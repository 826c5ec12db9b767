package ports

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	// ifaceBatch is how many frames one read (recvmmsg) takes at most.
	ifaceBatch = 32
	// maxFrame is the longest frame a port reads: an IP packet of 64 KiB
	// that GRO or a sender's TSO made, with its Ethernet header; a longer
	// one is counted (TooLong), not delivered.
	maxFrame = 1<<16 + 64
	// tagLen is the 802.1Q/802.1ad tag's length: each read leaves room
	// before the frame to put back the tag the kernel took off.
	tagLen = 4
	// rcvBuf is the socket's receive buffer (the kernel doubles it): what
	// the switch may fall behind by before frames are lost: 26,000 frames
	// of 300 bytes, 1.3 s at 20,000 frames a second. The kernel's default
	// (212 KB) holds 167 of them: 8 ms, less than a loaded machine may
	// leave the switch unscheduled.
	rcvBuf = 16 << 20
	// sizeofAuxdata is struct tpacket_auxdata's size.
	sizeofAuxdata = int(unsafe.Sizeof(unix.TpacketAuxdata{}))
	// auxLen is the room for one control message holding tpacket_auxdata.
	auxLen = (unix.SizeofCmsghdr + sizeofAuxdata + 7) &^ 7
)

// Iface is a port on a network interface: an AF_PACKET socket bound to
// it, read in batches through the runtime's poller.
type Iface struct {
	name string
	room int // the longest frame a read takes
	fd   int
	file *os.File // fd, non-blocking, on the runtime's poller
	rc   syscall.RawConn
	mu   sync.Mutex // writes

	// Reading: one goroutine.
	hdrs  []unix.Mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrLinklayer
	ctrl  []byte
	bufs  []byte
	n     int // messages the last recvmmsg returned
	errno syscall.Errno
	recv  func(fd uintptr) bool // p.recvmmsg, bound once

	received atomic.Uint64
	tooLong  atomic.Uint64
	errors   atomic.Uint64

	statsMu sync.Mutex
	lost    uint64 // the kernel's drops, summed (reading them resets them)
	closed  bool
}

// IfaceStats is what a port did with frames.
type IfaceStats struct {
	Received uint64 // frames delivered to the switch
	Lost     uint64 // frames the kernel dropped: the socket's buffer was full
	TooLong  uint64 // frames longer than 64 KiB (and 64 bytes), not delivered
	Errors   uint64 // frames the interface refused to send
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// OpenIface opens a packet socket on interface name, in promiscuous mode.
// Root or CAP_NET_RAW is needed.
func OpenIface(name string) (*Iface, error) { return openIface(name, maxFrame) }

// openIface opens a port that reads frames of up to room bytes.
func openIface(name string, room int) (*Iface, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("no network interface %s", name)
	}
	// Protocol 0 until bound, as libpcap does: a socket of ETH_P_ALL
	// receives from every interface until bind narrows it to one.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("port %s: cannot open a packet socket: %v (root or CAP_NET_RAW is needed)", name, err)
	}
	fail := func(what string, err error) (*Iface, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("port %s: %s%v", name, what, err)
	}
	// The VLAN tag the kernel takes off comes with each frame.
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
		return fail("VLAN tags (PACKET_AUXDATA): ", err)
	}
	// As root beyond net.core.rmem_max; otherwise up to it.
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvBuf) != nil {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvBuf)
	}
	// What this or another socket sends out of the port is not read
	// (Linux 4.20; before, Read skips it by its packet type).
	unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index}); err != nil {
		return fail("", err)
	}
	mreq := unix.PacketMreq{Ifindex: int32(ifc.Index), Type: unix.PACKET_MR_PROMISC}
	if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
		return fail("promiscuous mode: ", err)
	}
	// Nothing was lost before the port opened.
	unix.GetsockoptTpacketStats(fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	file := os.NewFile(uintptr(fd), "packet socket on "+name)
	rc, err := file.SyscallConn()
	if err != nil {
		file.Close()
		return nil, fmt.Errorf("port %s: %v", name, err)
	}
	p := &Iface{name: name, room: room, fd: fd, file: file, rc: rc,
		hdrs:  make([]unix.Mmsghdr, ifaceBatch),
		iovs:  make([]unix.Iovec, ifaceBatch),
		names: make([]unix.RawSockaddrLinklayer, ifaceBatch),
		ctrl:  make([]byte, ifaceBatch*auxLen),
		bufs:  make([]byte, ifaceBatch*(tagLen+room)),
	}
	for i := range p.hdrs {
		p.iovs[i].Base = &p.bufs[i*(tagLen+room)+tagLen]
		p.iovs[i].SetLen(room)
		h := &p.hdrs[i].Hdr
		h.Iov = &p.iovs[i]
		h.SetIovlen(1)
		h.Name = (*byte)(unsafe.Pointer(&p.names[i]))
		h.Control = &p.ctrl[i*auxLen]
	}
	p.recv = p.recvmmsg
	return p, nil
}

// Name returns the interface's name.
func (p *Iface) Name() string { return p.name }

// Read calls f with each frame that arrives, as it was on the wire (the
// slice is reused), until done is closed or the socket fails. One
// goroutine reads a port.
func (p *Iface) Read(done <-chan struct{}, f func(frame []byte)) error {
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-done:
			p.file.SetReadDeadline(time.Unix(1, 0)) // wakes the read below
		case <-stop:
		}
	}()
	for {
		if err := p.rc.Read(p.recv); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return nil
			}
			return fmt.Errorf("port %s: %v", p.name, err)
		}
		if p.errno != 0 {
			return fmt.Errorf("port %s: %v", p.name, p.errno)
		}
		for i := range p.n {
			p.deliver(i, f)
		}
	}
}

// recvmmsg reads a batch without blocking; false asks the runtime's
// poller to wait until the socket is readable.
func (p *Iface) recvmmsg(fd uintptr) bool {
	for i := range p.hdrs {
		h := &p.hdrs[i].Hdr
		h.Namelen = unix.SizeofSockaddrLinklayer
		h.SetControllen(auxLen)
		h.Flags = 0
	}
	for {
		n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&p.hdrs[0])), uintptr(len(p.hdrs)), unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		p.n, p.errno = int(n), e
		return true
	}
}

// deliver hands message i's frame to f, with the VLAN tag the kernel
// took off put back as libpcap does (pcap-linux.c: a tag is present when
// the TCI is not 0 or TP_STATUS_VLAN_VALID says so; its TPID is the one
// given, 0x8100 when the kernel gives none).
func (p *Iface) deliver(i int, f func(frame []byte)) {
	h := &p.hdrs[i]
	if h.Hdr.Flags&unix.MSG_TRUNC != 0 {
		p.tooLong.Add(1)
		return
	}
	if p.names[i].Pkttype == unix.PACKET_OUTGOING {
		return
	}
	buf := p.bufs[i*(tagLen+p.room) : (i+1)*(tagLen+p.room)]
	frame := buf[tagLen : tagLen+int(h.Len)]
	if aux := p.auxdata(i); aux != nil && (aux.Vlan_tci != 0 || aux.Status&unix.TP_STATUS_VLAN_VALID != 0) && len(frame) >= 12 {
		tpid := uint16(unix.ETH_P_8021Q)
		if aux.Vlan_tpid != 0 || aux.Status&unix.TP_STATUS_VLAN_TPID_VALID != 0 {
			tpid = aux.Vlan_tpid
		}
		copy(buf, frame[:12]) // the addresses, 4 bytes earlier
		binary.BigEndian.PutUint16(buf[12:], tpid)
		binary.BigEndian.PutUint16(buf[14:], aux.Vlan_tci)
		frame = buf[:tagLen+len(frame)]
	}
	p.received.Add(1)
	f(frame)
}

// auxdata returns message i's tpacket_auxdata, nil if it has none.
func (p *Iface) auxdata(i int) *unix.TpacketAuxdata {
	c := p.ctrl[i*auxLen : (i+1)*auxLen]
	if int(p.hdrs[i].Hdr.Controllen) < unix.SizeofCmsghdr+sizeofAuxdata {
		return nil
	}
	cm := (*unix.Cmsghdr)(unsafe.Pointer(&c[0]))
	if cm.Level != unix.SOL_PACKET || cm.Type != unix.PACKET_AUXDATA || int(cm.Len) < unix.SizeofCmsghdr+sizeofAuxdata {
		return nil
	}
	return (*unix.TpacketAuxdata)(unsafe.Pointer(&c[unix.SizeofCmsghdr]))
}

// Write sends a frame out of the interface as it is (a VLAN tag in it
// goes on the wire); a frame it refuses is counted in Errors (the kernel
// refuses one longer than the MTU allows, a tag of 802.1Q excepted).
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
			p.errors.Add(1)
		}
		return
	}
}

// Stats returns what the port did so far; it may be called while
// another goroutine reads.
func (p *Iface) Stats() IfaceStats {
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	if !p.closed {
		p.rc.Control(func(fd uintptr) {
			if st, err := unix.GetsockoptTpacketStats(int(fd), unix.SOL_PACKET, unix.PACKET_STATISTICS); err == nil {
				p.lost += uint64(st.Drops)
			}
		})
	}
	return IfaceStats{Received: p.received.Load(), Lost: p.lost, TooLong: p.tooLong.Load(), Errors: p.errors.Load()}
}

// Close closes the socket; Stats still answers, with what it lost last.
func (p *Iface) Close() error {
	p.Stats()
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	p.closed = true
	return p.file.Close()
}
