package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/gopacket/pcapgo"

	"github.com/ffpf-go/ffpf/functions/gen"
	"github.com/ffpf-go/ffpf/internal/netnstest"
)

func TestGenTxFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"gen", "-i", "lo", "--tx", "raw"}, "--tx must be packet or xdp"},
		{[]string{"gen", "-i", "lo", "--pool", "10"}, "--pool goes with --tx xdp"},
		{[]string{"gen", "-i", "lo", "--tx", "xdp", "--pool", "-1"}, "--pool must be between"},
	} {
		r := ffpf(t, tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("ffpf %v: exit %d, %q; want exit 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}

// TestGenXDPOnVeth: gen --tx xdp refuses a veth whose peer cannot take XDP
// frames, and once GRO is on there, sends and records the trace, ending
// with the line scripts parse.
func TestGenXDPOnVeth(t *testing.T) {
	nsA, nsB, ifA, ifB := netnstest.Pair(t, "ffg", "gen --tx xdp", 1)
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}

	send := func(args ...string) (string, int) {
		cmd := exec.Command("ip", append([]string{"netns", "exec", nsA, ffpfBin, "gen", "-i", ifA, "--tx", "xdp"}, args...)...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	out, code := send("--packets", "1000")
	if code != 1 || !strings.Contains(out, "NAPI") {
		t.Fatalf("to a peer without NAPI: exit %d, %q; want exit 1 and a word on NAPI", code, out)
	}
	enableGRO(t, nsB, ifB)
	sent := filepath.Join(t.TempDir(), "sent.pcap")
	out, code = send("--packets", "20000", "--malformed", "0.02", "-o", sent)
	m := regexp.MustCompile(`(?m)^sent (\d+) packets on \S+ in \S+ \(\d+ pps\); (\d+) refused by the interface\n\z`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("exit %d, %q; want exit 0 and the final line", code, out)
	}
	n, _ := strconv.Atoi(m[1])
	skipped, _ := strconv.Atoi(m[2])
	if n+skipped != 20000 || skipped == 0 {
		t.Fatalf("sent %d and refused %d of 20000", n, skipped)
	}
	f, err := os.Open(sent)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for ; ; got++ {
		if _, _, err := r.ReadPacketData(); err != nil {
			break
		}
	}
	if got != n {
		t.Fatalf("%s holds %d frames, want %d", sent, got, n)
	}

	// A peer that drops some (too long for its MTU) is worth a warning.
	ip("-n", nsB, "link", "set", ifB, "mtu", "1000")
	out, code = send("--packets", "20000")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || !strings.Contains(lines[0], "warning: the peer of "+ifA+" took") || !strings.HasPrefix(lines[1], "sent ") {
		t.Fatalf("to a peer with a smaller MTU: exit %d, %q; want exit 0, a warning and the final line", code, out)
	}
}

// enableGRO turns GRO on for iface in ns.
func enableGRO(t *testing.T, ns, iface string) {
	t.Helper()
	netnstest.In(t, ns, func() {
		if err := gen.EnableGRO(iface); err != nil {
			t.Fatal(err)
		}
	})
}
