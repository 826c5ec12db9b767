package reporter

import (
	"bytes"
	"fmt"
	"github.com/ffpf-go/ffpf/internal/udpsend"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/dta/wire"
)

// newReporter instantiates a dta function on packets of link type lt
// from an argument list "op=keywrite,key=ipv4.src,...".
func newReporter(t testing.TB, lt functions.LinkType, args string) *Reporter {
	t.Helper()
	var as []functions.Arg
	for _, kv := range strings.Split(args, ",") {
		k, v, _ := strings.Cut(kv, "=")
		kind := functions.RawWord
		if v != "" && v[0] >= '0' && v[0] <= '9' && !strings.Contains(v, ":") {
			kind = functions.RawNumber
		}
		as = append(as, functions.Arg{Key: k, Value: functions.Raw{Kind: kind, Text: v}})
	}
	p, err := Class.Bind(as)
	if err != nil {
		t.Fatal(err)
	}
	ctx := &functions.Context{ID: "dta#1", Params: p, LinkType: lt}
	if err := validate(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// packets returns a batch of n UDP/IPv4 frames from 10.0.0.i to 10.1.0.1,
// of i+100 bytes of payload.
func packets(t testing.TB, n int) *buffers.Batch {
	t.Helper()
	p := buffers.NewPBuf(buffers.MaxBatch, 2048)
	b := buffers.NewBatch(p, 0, n, 0)
	for i := range n {
		eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 9}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 8}, EthernetType: layers.EthernetTypeIPv4}
		ip := &layers.IPv4{Version: 4, TTL: 9, Protocol: layers.IPProtocolUDP, SrcIP: net.IP{10, 0, byte(i >> 8), byte(i)}, DstIP: net.IP{10, 1, 0, 1}}
		udp := &layers.UDP{SrcPort: 1000, DstPort: layers.UDPPort(2000 + i)}
		_ = udp.SetNetworkLayerForChecksum(ip)
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
			eth, ip, udp, gopacket.Payload(make([]byte, 100+i))); err != nil {
			t.Fatal(err)
		}
		b.Append(buf.Bytes(), uint32(len(buf.Bytes())), int64(i))
	}
	return b
}

// collect emits into a list of copies of the frames.
func collect(r *Reporter) *[][]byte {
	var frames [][]byte
	r.SetEmit(func(b *buffers.Batch) {
		for _, e := range b.E[:b.N] {
			frames = append(frames, append([]byte(nil), b.PBuf.Data(e.Slot)...))
		}
	})
	return &frames
}

func stateOf(r *Reporter, name string) uint64 {
	return r.m.Load64(functions.FieldOf(r.m, name).Offset)
}

// listen opens a receiver on loopback with a receive buffer large enough
// for a test's reports.
func listen(t *testing.T) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	rc, _ := c.SyscallConn()
	_ = rc.Control(func(fd uintptr) {
		// As root, past net.core.rmem_max; otherwise what the limit allows.
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20) != nil {
			_ = c.SetReadBuffer(16 << 20)
		}
	})
	return c
}

// TestLoopback: the reports sent to a UDP socket are exactly the frames'
// reports, in order, and all are counted as sent.
func TestLoopback(t *testing.T) {
	rx := listen(t)
	r := newReporter(t, functions.LinkEthernet, "op=keywrite,key=ipv4.src,data=udp.dport,redundancy=2,to="+rx.LocalAddr().String())
	frames := collect(r)
	const rounds = 20
	for range rounds {
		r.Process(packets(t, buffers.MaxBatch))
	}
	want := rounds * buffers.MaxBatch
	if len(*frames) != want || stateOf(r, "sent") != uint64(want) || stateOf(r, "unsent") != 0 || stateOf(r, "refused") != 0 {
		t.Fatalf("%d frames; state %v", len(*frames), r.m.Snapshot())
	}
	if c := stateOf(r, "sendcalls"); c < rounds || c > 2*rounds {
		t.Errorf("%d sendmmsg calls for %d batches", c, rounds)
	}
	buf := make([]byte, 2048)
	for i := range want {
		_ = rx.SetReadDeadline(time.Now().Add(20 * time.Second))
		n, from, err := rx.ReadFromUDP(buf)
		if err != nil {
			t.Fatalf("report %d: %v", i, err)
		}
		var rep wire.Report
		if err := wire.Decode(buf[:n], &rep); err != nil {
			t.Fatalf("report %d: %v", i, err)
		}
		f := (*frames)[i]
		if !bytes.Equal(buf[:n], payload(f)) {
			t.Fatalf("report %d: % x, frame's % x", i, buf[:n], payload(f))
		}
		k := i % buffers.MaxBatch
		if rep.Op != wire.KeyWrite || rep.Key != 10<<24|uint32(k) || rep.Data != uint32(2000+k) || rep.Redundancy != 2 {
			t.Fatalf("report %d: %+v", i, rep)
		}
		// The frame names the socket's real addresses.
		if ip := f[ipOff+12 : ipOff+16]; !bytes.Equal(ip, from.IP.To4()) || int(f[udpOff])<<8|int(f[udpOff+1]) != from.Port {
			t.Fatalf("frame from %v:%d, datagram from %v", net.IP(ip), int(f[udpOff])<<8|int(f[udpOff+1]), from)
		}
	}
	_ = rx.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, _, err := rx.ReadFromUDP(buf); err == nil {
		t.Fatal("more datagrams than reports")
	}
}

