package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ffpf-go/ffpf/internal/netnstest"
)

// TestDropVerdict: with (dev,IF,drop=true), the packets the graph filters
// out never reach the kernel stack, in XDP and at tc: of two UDP streams
// into the namespace, the socket of the one the filter keeps receives all
// its datagrams, the other none, and the capture's state counts the
// discarded ones. Without drop, both arrive.
func TestDropVerdict(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPair(t)
	dir := t.TempDir()
	_, kernel := reviewHier(t, dir)
	for _, x := range [][3]string{{nsA, ifA, "10.251.0.1/24"}, {nsB, ifB, "10.251.0.2/24"}} {
		if out, err := exec.Command("ip", "-n", x[0], "addr", "add", x[2], "dev", x[1]).CombinedOutput(); err != nil {
			t.Fatalf("ip addr: %v: %s", err, out)
		}
	}
	var keep, other *net.UDPConn
	netnstest.In(t, nsB, func() {
		var err error
		if keep, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 251, 0, 2), Port: 5000}); err != nil {
			t.Error(err)
			return
		}
		if other, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 251, 0, 2), Port: 5001}); err != nil {
			t.Error(err)
		}
	})
	defer keep.Close()
	defer other.Close()
	var sender *net.UDPConn
	netnstest.In(t, nsA, func() {
		var err error
		if sender, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 251, 0, 1)}); err != nil {
			t.Error(err)
		}
	})
	defer sender.Close()
	// received reads from conn until want datagrams have come (waiting up
	// to 30 s for each), then takes what is already queued, and returns
	// how many it got.
	received := func(conn *net.UDPConn, want int) int {
		n, buf := 0, make([]byte, 2048)
		for {
			wait := 30 * time.Second
			if n >= want {
				wait = 50 * time.Millisecond
			}
			conn.SetReadDeadline(time.Now().Add(wait))
			if _, _, err := conn.ReadFromUDP(buf); err != nil {
				return n
			}
			n++
		}
	}
	const datagrams = 200
	for _, tc := range []struct {
		name string
		args []string
		drop bool
	}{
		{"xdp", nil, true},
		{"tc", []string{"--hierarchy", kernel}, true},
		{"xdp without drop", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"run", "--json"}, tc.args...)
			c := startCapture(t, nsB, append(args, fmt.Sprintf(`(dev,%s,drop=%v) > (bpf,"arp or udp dst port 5000") > (pktcount)`, ifB, tc.drop))...)
			waitPrograms(t, 2) // the tc egress too: the capture sees both directions
			// ARP resolved: a datagram of the kept stream has come through.
			sender.WriteToUDP([]byte("marker"), &net.UDPAddr{IP: net.IPv4(10, 251, 0, 2), Port: 5000})
			if received(keep, 1) == 0 {
				t.Fatal("the kept stream does not reach its socket")
			}
			if tc.drop { // the program is loaded, then attached: wait until it drops
				// A probe to the filtered stream, then one to the kept
				// stream: once the second has come, the first has been
				// delivered or dropped (one queue: in order).
				for deadline := time.Now().Add(30 * time.Second); ; {
					sender.WriteToUDP([]byte("probe"), &net.UDPAddr{IP: net.IPv4(10, 251, 0, 2), Port: 5001})
					sender.WriteToUDP([]byte("marker"), &net.UDPAddr{IP: net.IPv4(10, 251, 0, 2), Port: 5000})
					if received(keep, 1) == 0 {
						t.Fatal("the kept stream does not reach its socket")
					}
					if received(other, 0) == 0 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("the filtered stream still reaches its socket")
					}
				}
			}
			for i := range datagrams {
				for _, port := range []int{5000, 5001} {
					if _, err := sender.WriteToUDP([]byte(fmt.Sprint("datagram ", i)), &net.UDPAddr{IP: net.IPv4(10, 251, 0, 2), Port: port}); err != nil {
						t.Fatal(err)
					}
				}
				if i%50 == 0 {
					time.Sleep(5 * time.Millisecond) // the first waits for ARP
				}
			}
			// The kept stream first: once it is all in, so is the other
			// (sent alongside it, one queue).
			got := received(keep, datagrams)
			gotOther := received(other, map[bool]int{true: 0, false: datagrams}[tc.drop])
			doc := c.stop(t)
			waitPrograms(t, 0)
			dev := doc.Functions[doc.byClass("dev")[0]]
			if want := map[bool]string{true: "kernel", false: "xdp:" + ifB}[tc.name == "tc"]; dev.Flowspace != want {
				t.Fatalf("the capture ran in %s, want %s", dev.Flowspace, want)
			}
			if got != datagrams {
				t.Errorf("the kept stream delivered %d of %d datagrams", got, datagrams)
			}
			discarded := stateNum(t, dev.State["discarded"])
			if tc.drop {
				if gotOther != 0 {
					t.Errorf("%d datagrams of the filtered stream reached the socket", gotOther)
				}
				if discarded < datagrams {
					t.Errorf("the capture counts %d discarded packets, want at least %d", discarded, datagrams)
				}
			} else if gotOther != datagrams || discarded != 0 {
				t.Errorf("without drop: %d of %d datagrams of the other stream arrived, %d discarded", gotOther, datagrams, discarded)
			}
		})
	}
}

