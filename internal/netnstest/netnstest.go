// Package netnstest gives tests their own network: two network namespaces
// joined by a veth pair, removed at the end, and a way to run code inside
// one of them. Tests that need it run as root; under CI=true a missing
// requirement fails the test with the reason, elsewhere it skips.
package netnstest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Pair creates namespaces <tag>na and <tag>nb joined by a veth pair with
// the given number of queues (<tag>a in the first, <tag>b in the second),
// IPv6 off so that only the test's frames cross it, and removes them when
// the test ends. tag is a short prefix naming the caller; the process id
// is added so that concurrent test binaries do not collide. what says
// what the test checks, for the message when something is missing.
func Pair(t testing.TB, tag, what string, queues int) (nsA, nsB, ifA, ifB string) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	for _, tool := range []string{"ip", "tcpdump"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("cannot test %s: missing %s", what, strings.Join(missing, ", "))
		}
		t.Skipf("needs %s", strings.Join(missing, ", "))
	}
	tag = fmt.Sprintf("%s%d", tag, os.Getpid()%100000)
	nsA, nsB, ifA, ifB = tag+"na", tag+"nb", tag+"a", tag+"b"
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	for _, ns := range []string{nsA, nsB} {
		exec.Command("ip", "netns", "del", ns).Run() // left over from a killed run
		ip("netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	}
	q := fmt.Sprint(queues)
	ip("link", "add", ifA, "netns", nsA, "numtxqueues", q, "numrxqueues", q,
		"type", "veth", "peer", "name", ifB, "netns", nsB, "numtxqueues", q, "numrxqueues", q)
	for _, x := range [][2]string{{nsA, ifA}, {nsB, ifB}} {
		exec.Command("ip", "netns", "exec", x[0], "sysctl", "-qw", "net.ipv6.conf."+x[1]+".disable_ipv6=1").Run()
		ip("-n", x[0], "link", "set", x[1], "up")
	}
	for _, x := range [][2]string{{nsA, ifA}, {nsB, ifB}} {
		WaitUp(t, x[0], x[1])
	}
	return nsA, nsB, ifA, ifB
}

// WaitUp waits until interface iface in namespace ns carries frames: its
// carrier is on and its queueing discipline attached. Until the kernel's
// link watch gets to it (later on a loaded machine), the device has the
// noop discipline, which drops what is sent without an error.
func WaitUp(t testing.TB, ns, iface string) {
	t.Helper()
	var out []byte
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var err error
		if out, err = exec.Command("ip", "-n", ns, "-j", "link", "show", iface).Output(); err != nil {
			t.Fatalf("ip -n %s link show %s: %v", ns, iface, err)
		}
		var links []struct{ Operstate, Qdisc string }
		if json.Unmarshal(out, &links) == nil && len(links) == 1 && links[0].Operstate == "UP" && links[0].Qdisc != "noop" {
			return
		}
	}
	t.Fatalf("%s in %s is not up after 10 s: %s", iface, ns, out)
}

// Alone creates a namespace <tag><pid>n of its own, with only its
// loopback interface, up, and removes it when the test ends: a network in
// which 127.0.0.1 and any port are the test's alone. what says what the
// test checks, for the message when root is missing.
func Alone(t testing.TB, tag, what string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("cannot test %s: a network namespace needs root", what)
		}
		t.Skip("needs root for a network namespace")
	}
	ns := fmt.Sprintf("%s%dn", tag, os.Getpid()%100000)
	exec.Command("ip", "netns", "del", ns).Run() // left over from a killed run
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", ns, err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	if out, err := exec.Command("ip", "-n", ns, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("ip -n %s link set lo up: %v: %s", ns, err, out)
	}
	return ns
}

// In runs f on a thread moved into namespace ns, then moves the thread
// back (or lets it die with the goroutine if it cannot). Sockets f opens
// stay in ns.
func In(t testing.TB, ns string, f func()) {
	t.Helper()
	runtime.LockOSThread()
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer unix.Close(orig)
	target, err := unix.Open("/var/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer unix.Close(target)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("entering %s: %v", ns, err)
	}
	defer func() {
		if unix.Setns(orig, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
	}()
	f()
}
