package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// inNetns runs f on a thread that has entered the network namespace ns;
// sockets f opens stay in ns.
func inNetns(t *testing.T, ns string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread dies with its namespace
		fd, err := unix.Open("/var/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Errorf("namespace %s: %v", ns, err)
			return
		}
		defer unix.Close(fd)
		if err := unix.Unshare(unix.CLONE_FS); err != nil { // setns needs the thread's own fs info
			t.Errorf("unshare: %v", err)
			return
		}
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			t.Errorf("entering %s: %v", ns, err)
			return
		}
		f()
	}()
	<-done
	if t.Failed() {
		t.FailNow()
	}
}

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
	inNetns(t, nsB, func() {
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
	inNetns(t, nsA, func() {
		var err error
		if sender, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 251, 0, 1)}); err != nil {
			t.Error(err)
		}
	})
	defer sender.Close()
	// received drains conn and returns how many datagrams it got.
	received := func(conn *net.UDPConn) int {
		n, buf := 0, make([]byte, 2048)
		for {
			conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
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
			waitPrograms(t, 1)
			if tc.drop { // the program is loaded, then attached: wait until it drops
				for deadline := time.Now().Add(10 * time.Second); ; {
					sender.WriteToUDP([]byte("probe"), &net.UDPAddr{IP: net.IPv4(10, 251, 0, 2), Port: 5001})
					if received(other) == 0 {
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
			got, gotOther := received(keep), received(other)
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
