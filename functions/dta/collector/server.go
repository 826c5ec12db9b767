package collector

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ServerConfig is a collector's memory and where it listens.
type ServerConfig struct {
	Config
	Listen string // UDP address of the reports, "127.0.0.1:40040" (port 0: any free port)
	HTTP   string // TCP address of queries and /metrics; "" for none
	// Metrics makes what answers Prometheus's scrapes at /metrics on HTTP
	// (package collector/metrics's Handler); nil: no /metrics. It is
	// given, not built here, so that the processes that link this package
	// (every ffpf run: the class dta-collector) need not link Prometheus's
	// client library.
	Metrics func(*Server) http.Handler
	Sockets int // SO_REUSEPORT sockets, one ingesting goroutine each; 0: GOMAXPROCS
	RcvBuf  int // receive buffer of each socket in bytes; 0: 4 MiB (as far as net.core.rmem_max allows, or beyond as root)
	Batch   int // datagrams per recvmmsg; 0: 64

	hold chan struct{}   // tests: the receivers wait for it to close before reading
	sink func() ingester // benchmarks: where the receivers put payloads (nil: the collector)
}

// ingester is where a receiver puts what it reads: an Ingester, or in
// benchmarks another collector to compare with.
type ingester interface {
	IngestPayload(b []byte) Reason
	Flush()
	truncated() // a datagram longer than any report
}

// msgLen is the room for one datagram: more than any report, so that a
// longer one is seen as such (MSG_TRUNC) and counted as trailing.
const msgLen = 64

// Server receives reports over UDP into a Collector and answers queries
// over HTTP.
type Server struct {
	c    *Collector
	addr *net.UDPAddr
	rx   []*receiver
	wg   sync.WaitGroup

	httpLn  net.Listener
	httpSrv *http.Server
	metrics http.Handler // /metrics, if given

	closeOnce sync.Once
	closed    atomic.Bool
	lastDrops atomic.Uint64 // the sockets' drops when they were closed
}

// NewServer allocates the collector and starts listening: reports are
// ingested from then on, until Close.
func NewServer(cfg ServerConfig) (*Server, error) {
	c, err := New(cfg.Config)
	if err != nil {
		return nil, err
	}
	return Serve(c, cfg)
}

// Serve starts a server in front of an existing collector (cfg.Config is
// not used).
func Serve(c *Collector, cfg ServerConfig) (*Server, error) {
	if cfg.Sockets <= 0 {
		cfg.Sockets = runtime.GOMAXPROCS(0)
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 64
	}
	if cfg.RcvBuf <= 0 {
		cfg.RcvBuf = 4 << 20
	}
	if cfg.Listen == "" {
		return nil, errors.New("the collector needs a UDP address to listen on")
	}
	s := &Server{c: c}
	addr := cfg.Listen
	// SO_REUSEPORT would let this collector join another's port, the kernel
	// splitting the reports between them: a plain socket finds the port taken.
	if ua, err := net.ResolveUDPAddr("udp", addr); err == nil && ua.Port != 0 {
		probe, err := net.ListenUDP("udp", ua)
		if err != nil {
			return nil, fmt.Errorf("cannot listen on udp %s: %v", addr, opErr(err))
		}
		probe.Close()
	}
	for i := range cfg.Sockets {
		var in ingester = c.NewIngester()
		if cfg.sink != nil {
			in = cfg.sink()
		}
		r, err := listen(addr, cfg.RcvBuf, cfg.Batch, in)
		if err != nil {
			s.closeSockets()
			return nil, fmt.Errorf("cannot listen on udp %s: %v", addr, opErr(err))
		}
		if i == 0 {
			s.addr = r.conn.LocalAddr().(*net.UDPAddr)
			addr = s.addr.String() // the others share its port, even when it was 0
		}
		s.rx = append(s.rx, r)
	}
	if cfg.HTTP != "" {
		ln, err := net.Listen("tcp", cfg.HTTP)
		if err != nil {
			s.closeSockets()
			return nil, fmt.Errorf("cannot listen on tcp %s: %v", cfg.HTTP, opErr(err))
		}
		s.httpLn = ln
		if cfg.Metrics != nil {
			s.metrics = cfg.Metrics(s)
		}
		s.httpSrv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
		go s.httpSrv.Serve(ln)
	}
	for _, r := range s.rx {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if cfg.hold != nil {
				<-cfg.hold
			}
			r.run()
		}()
	}
	return s, nil
}

// opErr strips the operation and address a *net.OpError repeats.
func opErr(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		return oe.Err
	}
	return err
}

// Collector is the server's collector.
func (s *Server) Collector() *Collector { return s.c }

// Addr is the UDP address the server receives reports on.
func (s *Server) Addr() *net.UDPAddr { return s.addr }

