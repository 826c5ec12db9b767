package dev

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ffpf-go/ffpf/functions"
)

// TestCaptureInsideANamespace captures on a veth inside a network namespace
// the test creates: the test binary runs itself under `ip netns exec` as the
// capturing child, and the parent sends frames into the other end of the
// pair from the root namespace. Namespace and veth are removed afterwards.
func TestCaptureInsideANamespace(t *testing.T) {
	if iface := os.Getenv("FFPF_DEV_CHILD"); iface != "" {
		captureChild(t, iface)
		return
	}
	needRoot(t)
	id := os.Getpid() % 1000000
	ns, a, b := fmt.Sprintf("ffpf%d", id), fmt.Sprintf("ff%dn", id), fmt.Sprintf("ff%dnp", id)
	exec.Command("ip", "netns", "del", ns).Run() // left over from a killed run
	exec.Command("ip", "link", "del", a).Run()
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	run(t, "ip", "link", "add", a, "type", "veth", "peer", "name", b)
	t.Cleanup(func() { exec.Command("ip", "link", "del", a).Run() })
	run(t, "ip", "link", "set", b, "netns", ns)
	os.WriteFile("/proc/sys/net/ipv6/conf/"+a+"/disable_ipv6", []byte("1"), 0)
	run(t, "ip", "netns", "exec", ns, "sh", "-c", "echo 1 > /proc/sys/net/ipv6/conf/"+b+"/disable_ipv6")
	run(t, "ip", "link", "set", a, "up")
	run(t, "ip", "-n", ns, "link", "set", b, "up")

	const n = 300
	child := exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run=^TestCaptureInsideANamespace$")
	child.Env = append(os.Environ(), "FFPF_DEV_CHILD="+b, "FFPF_DEV_WANT="+strconv.Itoa(n))
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "READY" {
		t.Fatalf("the capturing child did not start: %q", lines.Text())
	}
	peer, err := exec.Command("ip", "-n", ns, "-o", "link", "show", b).Output()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(peer))
	var mac net.HardwareAddr
	for i := range f {
		if f[i] == "link/ether" && i+1 < len(f) {
			mac, _ = net.ParseMAC(f[i+1])
		}
	}
	inject(t, a, frames(n, mac))
	var report []string
	for lines.Scan() {
		report = append(report, lines.Text())
	}
	if err := child.Wait(); err != nil {
		t.Fatalf("child: %v: %s", err, strings.Join(report, "\n"))
	}
	if !strings.Contains(strings.Join(report, "\n"), fmt.Sprintf("GOT %d of %d", n, n)) {
		t.Fatalf("the capture inside %s missed frames: %s", ns, strings.Join(report, "\n"))
	}
}

// captureChild runs inside the namespace: it opens the dev source on iface
// and reports how many marker frames arrived.
func captureChild(t *testing.T, iface string) {
	want, _ := strconv.Atoi(os.Getenv("FFPF_DEV_WANT"))
	s := openClass(t, functions.Arg{Key: "expr", Value: word(iface)})
	defer s.Close()
	fmt.Println("READY")
	got, _ := collect(t, s, want, 30*time.Second) // returns once all arrived
	fmt.Printf("GOT %d of %d\n", len(got), want)
}