// TestNoReceiver: reports to a port nobody listens on come back as ICMP
// port unreachable, counted as refused; every report is sent or unsent.
func TestNoReceiver(t *testing.T) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	addr := c.LocalAddr().String()
	c.Close()
	r := newReporter(t, functions.LinkEthernet, "op=append,list=1,data=ipv4.src,to="+addr)
	for range 4 {
		r.Process(packets(t, 64))
	}
	sent, unsent, refused := stateOf(r, "sent"), stateOf(r, "unsent"), stateOf(r, "refused")
	if sent+unsent != 256 || stateOf(r, "reports") != 256 {
		t.Fatalf("sent %d + unsent %d of 256", sent, unsent)
	}
	// Loopback delivers each datagram, and its ICMP notice, before
	// sendmmsg returns: every one is counted.
	if refused != 256 {
		t.Fatalf("refused %d of 256: %v", refused, r.m.Snapshot())
	}
	t.Logf("sent %d unsent %d refused %d in %d calls", sent, unsent, refused, stateOf(r, "sendcalls"))
}

// fake is a kernel that takes take datagrams per call and then fails
// with errno, for calls calls; after that it takes everything.
type fake struct {
	take  []int
	errno []unix.Errno
	calls int
}

func (f *fake) sendmmsg(_ uintptr, h []unix.Mmsghdr) (int, unix.Errno) {
	i := f.calls
	f.calls++
	if i >= len(f.take) {
		return len(h), 0
	}
	if f.take[i] == 0 {
		return -1, f.errno[i]
	}
	return min(f.take[i], len(h)), 0
}

// TestSendErrors drives the sender's accounting with a fake kernel: a
// full buffer (EAGAIN, ENOBUFS) leaves the rest unsent; the pending notice
// of an earlier datagram (ECONNREFUSED) and a short count are retried.
func TestSendErrors(t *testing.T) {
	rx := listen(t)
	for _, c := range []struct {
		take                         []int
		errno                        []unix.Errno
		sent, unsent, refused, calls int
	}{
		{take: []int{10, 0}, errno: []unix.Errno{0, unix.EAGAIN}, sent: 10, unsent: 54, calls: 2},
		{take: []int{0}, errno: []unix.Errno{unix.ENOBUFS}, sent: 0, unsent: 64, calls: 1},
		{take: []int{0, 5}, errno: []unix.Errno{unix.ECONNREFUSED, 0}, sent: 64, calls: 3},
		{take: []int{3, 7}, errno: []unix.Errno{0, 0}, sent: 64, calls: 3},
		{take: []int{3, 0}, errno: []unix.Errno{0, unix.EPERM}, sent: 3, unsent: 61, calls: 2},
	} {
		r := newReporter(t, functions.LinkEthernet, "op=keywrite,key=1,data=2,to="+rx.LocalAddr().String())
		f := &fake{take: c.take, errno: c.errno}
		r.snd.Sendmmsg = f.sendmmsg
		r.Process(packets(t, 64))
		got := fmt.Sprint(stateOf(r, "sent"), stateOf(r, "unsent"), stateOf(r, "refused"), stateOf(r, "sendcalls"))
		if want := fmt.Sprint(c.sent, c.unsent, c.refused, c.calls); got != want {
			t.Errorf("take %v errno %v: sent unsent refused calls = %s, want %s", c.take, c.errno, got, want)
		}
	}
	// A storm of refusals is bounded.
	r := newReporter(t, functions.LinkEthernet, "op=keywrite,key=1,data=2,to="+rx.LocalAddr().String())
	r.snd.Sendmmsg = func(uintptr, []unix.Mmsghdr) (int, unix.Errno) { return -1, unix.ECONNREFUSED }
	r.Process(packets(t, 8))
	if stateOf(r, "unsent") != 8 || stateOf(r, "sendcalls") != udpsend.MaxRetries+1 {
		t.Errorf("refusal storm: %v", r.m.Snapshot())
	}
}

// BenchmarkReporter: frames per packet, with and without sending.
func BenchmarkReporter(b *testing.B) {
	for _, args := range []string{"op=keywrite,key=ipv4.src,data=pkt.len", "op=postcarding,key=ipv4.src,hop=ipv4.ttl,data=udp.dport"} {
		b.Run(args, func(b *testing.B) {
			r := newReporter(b, functions.LinkEthernet, args)
			r.SetEmit(func(*buffers.Batch) {})
			in := packets(b, buffers.MaxBatch)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += buffers.MaxBatch {
				in.N = buffers.MaxBatch
				r.Process(in)
			}
		})
	}
	b.Run("to=loopback", func(b *testing.B) {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		go func() { // drain
			buf := make([]byte, 64)
			for {
				if _, err := c.Read(buf); err != nil {
					return
				}
			}
		}()
		r := newReporter(b, functions.LinkEthernet, "op=keywrite,key=ipv4.src,data=pkt.len,to="+c.LocalAddr().String())
		r.SetEmit(func(*buffers.Batch) {})
		in := packets(b, buffers.MaxBatch)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i += buffers.MaxBatch {
			in.N = buffers.MaxBatch
			r.Process(in)
		}
		b.StopTimer()
		b.ReportMetric(float64(stateOf(r, "unsent")), "unsent")
	})
}
