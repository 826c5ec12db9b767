package main

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// An interface libpcap does not know is refused before anything runs, in
// tcpdump's words, by run, check and place alike.
func TestUnknownInterface(t *testing.T) {
	for _, args := range [][]string{
		{"run", "-i", "ffnosuch0", "-c", "1", "(pktcount)"},
		{"check", "-i", "ffnosuch0", "(pktcount)"},
		{"place", "-i", "ffnosuch0", "(pktcount)"},
	} {
		r := ffpf(t, args...)
		if r.code != 2 || r.stderr != "ffpf: ffnosuch0: No such device exists\n" {
			t.Errorf("ffpf %v: exit %d, stderr %q; want exit 2 and ffnosuch0: No such device exists", args, r.code, r.stderr)
		}
	}
	// Named in an expression, it has no flowspace to run in.
	for _, cmd := range []string{"check", "place"} {
		r := ffpf(t, cmd, "(dev,ffnosuch0) > (pktcount)")
		if r.code != 2 || !strings.Contains(r.stderr, "user: ffnosuch0: No such device exists") {
			t.Errorf("ffpf %s (dev,ffnosuch0): exit %d, stderr %q", cmd, r.code, r.stderr)
		}
	}
	// A hierarchy file's simulated interface need not exist.
	if r := ffpf(t, "check", "--hierarchy", "../../examples/hierarchy/two-nics.yaml", "-i", "eth1", "(pktcount)"); r.code != 0 {
		t.Errorf("a simulated interface is refused: exit %d: %s", r.code, r.stderr)
	}
}

// -i any is captured by libpcap in userspace (cooked headers), never by an
// eBPF hook: no XDP or tc hook is "any".
func TestCaptureAny(t *testing.T) {
	r := ffpf(t, "place", "-i", "any", `(bpf,"udp") > (pktcount)`)
	if r.code != 0 || !strings.Contains(r.stdout, "not in kernel: the any device is not an interface") {
		t.Errorf("place -i any: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	nsA, nsB, ifA, _ := netnsPair(t)
	const n = 50
	c := startCapture(t, nsB, "run", "-i", "any", "-c", fmt.Sprint(n), "--json", `(bpf,"udp") > (pktcount)`)
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	// Send until the run has seen its packets: it may not be capturing yet.
	for deadline := time.Now().Add(time.Minute); ; {
		if out, err := exec.Command("ip", "netns", "exec", nsA, ffpfBin, "gen", "-i", ifA, "--packets", "200").CombinedOutput(); err != nil {
			t.Fatalf("gen: %v: %s", err, out)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("run -i any: %v: %s", err, c.err.String())
			}
			doc := parseRun(t, cliResult{c.out.String(), c.err.String(), 0})
			if doc.Packets < n {
				t.Errorf("run -i any -c %d read %d packets", n, doc.Packets)
			}
			for _, f := range doc.Functions {
				if f.Flowspace != "user" {
					t.Errorf("%s runs in %s, want user", f.ID, f.Flowspace)
				}
				if f.Class == "pktcount" && f.In != n {
					t.Errorf("run -i any -c %d: pktcount counted %d UDP packets", n, f.In)
				}
			}
			return
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("run -i any -c %d did not end within a minute of traffic: %s", n, c.err.String())
		}
	}
}
