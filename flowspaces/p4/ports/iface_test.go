package ports

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket/pcap"

	"github.com/ffpf-go/ffpf/internal/netnstest"
)

// frame builds an Ethernet frame: the addresses, then the TPID/TCI
// pairs of tags (outermost first), the EtherType and a payload of n
// bytes numbered from seq.
func frame(seq byte, n int, etherType uint16, tags ...[2]uint16) []byte {
	f := []byte{0x02, 0, 0, 0, 0, 0x0b, 0x02, 0, 0, 0, 0, 0x0a}
	for _, t := range tags {
		f = binary.BigEndian.AppendUint16(f, t[0])
		f = binary.BigEndian.AppendUint16(f, t[1])
	}
	f = binary.BigEndian.AppendUint16(f, etherType)
	for i := range n {
		f = append(f, seq+byte(i))
	}
	return f
}

// vlanFrames are frames whose tags the kernel takes off into a packet's
// metadata (802.1Q and 802.1ad outermost, a VID of 0, PCP and DEI bits,
// a tag on the shortest frame the kernel untags rather than drops: 2
// bytes past the tag's EtherType; a full-size tagged frame) and some it
// leaves (none, TPID 0x9100).
func vlanFrames() [][]byte {
	return [][]byte{
		frame(1, 46, 0x0800),
		frame(2, 46, 0x0800, [2]uint16{0x8100, 5<<13 | 100}),
		frame(3, 46, 0x86dd, [2]uint16{0x8100, 0}),
		frame(4, 46, 0x0800, [2]uint16{0x88a8, 200}, [2]uint16{0x8100, 300}),
		frame(5, 40, 0x0806, [2]uint16{0x8100, 1<<12 | 0xfff}),
		frame(6, 46, 0x0800, [2]uint16{0x9100, 7}),
		frame(7, 2, 0x0800, [2]uint16{0x8100, 42}),
		frame(8, 1500, 0x0800, [2]uint16{0x8100, 3<<13 | 4000}),
		frame(9, 46, 0x0800, [2]uint16{0x88a8, 1}),
	}
}

// openIn opens a port on iface in namespace ns.
func openIn(t *testing.T, ns, iface string, room int) *Iface {
	t.Helper()
	var p *Iface
	netnstest.In(t, ns, func() {
		var err error
		if p, err = openIface(iface, room); err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(func() { p.Close() })
	return p
}

// libpcap opens a capture of what iface receives, in namespace ns: the
// oracle, which puts back the tags the kernel took off.
func libpcap(t *testing.T, ns, iface string) *pcap.Handle {
	t.Helper()
	var h *pcap.Handle
	netnstest.In(t, ns, func() {
		in, err := pcap.NewInactiveHandle(iface)
		if err != nil {
			t.Fatal(err)
		}
		defer in.CleanUp()
		in.SetSnapLen(65535)
		in.SetImmediateMode(true)
		in.SetTimeout(100 * time.Millisecond)
		if h, err = in.Activate(); err != nil {
			t.Fatal(err)
		}
		if err := h.SetDirection(pcap.DirectionIn); err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(h.Close)
	return h
}

// reader collects what a port reads until stop.
type reader struct {
	mu     sync.Mutex
	frames [][]byte
	done   chan struct{}
	ended  chan error
}

func startReading(p *Iface) *reader {
	r := &reader{done: make(chan struct{}), ended: make(chan error, 1)}
	go func() {
		r.ended <- p.Read(r.done, func(f []byte) {
			r.mu.Lock()
			r.frames = append(r.frames, bytes.Clone(f))
			r.mu.Unlock()
		})
	}()
	return r
}

// wait waits until n frames were read (or 20 s passed), then stops.
func (r *reader) wait(t *testing.T, n int) [][]byte {
	t.Helper()
	return r.until(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.frames) >= n
	})
}

// until waits until done says so (or 20 s passed), then stops.
func (r *reader) until(t *testing.T, done func() bool) [][]byte {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && !done(); time.Sleep(5 * time.Millisecond) {
	}
	close(r.done)
	if err := <-r.ended; err != nil {
		t.Fatal(err)
	}
	return r.frames
}

func captured(t *testing.T, h *pcap.Handle, n int) [][]byte {
	t.Helper()
	var out [][]byte
	for deadline := time.Now().Add(20 * time.Second); len(out) < n && time.Now().Before(deadline); {
		data, _, err := h.ReadPacketData()
		if err == nil {
			out = append(out, bytes.Clone(data))
		}
	}
	return out
}

func sameFrames(t *testing.T, what string, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d frames, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("%s: frame %d is\n%x\nwant\n%x", what, i, got[i], want[i])
		}
	}
}

