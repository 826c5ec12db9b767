package gen

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/google/gopacket/pcapgo"
	"golang.org/x/sys/unix"

	"github.com/ffpf-go/ffpf/internal/netnstest"
)

// These tests transmit through XDP live frames on a veth pair between two
// network namespaces they create (<tag>a holds the sender, <tag>b the
// receiver) and compare what arrived with what TransmitXDP recorded and
// with what Transmit (AF_PACKET) sends. They need root, ip(8), tcpdump and
// Linux 5.18; under CI=true a missing one fails the test, elsewhere it
// skips.

const (
	xdpDrop = 1
	xdpPass = 2
)

// attachXDP attaches a program returning action to the interface. On the
// receiving veth, that turns NAPI on; with XDP_PASS and GRO off the stack
// sees the frames as they came.
func attachXDP(t *testing.T, ns, iface string, action int32) {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, action), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Close() })
	netnstest.In(t, ns, func() {
		ifc, err := netInterface(iface)
		if err != nil {
			t.Fatal(err)
		}
		l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifc})
		if err != nil {
			t.Fatalf("attaching XDP to %s: %v", iface, err)
		}
		t.Cleanup(func() { l.Close() })
	})
}

func netInterface(name string) (int, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return 0, err
	}
	return ifc.Index, nil
}

// holdLastTap opens a packet socket on iface that reads nothing, before
// tcpdump opens its own. The peer's NAPI hands frames to the stack in lists
// (GRO's normal batching even with GRO off), and the kernel delivers a
// frame to the last packet socket that matches it only once the next
// frame's handler differs: a frame no protocol handles (an unknown
// ethertype, 802.3) would reach that socket after the IP frame behind it.
// The last socket of the interface's list is the oldest; this one takes
// the delay, so that tcpdump sees the frames in the order they came.
func holdLastTap(t *testing.T, ns, iface string) {
	t.Helper()
	netnstest.In(t, ns, func() {
		idx, err := netInterface(iface)
		if err != nil {
			t.Fatal(err)
		}
		const ethPAll = 0x0300 // htons(ETH_P_ALL)
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, ethPAll)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4096) // full at once: it drops cheaply
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: ethPAll, Ifindex: idx}); err != nil {
			t.Fatal(err)
		}
	})
}

// tcpdumpCapture captures want frames on iface in ns; wait returns them.
type tcpdumpCapture struct {
	cmd    *exec.Cmd
	file   string
	stderr bytes.Buffer
}

func startTcpdump(t *testing.T, ns, iface string, want int) *tcpdumpCapture {
	t.Helper()
	c := &tcpdumpCapture{file: filepath.Join(t.TempDir(), "arrived.pcap")}
	c.cmd = exec.Command("ip", "netns", "exec", ns, "tcpdump", "-i", iface, "-p", "-nn", "-s", "0",
		"-B", "131072", "-U", "-c", fmt.Sprint(want), "-w", c.file)
	c.cmd.Stderr = &c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.cmd.Process.Kill(); c.cmd.Wait() })
	// tcpdump creates its -w file once the capture is open.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(c.file); err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("tcpdump did not start: %s", c.stderr.String())
		}
	}
}

// wait waits for tcpdump to have captured its count and returns the frames.
func (c *tcpdumpCapture) wait(t *testing.T) [][]byte {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("tcpdump: %v: %s", err, c.stderr.String())
		}
	case <-time.After(60 * time.Second): // it returns once the frames arrived
		c.cmd.Process.Signal(os.Interrupt)
		<-done
		got := readPcapFrames(t, c.file)
		t.Fatalf("only %d frames arrived: %s", len(got), c.stderr.String())
	}
	return readPcapFrames(t, c.file)
}

func readPcapFrames(t *testing.T, file string) [][]byte {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for {
		b, _, err := r.ReadPacketData()
		if err != nil {
			return out
		}
		out = append(out, b)
	}
}

// transmitXDP runs TransmitXDP in ns and returns the frames it recorded.
func transmitXDP(t *testing.T, ns, iface string, cfg Config, pps float64, pool int) (frames [][]byte, n, skipped int64, err error) {
	t.Helper()
	netnstest.In(t, ns, func() {
		n, skipped, err = TransmitXDP(iface, cfg, pps, pool, func(b []byte, _ time.Time) error {
			frames = append(frames, append([]byte(nil), b...))
			return nil
		})
	})
	needLiveFrames(t, err)
	return frames, n, skipped, err
}

// needLiveFrames skips (fails under CI) when the kernel is too old.
func needLiveFrames(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), "Linux 5.18") {
		if os.Getenv("CI") != "" {
			t.Fatalf("the kernel cannot transmit through XDP: %v", err)
		}
		t.Skipf("the kernel cannot transmit through XDP: %v", err)
	}
}

// rxPackets reads an interface's received-packet counter in ns.
func rxPackets(t *testing.T, ns, iface string) uint64 {
	t.Helper()
	var rx uint64
	netnstest.In(t, ns, func() {
		idx, err := netInterface(iface)
		if err != nil {
			t.Fatal(err)
		}
		c, err := readCounters(idx)
		if err != nil {
			t.Fatal(err)
		}
		rx = c.rxPackets
	})
	return rx
}

