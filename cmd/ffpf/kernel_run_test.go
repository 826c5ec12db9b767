package main

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ffpf-go/ffpf/internal/netnstest"
)

// Live runs as a tcpdump user meets them, in each placement of the
// capture: XDP (the default), tc, and libpcap in userspace.

// placements are the hierarchies a capture on the test's pair is placed
// with: "" is the machine's (XDP), the others are written into dir.
func placements(t *testing.T, dir string) []struct{ name, hier string } {
	t.Helper()
	user, kernel := reviewHier(t, dir)
	return []struct{ name, hier string }{{"xdp", ""}, {"tc", kernel}, {"user", user}}
}

// withHier prepends --hierarchy h to args when h is set.
func withHier(h string, args ...string) []string {
	if h == "" {
		return args
	}
	return append([]string{args[0], "--hierarchy", h}, args[1:]...)
}

// waitCapturing waits until a run on the test's interface is capturing: its
// program is attached (XDP, tc), or its export exists (libpcap opens the
// capture before the export).
func waitCapturing(t *testing.T, placement, out string) {
	t.Helper()
	if placement != "user" {
		waitPrograms(t, 1)
	}
	waitFile(t, out)
}

// waitExit waits for a run to end by itself, after the traffic was sent.
func (c *capture) waitExit(t *testing.T, what string) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case <-done:
		return c.cmd.ProcessState.ExitCode()
	case <-time.After(time.Minute):
		c.cmd.Process.Kill()
		<-done
		t.Fatalf("%s: %v still running a minute later: %s", what, c.cmd.Args, c.err.String())
	}
	return -1
}

// TestCountIsExactInEveryFlowspace: -c N ends the run by itself after the
// sources captured exactly N packets, in XDP and tc as through libpcap,
// with every count coherent: the capture's out, the filter's in, the
// packets the export wrote. A run in XDP or tc used to ignore -c.
func TestCountIsExactInEveryFlowspace(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPair(t)
	dir := t.TempDir()
	const limit = 300
	for i, p := range placements(t, dir) {
		t.Run(p.name, func(t *testing.T) {
			out := filepath.Join(dir, p.name+".pcap")
			c := startCapture(t, nsB, withHier(p.hier, "run", "--json", "-c", fmt.Sprint(limit), "-w", out,
				"(dev,"+ifB+`,direction=in) > (bpf,"tcp") > (pktcount)`)...)
			waitCapturing(t, p.name, out)
			// Paced: libpcap's buffer must not overflow on a loaded machine.
			sendTracePaced(t, nsA, ifA, filepath.Join(dir, "sent-"+p.name+".pcap"), 3000, 20+i, 20000)
			if code := c.waitExit(t, p.name); code != 0 {
				t.Fatalf("exit status %d: %s", code, c.err.String())
			}
			doc := parseRun(t, cliResult{c.out.String(), c.err.String(), 0})
			dev, bpf, cnt := doc.Functions[doc.byClass("dev")[0]], doc.Functions[doc.byClass("bpf")[0]], doc.Functions[doc.byClass("pktcount")[0]]
			if doc.Packets != limit || dev.Out != limit || bpf.In != limit {
				t.Errorf("-c %d: %d packets, the capture brought %d, the filter saw %d", limit, doc.Packets, dev.Out, bpf.In)
			}
			if got := stateNum(t, cnt.State["packets"]); got != bpf.Out || cnt.In != bpf.Out || bpf.Out == 0 {
				t.Errorf("the filter kept %d, pktcount counted %d", bpf.Out, got)
			}
			if n := pcapRecords(out); n != bpf.Out {
				t.Errorf("the export wrote %d packets, the filter kept %d", n, bpf.Out)
			}
			if p.name != "user" {
				waitPrograms(t, 0)
			}
		})
	}
}

