// Package netnstest gives tests their own network: two network namespaces
// joined by a veth pair, removed at the end, and a way to run code inside
// one of them. Tests that need it run as root; under CI=true a missing
// requirement fails the test with the reason, elsewhere it skips.
package netnstest

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

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
	return nsA, nsB, ifA, ifB
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
