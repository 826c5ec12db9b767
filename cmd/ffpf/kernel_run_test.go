package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// TestCountIsExactInEveryFlowspace: -c N counts as tcpdump -c N does, the
// packets that reach the ends of the graph (the README's example
// `-c N '(bpf,"tcp[tcpflags] & tcp-syn != 0") > (pktcount)'` counts N
// SYNs), in XDP and tc as through libpcap: the run ends by itself once
// exactly N reached pktcount, whether the end is in the hook's flowspace
// or above it (-w's export in userspace), -w writes the first N SYNs
// tcpdump selects from what was sent, and the capture let no packet after
// the N-th into the graph. --capture-count N keeps the old meaning: N
// captured, of which the filter kept some. -c used to count captured
// packets: pktcount then counted fewer than N.
func TestCountIsExactInEveryFlowspace(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPair(t)
	dir := t.TempDir()
	const limit, syn = 100, "tcp[tcpflags] & tcp-syn != 0"
	for i, p := range placements(t, dir) {
		for _, v := range []struct {
			name string
			args []string
		}{{"ends", []string{"-c", fmt.Sprint(limit)}}, {"write", []string{"-c", fmt.Sprint(limit), "-w"}},
			{"capture", []string{"--capture-count", fmt.Sprint(limit), "-w"}}} {
			if v.name == "capture" && p.name != "xdp" {
				continue
			}
			t.Run(p.name+"/"+v.name, func(t *testing.T) {
				out := filepath.Join(dir, p.name+v.name+".pcap")
				args := append([]string{"run", "--json", "-i", ifB, "-Q", "in"}, v.args...)
				if v.name == "ends" {
					// An end no packet reaches (no -w): waitCapturing sees
					// its file.
					args = append(args, "-e", `(bpf,"ether proto 0x9999") > (export,file=`+out+")")
				} else {
					args = append(args, out)
				}
				c := startCapture(t, nsB, withHier(p.hier, append(args, "-e", `(bpf,"`+syn+`") > (pktcount)`)...)...)
				waitCapturing(t, p.name, out)
				sent := filepath.Join(dir, "sent-"+p.name+v.name+".pcap")
				// Paced: libpcap's buffer must not overflow on a loaded machine.
				sendTracePaced(t, nsA, ifA, sent, 3000, 20+i, 20000)
				if code := c.waitExit(t, p.name); code != 0 {
					t.Fatalf("exit status %d: %s", code, c.err.String())
				}
				doc := parseRun(t, cliResult{c.out.String(), c.err.String(), 0})
				dev, bpf := doc.Functions[doc.byClass("dev")[0]], doc.Functions[doc.byClass("bpf")[0]]
				if bpf.Params["expr"] != syn {
					bpf = doc.Functions[doc.byClass("bpf")[1]]
				}
				cnt := doc.Functions[doc.byClass("pktcount")[0]]
				if got := stateNum(t, cnt.State["packets"]); got != cnt.In || cnt.In != bpf.Out || bpf.In != dev.Out || doc.Packets != dev.Out {
					t.Errorf("the capture brought %d (packets %d), the filter saw %d and kept %d, pktcount counted %d of %d",
						dev.Out, doc.Packets, bpf.In, bpf.Out, got, cnt.In)
				}
				// What the capture sees of what was sent: XDP every frame,
				// tc and libpcap those the stack takes.
				seen := sent
				if p.name != "xdp" {
					seen = filepath.Join(dir, "seen-"+p.name+v.name+".pcap")
					tcpdumpSelect(t, sent, seen, stackTakes, 0)
				}
				want := filepath.Join(dir, "want-"+p.name+v.name+".pcap")
				if v.name == "capture" {
					// --capture-count: the first 100 frames, of which the
					// filter kept the SYNs.
					first := filepath.Join(dir, "first.pcap")
					tcpdumpSelect(t, seen, first, "", limit)
					tcpdumpSelect(t, first, want, syn, 0)
					w := readRecs(t, want)
					if dev.Out != limit || bpf.Out != uint64(len(w)) || len(w) == 0 || !sameFrames(readRecs(t, out), w) {
						t.Errorf("--capture-count %d: the capture brought %d, the filter kept %d; the first %d frames hold %d SYNs",
							limit, dev.Out, bpf.Out, limit, len(w))
					}
					return
				}
				if bpf.Out != limit {
					t.Errorf("-c %d: the filter kept %d, pktcount counted %d", limit, bpf.Out, cnt.In)
				}
				tcpdumpSelect(t, seen, want, syn, limit) // tcpdump -c 100
				w := readRecs(t, want)
				if got := readRecs(t, out); v.name == "write" && !sameFrames(got, w) {
					t.Errorf("-w wrote %d packets; tcpdump -c %d selects %d: they differ", len(got), limit, len(w))
				}
				// The capture brought every frame up to the last SYN
				// counted, and none after it.
				if n := frameIndex(readRecs(t, seen), w[len(w)-1]) + 1; n == 0 || dev.Out != uint64(n) {
					t.Errorf("the capture brought %d packets into the graph; the %d-th SYN is packet %d of those it sees", dev.Out, limit, n)
				}
				if p.name != "user" {
					waitPrograms(t, 0)
				}
			})
		}
	}
}

// sameFrames reports whether a and b hold the same packets' bytes in order.
func sameFrames(a, b []rec) bool {
	return slices.EqualFunc(a, b, func(x, y rec) bool { return bytes.Equal(x.data, y.data) })
}

// frameIndex is the position of f (its time and bytes) in fs, or -1.
func frameIndex(fs []rec, f rec) int {
	return slices.IndexFunc(fs, func(x rec) bool { return x.ts == f.ts && bytes.Equal(x.data, f.data) })
}

// tcpdumpSelect writes to out the packets of file libpcap's filter expr
// selects, the first count of them when count > 0 (tcpdump -c).
func tcpdumpSelect(t *testing.T, file, out, expr string, count int) {
	t.Helper()
	args := []string{"-r", file, "-w", out}
	if count > 0 {
		args = append(args, "-c", fmt.Sprint(count))
	}
	if expr != "" {
		args = append(args, expr)
	}
	if out, err := exec.Command("tcpdump", args...).CombinedOutput(); err != nil {
		t.Fatalf("tcpdump %v: %v: %s", args, err, out)
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
		// The frames never reach the end: the run ends on what it captured.
		c := startCapture(t, nsB, "run", "--json", "--capture-count", fmt.Sprint(frames), "-w", out,
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
