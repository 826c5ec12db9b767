// Package udpsend sends the packets of a batch as UDP datagrams from a
// connected socket, a batch per sendmmsg(2) call, and accounts for each:
// taken by the kernel, refused by it, or refused afterwards by the
// receiver (an ICMP notice on the socket's error queue). A DTA reporter's
// reports and export's packets to a collector go out through it. The
// sharp edge: the datapath never waits on the socket, so a datagram the
// kernel does not take at once is counted as unsent, not kept.
package udpsend

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"syscall"
	"unsafe"

	"github.com/ffpf-go/ffpf/buffers"
	"golang.org/x/sys/unix"
)

// Sender sends datagrams from a connected socket, a batch
// per sendmmsg(2) call. The socket is non-blocking and the datapath never
// waits on it: a datagram the kernel does not take (a full send buffer, a
// full device queue) is counted as unsent, not kept for later.
//
// Losses after the kernel took a datagram are counted from the socket's
// error queue (IP_RECVERR): the ICMP unreachable notices a receiver that
// is not there sends back, one per lost report, read after every batch.
// IP_RECVERR also makes a datagram the device queue drops fail with
// ENOBUFS instead of vanishing, as UDP otherwise lets it.
type Sender struct {
	conn *net.UDPConn
	rc   syscall.RawConn
	// Local is the socket's address.
	Local netip.AddrPort
	hdrs  []unix.Mmsghdr
	iovs  []unix.Iovec

	// The arguments and results of one call, for write and readErr, which
	// are made once so that sending allocates nothing.
	lo, hi  int
	k       int
	errno   unix.Errno
	write   func(fd uintptr) bool
	readErr func(fd uintptr) bool
	eq      struct {
		hdr  unix.Msghdr
		iov  unix.Iovec
		data [64]byte
		oob  [128]byte
	}

	// Sendmmsg is the system call; a test replaces it to make the kernel
	// refuse datagrams.
	Sendmmsg func(fd uintptr, hdrs []unix.Mmsghdr) (int, unix.Errno)

	// Counts, which the caller adds to its function's state: datagrams
	// the kernel took, those it did not, the receiver's ICMP notices, and
	// sendmmsg calls; the last error met.
	Sent, Unsent, Refused, Calls uint64
	LastErr                      error
}

// MaxRetries bounds the calls one batch may take after refusals, so that a
// storm of ICMP errors cannot hold the datapath.
const MaxRetries = 2 * buffers.MaxBatch

// Dial connects a socket to to, HOST:PORT (IPv4); its errors name it
// "to=…".
func Dial(to string) (*Sender, error) {
	ua, err := net.ResolveUDPAddr("udp4", to)
	if err != nil {
		return nil, fmt.Errorf("to=%s: %v", to, err)
	}
	conn, err := net.DialUDP("udp4", nil, ua)
	if err != nil {
		return nil, fmt.Errorf("to=%s: %v", to, err)
	}
	rc, err := conn.SyscallConn()
	if err != nil {
		conn.Close()
		return nil, err
	}
	s := &Sender{conn: conn, rc: rc, Local: conn.LocalAddr().(*net.UDPAddr).AddrPort(),
		hdrs: make([]unix.Mmsghdr, buffers.MaxBatch), iovs: make([]unix.Iovec, buffers.MaxBatch),
		Sendmmsg: sendmmsg}
	for i := range s.hdrs {
		s.hdrs[i].Hdr.Iov = &s.iovs[i]
		s.hdrs[i].Hdr.SetIovlen(1)
	}
	s.write = func(fd uintptr) bool {
		s.k, s.errno = s.Sendmmsg(fd, s.hdrs[s.lo:s.hi])
		return true // never wait for room: a full buffer is counted
	}
	s.eq.hdr.Iov = &s.eq.iov
	s.eq.hdr.SetIovlen(1)
	s.eq.iov.Base = &s.eq.data[0]
	s.eq.iov.SetLen(len(s.eq.data))
	s.eq.hdr.Control = &s.eq.oob[0]
	s.readErr = func(fd uintptr) bool {
		s.eq.hdr.SetControllen(len(s.eq.oob))
		s.eq.hdr.Flags = 0
		r, _, e := unix.Syscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&s.eq.hdr)), unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
		s.k, s.errno = int(r), e
		return true
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_RECVERR, 1)
		// The error queue holds the notices between two reads; it is
		// bounded by the receive buffer, which nothing else uses.
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, errQueueBytes) != nil {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, errQueueBytes)
		}
	}); err != nil || serr != nil {
		conn.Close()
		return nil, fmt.Errorf("to=%s: IP_RECVERR: %v", to, errors.Join(err, serr))
	}
	return s, nil
}