// A port delivers frames as they were on the wire, tags put back with
// their TPID where the kernel took them off, as libpcap captures them;
// and it transmits frames as given, tags and all. Both ways on a veth
// pair: libpcap sends, the port reads; the port sends, libpcap and the
// other port read.
func TestIfaceVLAN(t *testing.T) {
	nsA, nsB, ifA, ifB := netnstest.Pair(t, "pv", "VLAN tags through a switch port", 1)
	frames := vlanFrames()
	a, b := openIn(t, nsA, ifA, maxFrame), openIn(t, nsB, ifB, maxFrame)
	capA, capB := libpcap(t, nsA, ifA), libpcap(t, nsB, ifB)

	// libpcap sends into A; the port on B reads.
	rb := startReading(b)
	for _, f := range frames {
		if err := capA.WritePacketData(f); err != nil {
			t.Fatalf("libpcap sends %x: %v", f, err)
		}
	}
	sameFrames(t, "the port read", rb.wait(t, len(frames)), frames)
	sameFrames(t, "libpcap captured", captured(t, capB, len(frames)), frames)
	if st := b.Stats(); st.Received != uint64(len(frames)) || st.Lost != 0 || st.TooLong != 0 {
		t.Errorf("port B: %+v", st)
	}

	// The port on B sends; libpcap on A and the port on A read.
	ra := startReading(a)
	for _, f := range frames {
		b.Write(f)
	}
	sameFrames(t, "libpcap captured what the port sent", captured(t, capA, len(frames)), frames)
	sameFrames(t, "the other port read what the port sent", ra.wait(t, len(frames)), frames)
	if st := b.Stats(); st.Errors != 0 {
		t.Errorf("port B refused to send %d frames", st.Errors)
	}
	// It reads nothing of what it sent itself.
	if st := b.Stats(); st.Received != uint64(len(frames)) {
		t.Errorf("port B read %d frames, %d were sent to it", st.Received, len(frames))
	}
}

// ifaceDrops returns the frames interface iface in namespace ns dropped
// on receiving and on sending (a veth drops when its peer's backlog is
// full), as ip -s counts them.
func ifaceDrops(t *testing.T, ns, iface string) (rx, tx uint64) {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns, "-s", "-j", "link", "show", iface).Output()
	if err != nil {
		t.Fatalf("ip -s link show %s: %v", iface, err)
	}
	var links []struct {
		Stats64 struct {
			RX struct{ Dropped uint64 } `json:"rx"`
			TX struct{ Dropped uint64 } `json:"tx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		t.Fatalf("ip -s -j link show %s: %v: %s", iface, err, out)
	}
	return links[0].Stats64.RX.Dropped, links[0].Stats64.TX.Dropped
}

// Frames a port could not take are counted: those the kernel dropped
// while the switch did not read (its socket's buffer full), and those
// longer than a read takes; every other frame is read. The port is
// opened to take frames of 1,000 bytes, so that one longer is too long.
func TestIfaceCountsLosses(t *testing.T) {
	nsA, nsB, ifA, ifB := netnstest.Pair(t, "pl", "a switch port's losses", 1)
	a, b := openIn(t, nsA, ifA, maxFrame), openIn(t, nsB, ifB, 1000)
	rxB0, _ := ifaceDrops(t, nsB, ifB)
	_, txA0 := ifaceDrops(t, nsA, ifA)
	// Nobody reads B while A sends more than its buffer holds.
	const n = 60000
	small, long := frame(0, 46, 0x0800), frame(0, 1200, 0x0800)
	for i := range n {
		if i%1000 == 999 {
			a.Write(long)
		} else {
			a.Write(small)
		}
	}
	if st := a.Stats(); st.Errors != 0 {
		t.Fatalf("A refused to send %d frames", st.Errors)
	}
	// All was lost while nobody read: the rest is read.
	rxB, _ := ifaceDrops(t, nsB, ifB)
	_, txA := ifaceDrops(t, nsA, ifA)
	lostOnVeth := rxB - rxB0 + txA - txA0
	lost := b.Stats()
	r := startReading(b)
	got := r.until(t, func() bool { st := b.Stats(); return st.Received+st.TooLong+lost.Lost+lostOnVeth >= n })
	st := b.Stats()
	if st.Received != uint64(len(got)) {
		t.Errorf("%d frames read, the port counts %d", len(got), st.Received)
	}
	if st.Lost == 0 || st.TooLong == 0 {
		t.Errorf("nothing counted lost or too long of %d frames sent unread: %+v", n, st)
	}
	if sum := st.Received + st.Lost + st.TooLong + lostOnVeth; sum != n {
		t.Errorf("sent %d; read %d, lost %d, too long %d, dropped by the veth %d: %d", n, st.Received, st.Lost, st.TooLong, lostOnVeth, sum)
	}
	for _, f := range got {
		if !bytes.Equal(f, small) {
			t.Fatalf("a frame read is %d bytes, not the short one sent", len(f))
		}
	}
	t.Logf("sent %d unread: %+v, dropped by the veth %d", n, st, lostOnVeth)
}