// TestJumboFramesKeptWhole: an 8,042-byte frame on a veth of MTU 9000
// comes up whole from XDP and tc (libpcap keeps it whole), under the
// header's snap length of 262144; with steal=true, which cannot carry it
// through an AF_XDP frame, the run says so when it starts and counts it
// as the bridge's dropped. XDP kept
// 1,536 bytes of each.
func TestJumboFramesKeptWhole(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPair(t)
	for _, x := range [][2]string{{nsA, ifA}, {nsB, ifB}} {
		if out, err := exec.Command("ip", "-n", x[0], "link", "set", x[1], "mtu", "9000").CombinedOutput(); err != nil {
			t.Fatalf("mtu: %v: %s", err, out)
		}
	}
	const size, frames = 8042, 3
	send := func(t *testing.T) {
		t.Helper()
		netnstest.In(t, nsA, func() {
			ifc, err := net.InterfaceByName(ifA)
			if err != nil {
				t.Fatal(err)
			}
			fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			sa := &unix.SockaddrLinklayer{Ifindex: ifc.Index, Halen: 6, Addr: [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
			for range frames {
				if err := unix.Sendto(fd, jumboPing(size), 0, sa); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	dir := t.TempDir()
	user, kernel := reviewHier(t, dir)
	for _, p := range []struct{ name, hier string }{{"xdp", ""}, {"tc", kernel}, {"user", user}} {
		t.Run(p.name, func(t *testing.T) {
			out := filepath.Join(dir, p.name+".pcap")
			c := startCapture(t, nsB, withHier(p.hier, "run", "--json", "-w", out,
				"(dev,"+ifB+`,direction=in) > (bpf,"icmp") > (pktcount)`)...)
			waitCapturing(t, p.name, out)
			send(t)
			awaitFile(t, out, frames)
			c.stop(t)
			snap, caps := pcapCapLens(t, out)
			if snap != 262144 || len(caps) != frames {
				t.Fatalf("header snap length %d, %d records (want 262144, %d)", snap, len(caps), frames)
			}
			for _, n := range caps {
				if n != size {
					t.Errorf("a record keeps %d bytes of a %d-byte frame", n, size)
				}
			}
		})
	}
	t.Run("steal", func(t *testing.T) {
		out := filepath.Join(dir, "steal.pcap")
		c := startCapture(t, nsB, "run", "--json", "-c", fmt.Sprint(frames), "-w", out,
			"(dev,"+ifB+`,steal=true) > (bpf,"icmp") > (pktcount)`)
		waitCapturing(t, "xdp", out)
		send(t)
		if code := c.waitExit(t, "steal"); code != 0 {
			t.Fatalf("exit status %d: %s", code, c.err.String())
		}
		if !strings.Contains(c.err.String(), "packets longer than 1792 bytes do not fit an AF_XDP frame") {
			t.Errorf("the run does not say what steal=true cannot carry: %q", c.err.String())
		}
		doc := parseRun(t, cliResult{c.out.String(), c.err.String(), 0})
		if in, dropped := bridgeNums(doc); in != frames || dropped != frames {
			t.Errorf("bridge in %d, dropped %d: want the %d frames that do not fit counted as dropped", in, dropped, frames)
		}
		if _, caps := pcapCapLens(t, out); len(caps) != 0 {
			t.Errorf("%d records came up through AF_XDP", len(caps))
		}
	})
}

// jumboPing is an Ethernet frame of n bytes: a broadcast ICMP echo request.
func jumboPing(n int) []byte {
	f := make([]byte, n)
	copy(f, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x00})
	ip := f[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 1
	binary.BigEndian.PutUint16(ip[2:], uint16(n-14))
	copy(ip[12:], []byte{10, 77, 0, 1, 10, 77, 0, 2})
	ip[20] = 8 // echo request
	for i := 28; i < len(ip); i++ {
		ip[i] = byte(i)
	}
	return f
}

// pcapCapLens returns a pcap file's snap length and its records' captured
// lengths.
func pcapCapLens(t *testing.T, path string) (snap uint32, caps []uint32) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 24 {
		t.Fatalf("%s: %v (%d bytes)", path, err, len(b))
	}
	snap = binary.LittleEndian.Uint32(b[16:])
	for off := 24; off+16 <= len(b); {
		n := binary.LittleEndian.Uint32(b[off+8:])
		caps = append(caps, n)
		off += 16 + int(n)
	}
	return snap, caps
}

// TestInterfaceDisappears: deleting the interface under a capture ends the
// run with exit status 1 and libpcap's words, in every placement (tcpdump:
// "pcap_loop: The interface disappeared"). XDP and tc ran on until killed.
func TestInterfaceDisappears(t *testing.T) {
	dir := t.TempDir()
	for _, p := range placements(t, dir) {
		t.Run(p.name, func(t *testing.T) {
			_, nsB, _, ifB := netnsPair(t)
			out := filepath.Join(dir, p.name+".pcap")
			c := startCapture(t, nsB, withHier(p.hier, "run", "-w", out, "(dev,"+ifB+",direction=in) > (pktcount)")...)
			waitCapturing(t, p.name, out)
			if o, err := exec.Command("ip", "-n", nsB, "link", "del", ifB).CombinedOutput(); err != nil {
				t.Fatalf("ip link del: %v: %s", err, o)
			}
			if code := c.waitExit(t, p.name); code != 1 {
				t.Errorf("exit status %d, want 1", code)
			}
			if want := "dev#1: capture on " + ifB + " failed: The interface disappeared"; !strings.Contains(c.err.String(), want) {
				t.Errorf("stderr %q does not say %q", c.err.String(), want)
			}
		})
	}
}

// TestCopiedMatchesStrategy: a bridge's COPIED column counts what crossed
// by copy, and its STRATEGY says what it did: a copy-once barrier into a
// flowspace that processes in place copies every packet (it showed 0 of
// 11,604); a zero-copy one between two flowspaces that keep PBufs copies
// none.
func TestCopiedMatchesStrategy(t *testing.T) {
	hier := filepath.Join("..", "..", "examples", "hierarchy")
	for _, c := range []struct {
		file, iface, bridge, strategy string
		copied                        bool
	}{
		{"two-nics.yaml", "eth1", "nic1", "copy-once", true},
		{"figure4.yaml", "ixp0-port0", "me0", "zero-copy", false},
	} {
		doc := parseRun(t, ffpf(t, "run", "--json", "--hierarchy", filepath.Join(hier, c.file), "-i", c.iface, `(bpf,"tcp") > (pktcount)`))
		found := false
		for _, b := range doc.Bridges {
			m := b.(map[string]any)
			if m["from"] != c.bridge {
				continue
			}
			found = true
			in, copied := stateNum(t, m["in"]), stateNum(t, m["copied"])
			if m["strategy"] != c.strategy || in == 0 || (c.copied && copied != in) || (!c.copied && copied != 0) {
				t.Errorf("%s: bridge %s: strategy %v, %d in, %d copied", c.file, c.bridge, m["strategy"], in, copied)
			}
		}
		if !found {
			t.Errorf("%s: no bridge from %s in %v", c.file, c.bridge, doc.Bridges)
		}
	}
}