// TestDropNeedsAnEBPFHook: drop=true cannot be honoured by a libpcap
// capture, so a request that would put it in userspace fails with the
// reason.
func TestDropNeedsAnEBPFHook(t *testing.T) {
	dir := t.TempDir()
	user := filepath.Join(dir, "user.yaml")
	os.WriteFile(user, []byte("children: []\n"), 0o644)
	r := ffpf(t, "place", "--hierarchy", user, "(dev,lo,drop=true) > (pktcount)")
	if r.code != 2 || !strings.Contains(r.stderr, "drop=true drops packets at an eBPF hook") {
		t.Errorf("exit %d: %s", r.code, r.stderr)
	}
}

// TestStealZeroCopyQueuesAndSources: zero-copy AF_XDP with a socket per
// receive queue (a veth of 4 queues) and two sources on the interface:
// each export gets libpcap's selection byte for byte, nothing is copied,
// and the run says how many sockets it used.
func TestStealZeroCopyQueuesAndSources(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPairQueues(t, 4)
	dir := t.TempDir()
	zc := filepath.Join(dir, "zc.yaml")
	os.WriteFile(zc, []byte("children:\n  - kind: kernel\n    bridge: zero-copy\n    children:\n"+
		"      - {kind: xdp, interface: "+ifB+", bridge: zero-copy}\n"), 0o644)
	udp, tcp, sent := filepath.Join(dir, "udp.pcap"), filepath.Join(dir, "tcp.pcap"), filepath.Join(dir, "sent.pcap")
	// Two captures that differ (snaplen) so that the overlay keeps both.
	c := startCapture(t, nsB, "run", "--hierarchy", zc, fmt.Sprintf(
		`[(dev,%s,steal=true) > (bpf,"udp and not vlan") > (export,file=%s) | (dev,%s,steal=true,snaplen=65535) > (bpf,"tcp") > (export,file=%s)]`,
		ifB, udp, ifB, tcp))
	waitPrograms(t, 1)
	waitFile(t, tcp)
	waitFile(t, udp)
	sendTracePaced(t, nsA, ifA, sent, 40000, 4, 25000) // exact counts through AF_XDP: paced, as in TestStealThroughAFXDP
	awaitFile(t, udp, selected(t, sent, "udp and not vlan"))
	awaitFile(t, tcp, selected(t, sent, "tcp"))
	c.cmd.Process.Signal(os.Interrupt)
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("%v: %s", err, c.err.String())
	}
	out := c.out.String()
	if !strings.Contains(out, "4 AF_XDP socket(s), one per receive queue, zero-copy") {
		t.Errorf("the run does not say it used 4 zero-copy sockets:\n%s", out)
	}
	for _, x := range [][2]string{{udp, "udp and not vlan"}, {tcp, "tcp"}} {
		a, _ := exec.Command("tcpdump", "-r", sent, "-nn", "-x", x[1]).Output()
		b, _ := exec.Command("tcpdump", "-r", x[0], "-nn", "-x").Output()
		// The sockets of the queues are read in turn: the order differs.
		if pa, pb := sortedPackets(a), sortedPackets(b); !slices.Equal(pa, pb) || len(pa) == 0 {
			t.Errorf("%s: the export holds %d packets, libpcap selects %d, or their bytes differ", x[1], len(pb), len(pa))
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 6 && strings.HasPrefix(line, "kernel > user") && f[5] != "0" {
			t.Errorf("copied across the zero-copy bridge: %s", line)
		}
	}
	waitPrograms(t, 0)
}

// sortedPackets splits `tcpdump -x` output into packets (a header line and
// its hex lines, timestamp stripped) and sorts them.
func sortedPackets(b []byte) []string {
	var pkts []string
	for _, l := range strings.Split(strip(b), "\n") {
		if strings.HasPrefix(l, "\t") && len(pkts) > 0 {
			pkts[len(pkts)-1] += "\n" + l
		} else if l != "" {
			pkts = append(pkts, l)
		}
	}
	slices.Sort(pkts)
	return pkts
}
