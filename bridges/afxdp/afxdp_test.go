package afxdp

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/asavie/xdp"
)

// TestSocketCloseReleasesQueue: asavie/xdp's Socket.Close unmaps
// the UMEM but not the four rings, which were mmapped from the socket: the
// mappings would keep the socket alive, bound to its queue, for the life
// of the process, and a new socket on that queue would fail with EBUSY (a
// second runtime in the same process, say). closeSocket unmaps them.
func TestSocketCloseReleasesQueue(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("needs root")
		}
		t.Skip("needs root")
	}
	a, b := fmt.Sprintf("ffu%da", os.Getpid()%100000), fmt.Sprintf("ffu%db", os.Getpid()%100000)
	if out, err := exec.Command("ip", "link", "add", a, "type", "veth", "peer", "name", b).CombinedOutput(); err != nil {
		t.Fatalf("ip link: %v: %s", err, out)
	}
	defer exec.Command("ip", "link", "del", a).Run()
	exec.Command("ip", "link", "set", a, "up").Run()
	exec.Command("ip", "link", "set", b, "up").Run()
	ifc, err := net.InterfaceByName(b)
	if err != nil {
		t.Fatal(err)
	}
	opts := xskOptions
	s, err := xdp.NewSocket(ifc.Index, 0, &opts)
	if err != nil {
		t.Fatal(err)
	}
	closeSocket(s)
	maps, _ := os.ReadFile("/proc/self/maps")
	for _, l := range strings.Split(string(maps), "\n") {
		if strings.Contains(l, "socket:[") {
			t.Errorf("still mapped after closeSocket: %s", l)
		}
	}
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		opts := xskOptions
		s2, err := xdp.NewSocket(ifc.Index, 0, &opts)
		if err == nil {
			closeSocket(s2)
			return
		}
		// The kernel frees the old socket asynchronously (an RCU
		// grace period, later on a loaded machine).
		if time.Since(start) > 30*time.Second {
			t.Fatalf("a new AF_XDP socket on the queue of a closed one: %v", err)
		}
	}
}