// HTTPAddr is the address of the HTTP endpoint, nil without one.
func (s *Server) HTTPAddr() net.Addr {
	if s.httpLn == nil {
		return nil
	}
	return s.httpLn.Addr()
}

// Stats are the collector's counters, with the datagrams received and
// those the sockets' queues dropped (Dropped["socket"]).
func (s *Server) Stats() Stats {
	st := s.c.Stats()
	for _, r := range s.rx {
		st.Datagrams += r.datagrams.Load()
	}
	st.Dropped["socket"] = s.socketDrops()
	return st
}

// socketDrops is the datagrams the kernel dropped at the sockets (their
// queue full: a flood beyond the ingest rate): sk_drops, which
// /proc/net/udp shows and SO_RXQ_OVFL would tell with the next datagram
// received, read with SO_MEMINFO so that drops after the last datagram
// count too.
func (s *Server) socketDrops() uint64 {
	if s.closed.Load() {
		return s.lastDrops.Load()
	}
	var n uint64
	for _, r := range s.rx {
		n += r.drops()
	}
	return n
}

// Close stops ingesting and serving; the counters stay readable.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		if s.httpSrv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			s.httpSrv.Shutdown(ctx)
			cancel()
		}
		s.lastDrops.Store(s.socketDrops())
		s.closed.Store(true)
		s.closeSockets()
		s.wg.Wait()
	})
	return nil
}

func (s *Server) closeSockets() {
	for _, r := range s.rx {
		r.conn.Close()
	}
}

// receiver is one SO_REUSEPORT socket and the goroutine reading it: the
// kernel spreads reporters over the sockets by their addresses, so a
// reporter's reports reach one goroutine, in order.
type receiver struct {
	conn *net.UDPConn
	rc   syscall.RawConn
	in   ingester

	hdrs []unix.Mmsghdr
	iovs []unix.Iovec
	bufs []byte
	n    int
	err  syscall.Errno
	recv func(fd uintptr) bool // r.recvmmsg, bound once: no allocation per call

	datagrams atomic.Uint64 // received on this socket
}

func listen(addr string, rcvbuf, batch int, in ingester) (*receiver, error) {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); serr != nil {
				return
			}
			// As root beyond net.core.rmem_max; otherwise up to it.
			if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvbuf) != nil {
				unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}}
	pc, err := lc.ListenPacket(context.Background(), "udp", addr)
	if err != nil {
		return nil, err
	}
	conn := pc.(*net.UDPConn)
	rc, err := conn.SyscallConn()
	if err != nil {
		conn.Close()
		return nil, err
	}
	r := &receiver{conn: conn, rc: rc, in: in,
		hdrs: make([]unix.Mmsghdr, batch), iovs: make([]unix.Iovec, batch), bufs: make([]byte, batch*msgLen)}
	for i := range r.hdrs {
		r.iovs[i].Base = &r.bufs[i*msgLen]
		r.iovs[i].SetLen(msgLen)
		r.hdrs[i].Hdr.Iov = &r.iovs[i]
		r.hdrs[i].Hdr.SetIovlen(1)
	}
	r.recv = r.recvmmsg
	return r, nil
}

// recvmmsg reads a batch without blocking; false asks the runtime's
// poller to wait until the socket is readable.
func (r *receiver) recvmmsg(fd uintptr) bool {
	for {
		n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&r.hdrs[0])), uintptr(len(r.hdrs)), unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		r.n, r.err = int(n), e
		return true
	}
}

// run ingests until the socket is closed.
func (r *receiver) run() {
	for {
		if err := r.rc.Read(r.recv); err != nil {
			return // closed
		}
		if r.err != 0 {
			// A pending error on the socket (an ICMP error for a
			// datagram it sent: none are sent): read on.
			continue
		}
		for i := range r.n {
			h := &r.hdrs[i]
			if h.Hdr.Flags&unix.MSG_TRUNC != 0 {
				r.in.truncated()
				continue
			}
			r.in.IngestPayload(r.bufs[i*msgLen : i*msgLen+int(h.Len)])
		}
		r.datagrams.Add(uint64(r.n))
		r.in.Flush()
	}
}

// drops reads the socket's sk_drops.
func (r *receiver) drops() uint64 {
	var mi [unix.SK_MEMINFO_VARS]uint32
	var n uint64
	r.rc.Control(func(fd uintptr) {
		l := uint32(unsafe.Sizeof(mi))
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_MEMINFO,
			uintptr(unsafe.Pointer(&mi[0])), uintptr(unsafe.Pointer(&l)), 0)
		if e == 0 && l > unix.SK_MEMINFO_DROPS*4 {
			n = uint64(mi[unix.SK_MEMINFO_DROPS])
		}
	})
	return n
}