func sameFrames(t *testing.T, what string, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d frames, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			at := -1 // where it should have been: a reordering, or a stranger
			for j := range want {
				if bytes.Equal(got[i], want[j]) {
					at = j
					break
				}
			}
			t.Fatalf("%s: frame %d differs (it is wanted frame %d):\n got %x\nwant %x", what, i, at, got[i], want[i])
		}
	}
}

// TestXDPTransmitsTheTrace: the frames TransmitXDP records arrive on the
// peer byte for byte, in order, and are those Transmit sends.
func TestXDPTransmitsTheTrace(t *testing.T) {
	nsA, nsB, ifA, ifB := netnstest.Pair(t, "ffx", "the XDP transmitter", 1)
	attachXDP(t, nsB, ifB, xdpPass)
	cfg := Config{Seed: 7, Packets: 20000, Malformed: 0.02}
	// How many frames go out: those Transmit sends.
	var want [][]byte
	var wantSkipped int64
	g := New(cfg)
	buf := make([]byte, MaxFrameLen)
	for {
		c, _, _, ok := g.Next(buf)
		if !ok {
			break
		}
		if fits(buf[:c], 1500) {
			want = append(want, append([]byte(nil), buf[:c]...))
		} else {
			wantSkipped++
		}
	}
	if wantSkipped == 0 {
		t.Fatal("the trace has no frame the interface refuses: the test does not test skipping")
	}
	holdLastTap(t, nsB, ifB)
	capt := startTcpdump(t, nsB, ifB, len(want))
	rx0 := rxPackets(t, nsB, ifB)
	sent, n, skipped, err := transmitXDP(t, nsA, ifA, cfg, 0, 20000)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len(want)) || skipped != wantSkipped {
		t.Fatalf("sent %d, skipped %d; want %d, %d", n, skipped, len(want), wantSkipped)
	}
	arrived := capt.wait(t)
	if !strings.Contains(capt.stderr.String(), "\n0 packets dropped by kernel") {
		t.Fatalf("tcpdump dropped frames: %s", capt.stderr.String())
	}
	if rx := rxPackets(t, nsB, ifB) - rx0; rx != uint64(len(want)) {
		t.Fatalf("%s received %d frames, want %d", ifB, rx, len(want))
	}
	sameFrames(t, "recorded vs. expected", sent, want)
	sameFrames(t, "arrived vs. recorded", arrived, sent)

	// AF_PACKET sends (and refuses) the same frames.
	var viaPacket [][]byte
	var pn, pskipped int64
	netnstest.In(t, nsA, func() {
		pn, pskipped, err = Transmit(ifA, cfg, 0, func(b []byte, _ time.Time) error {
			viaPacket = append(viaPacket, append([]byte(nil), b...))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if pn != n || pskipped != skipped {
		t.Fatalf("AF_PACKET sent %d and skipped %d, XDP %d and %d", pn, pskipped, n, skipped)
	}
	sameFrames(t, "XDP vs. AF_PACKET", sent, viaPacket)
}

// TestXDPCyclesThePool: with three times as many packets as the pool
// holds, the pool's frames arrive three times, in order.
func TestXDPCyclesThePool(t *testing.T) {
	nsA, nsB, ifA, ifB := netnstest.Pair(t, "ffx", "the XDP transmitter", 1)
	attachXDP(t, nsB, ifB, xdpPass)
	const pool = 1000
	cfg := Config{Seed: 3, Packets: 3 * pool, Malformed: 0.02}
	var first [][]byte // the trace's first pool frames that go out
	var refused int64
	g := New(cfg)
	buf := make([]byte, MaxFrameLen)
	for i := 0; i < pool; i++ {
		c, _, _, _ := g.Next(buf)
		if fits(buf[:c], 1500) {
			first = append(first, append([]byte(nil), buf[:c]...))
		} else {
			refused++
		}
	}
	want := append(append(append([][]byte(nil), first...), first...), first...)
	holdLastTap(t, nsB, ifB)
	capt := startTcpdump(t, nsB, ifB, len(want))
	sent, n, skipped, err := transmitXDP(t, nsA, ifA, cfg, 0, pool)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len(want)) || skipped != 3*refused {
		t.Fatalf("sent %d, skipped %d; want %d, %d", n, skipped, len(want), 3*refused)
	}
	sameFrames(t, "recorded vs. pool×3", sent, want)
	sameFrames(t, "arrived vs. pool×3", capt.wait(t), want)
}

// TestXDPPacing: 100,000 frames at 200 kpps take about half a second,
// also when an XDP program on the interface leaves TransmitXDP to slow
// runs. Never less: the pacer must not send early. Longer on a loaded
// machine or under the race detector (setting up the pool takes seconds
// there), so the bound is what the same frames take unpaced, twice, and
// 3 s more: not the 12 s that 500 slow runs (25 ms each) would add.
func TestXDPPacing(t *testing.T) {
	nsA, nsB, ifA, ifB := netnstest.Pair(t, "ffx", "the XDP transmitter", 1)
	attachXDP(t, nsB, ifB, xdpDrop)
	send := func(pps float64) (el time.Duration) {
		t.Helper()
		var n int64
		var err error
		netnstest.In(t, nsA, func() {
			start := time.Now()
			n, _, err = TransmitXDP(ifA, Config{Seed: 1, Packets: 100000}, pps, 0, nil)
			el = time.Since(start)
		})
		needLiveFrames(t, err)
		if err != nil {
			t.Fatal(err)
		}
		if n < 99000 {
			t.Fatalf("sent %d frames", n)
		}
		return el
	}
	for _, busy := range []bool{false, true} {
		if busy {
			attachXDP(t, nsA, ifA, xdpPass)
		}
		unpaced := send(0)
		el := send(200000)
		if el < 400*time.Millisecond || el > 2*unpaced+3*time.Second {
			t.Fatalf("100,000 frames at 200 kpps (XDP on the interface: %v) took %v (unpaced %v), want about 0.5 s", busy, el, unpaced)
		}
		t.Logf("100,000 frames at 200 kpps (XDP on the interface: %v) in %v, unpaced in %v", busy, el, unpaced)
	}
}

// TestXDPCountsInterruptedRuns: signals raining on the sending thread cut
// runs short; the count stays exact.
func TestXDPCountsInterruptedRuns(t *testing.T) {
	nsA, nsB, ifA, ifB := netnstest.Pair(t, "ffx", "the XDP transmitter", 1)
	attachXDP(t, nsB, ifB, xdpDrop)
	cfg := Config{Seed: 9, Packets: 1000000, Malformed: 0.02}
	var n, skipped, recorded int64
	var err error
	netnstest.In(t, nsA, func() {
		tid := unix.Gettid() // TransmitXDP runs on this locked thread
		stop := make(chan bool)
		defer close(stop)
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Microsecond):
					unix.Tgkill(unix.Getpid(), tid, unix.SIGURG) // Go's preemption signal: harmless
				}
			}
		}()
		n, skipped, err = TransmitXDP(ifA, cfg, 0, 0, func([]byte, time.Time) error { recorded++; return nil })
	})
	needLiveFrames(t, err)
	if err != nil {
		t.Fatal(err)
	}
	if n+skipped != cfg.Packets || recorded != n || skipped == 0 {
		t.Fatalf("sent %d, skipped %d, recorded %d of %d packets", n, skipped, recorded, cfg.Packets)
	}
}