// errQueueBytes is the receive buffer asked for, room for some thousands
// of notices.
const errQueueBytes = 4 << 20

// Remote is the address the socket sends to.
func (s *Sender) Remote() netip.AddrPort { return s.conn.RemoteAddr().(*net.UDPAddr).AddrPort() }

// Drain reads the error queue, counting the ICMP notices in it.
func (s *Sender) Drain() {
	for range 4 * buffers.MaxBatch {
		if err := s.rc.Read(s.readErr); err != nil || s.errno != 0 {
			return // EAGAIN: empty
		}
		b := s.eq.oob[:s.eq.hdr.Controllen]
		for len(b) >= unix.SizeofCmsghdr {
			h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
			if h.Len < unix.SizeofCmsghdr || int(h.Len) > len(b) {
				break
			}
			if h.Level == unix.IPPROTO_IP && h.Type == unix.IP_RECVERR &&
				int(h.Len) >= unix.SizeofCmsghdr+int(unsafe.Sizeof(unix.SockExtendedErr{})) {
				ee := (*unix.SockExtendedErr)(unsafe.Pointer(&b[unix.SizeofCmsghdr]))
				if ee.Origin == unix.SO_EE_ORIGIN_ICMP {
					s.Refused++
				}
			}
			b = b[min(len(b), cmsgAlign(int(h.Len))):]
		}
	}
}

func cmsgAlign(n int) int { return (n + 7) &^ 7 }

func sendmmsg(fd uintptr, hdrs []unix.Mmsghdr) (int, unix.Errno) {
	r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)),
		unix.MSG_DONTWAIT, 0, 0)
	return int(r), e
}

// refusal reports whether errno is the pending notice of an ICMP error
// that an earlier datagram caused, after which the socket sends again.
func refusal(e unix.Errno) bool {
	switch e {
	case unix.ECONNREFUSED, unix.EHOSTUNREACH, unix.ENETUNREACH, unix.EHOSTDOWN:
		return true
	}
	return false
}

// Send sends body(packet) of each packet in the batch as a datagram.
func (s *Sender) Send(b *buffers.Batch, body func(packet []byte) []byte) {
	n := b.N
	if n == 0 {
		return
	}
	for i, e := range b.E[:n] {
		p := body(b.PBuf.Data(e.Slot))
		s.iovs[i].Base = &p[0]
		s.iovs[i].SetLen(len(p))
	}
	lo, retries := 0, 0
	for lo < n {
		s.lo, s.hi = lo, n
		s.Calls++
		if err := s.rc.Write(s.write); err != nil { // the socket is closed
			s.Unsent += uint64(n - lo)
			s.LastErr = err
			break
		}
		if s.errno == 0 && s.k > 0 {
			// A short count is an error sendmmsg did not return: the
			// next call meets it again, or it was the pending notice of
			// an earlier datagram (counted from the error queue).
			lo += s.k
			s.Sent += uint64(s.k)
			continue
		}
		if refusal(s.errno) && retries < MaxRetries {
			// The notice of an earlier datagram; this one was not sent.
			retries++
			continue
		}
		s.Unsent += uint64(n - lo)
		if s.errno != 0 {
			s.LastErr = s.errno
		} else {
			s.LastErr = errors.New("sendmmsg sent nothing")
		}
		break
	}
	s.Drain()
	for i := range s.iovs[:n] {
		s.iovs[i].Base = nil // hold no pointer into the PBuf
	}
	runtime.KeepAlive(b)
}

// Close closes the socket.
func (s *Sender) Close() error { return s.conn.Close() }