// TestXDPNeedsPeerNAPI: a veth whose peer has neither an XDP program nor
// GRO would drop every XDP frame, so TransmitXDP refuses to send; with GRO
// on (EnableGRO) they arrive.
func TestXDPNeedsPeerNAPI(t *testing.T) {
	nsA, nsB, ifA, ifB := netnstest.Pair(t, "ffx", "the XDP transmitter", 1)
	netnstest.In(t, nsB, func() {
		if err := setGRO(ifB, false); err != nil {
			t.Fatal(err)
		}
	})
	cfg := Config{Seed: 5, Packets: 5000}
	if _, n, _, err := transmitXDP(t, nsA, ifA, cfg, 0, 0); !errors.Is(err, ErrNoXDPXmit) || n != 0 {
		t.Fatalf("sending to a peer without NAPI: sent %d, error %v; want nothing sent and ErrNoXDPXmit", n, err)
	}
	netnstest.In(t, nsB, func() {
		if err := EnableGRO(ifB); err != nil {
			t.Fatal(err)
		}
	})
	rx0 := rxPackets(t, nsB, ifB)
	_, n, _, err := transmitXDP(t, nsA, ifA, cfg, 0, 0)
	if err != nil {
		t.Fatalf("with GRO on the peer: %v", err)
	}
	// GRO may merge TCP segments, but the veth counts frames.
	if rx := rxPackets(t, nsB, ifB) - rx0; rx != uint64(n) {
		t.Fatalf("%s received %d frames, want %d", ifB, rx, n)
	}
}

// TestXDPReportsPeerLoss: frames the peer refuses after the redirect (here,
// too long for its smaller MTU) come back as a PeerLossError that counts
// what the peer took: less than what fits, as the veth drops the rest of a
// bulk from the first frame refused.
func TestXDPReportsPeerLoss(t *testing.T) {
	nsA, nsB, ifA, ifB := netnstest.Pair(t, "ffx", "the XDP transmitter", 1)
	attachXDP(t, nsB, ifB, xdpDrop)
	if out, err := exec.Command("ip", "-n", nsB, "link", "set", ifB, "mtu", "1000").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	sent, n, _, err := transmitXDP(t, nsA, ifA, Config{Seed: 2, Packets: 20000}, 0, 0)
	var fit int64
	for _, f := range sent {
		if len(f) <= 1000+18 { // the peer's limit: MTU + Ethernet + VLAN headers
			fit++
		}
	}
	var loss *PeerLossError
	if !errors.As(err, &loss) || loss.Sent != n || loss.Received == 0 || loss.Received > fit || fit == n {
		t.Fatalf("sent %d frames of which %d fit the peer's MTU: got error %v", n, fit, err)
	}
}
