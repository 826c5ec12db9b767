package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Review tests for the eBPF flowspaces. Some of them fail on purpose: they
// describe bugs found in review (see the comment on each).

// reviewHier writes the user-only and tc-only hierarchies into dir.
func reviewHier(t *testing.T, dir string) (user, kernel string) {
	t.Helper()
	user, kernel = filepath.Join(dir, "user.yaml"), filepath.Join(dir, "kernel.yaml")
	os.WriteFile(user, []byte("children: []\n"), 0o644)
	os.WriteFile(kernel, []byte("children:\n  - kind: kernel\n"), 0o644)
	return user, kernel
}

// sendTrace transmits n frames of the review's trace from nsA on ifA.
func sendTrace(t *testing.T, nsA, ifA, sent string, n, seed int) {
	t.Helper()
	sendTracePaced(t, nsA, ifA, sent, n, seed, 0)
}

// sendTracePaced is sendTrace at pps packets per second (0: as fast as the
// interface takes them). A test that needs every packet to come up through
// a socket the kernel fills and a starved reader empties (AF_XDP, libpcap)
// paces its traffic, so that a loaded machine does not make it lose some.
func sendTracePaced(t *testing.T, nsA, ifA, sent string, n, seed, pps int) {
	t.Helper()
	args := []string{"netns", "exec", nsA, ffpfBin, "gen", "-i", ifA, "--packets", fmt.Sprint(n),
		"--seed", fmt.Sprint(seed), "--malformed", "0.05", "--vlan", "0.2", "-o", sent}
	if pps > 0 {
		args = append(args, "--pps", fmt.Sprint(pps))
	}
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("gen: %v: %s", err, out)
	}
}

// bridgeNums returns the sums of the bridges' in and dropped counters.
func bridgeNums(doc runJSON) (in, dropped uint64) {
	for _, b := range doc.Bridges {
		m, _ := b.(map[string]any)
		i, _ := m["in"].(float64)
		d, _ := m["dropped"].(float64)
		in += uint64(i)
		dropped += uint64(d)
	}
	return in, dropped
}

// TestFiltersAgreeWithLibpcap: 45 pcap-filter expressions (vlan,
// QinQ, ip6, fragments, less/greater, ether[], tcpflags, icmp6,
// portrange, loads past the end…) give libpcap's verdicts, packets and
// bytes, in XDP (against what was sent) and at tc (against what libpcap
// captured), on traffic with 5% malformed and 20% VLAN-tagged frames.
func TestFiltersAgreeWithLibpcap(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPair(t)
	dir := t.TempDir()
	_, kernel := reviewHier(t, dir)
	exprs := []string{
		"tcp", "udp", "icmp", "arp", "ip6", "ip", "vlan", "vlan and tcp", "vlan 100", "vlan and vlan",
		"not vlan and udp", "ip6 and tcp", "icmp6", "ip6 and udp and port 53", "ip[6:2] & 0x1fff != 0",
		"ip[6] & 0x20 != 0", "ip and not ip[6:2] & 0x3fff = 0", "less 64", "greater 1000", "len > 500 and len < 900",
		"ether[0] & 1 = 1", "ether[12:2] = 0x0800", "ether broadcast", "ether multicast", "tcp[tcpflags] & tcp-syn != 0",
		"tcp[tcpflags] & (tcp-syn|tcp-ack) = tcp-syn", "tcp[tcpflags] & tcp-fin != 0 or tcp[tcpflags] & tcp-rst != 0",
		"portrange 1000-2000", "tcp portrange 0-1023", "udp dst portrange 5000-6000", "src net 10.0.0.0/8",
		"dst net 192.168.0.0/16 or dst net 172.16.0.0/12", "tcp[13] = 2", "udp[8:4] = 0", "ip[0] & 0xf != 5",
		"ip[2:2] > 1000", "tcp and (tcp[12] >> 4) > 5", "ip proto 47 or ip proto 132", "icmp[icmptype] = icmp-echo",
		"ip6 and ip6[6] = 58", "ip6[40] = 128", "not ip and not ip6 and not arp", "vlan and ip6", "ether[100] = 0",
		"udp[100:4] = 0",
	}
	for g := 0; g < len(exprs); g += 15 {
		group := exprs[g:min(g+15, len(exprs))]
		var reqs []string
		for _, x := range group {
			reqs = append(reqs, "-e", `(bpf,"`+x+`") > (bytecount)`)
		}
		arrived, sent := filepath.Join(dir, fmt.Sprint("arrived", g, ".pcap")), filepath.Join(dir, fmt.Sprint("sent", g, ".pcap"))
		x := startCapture(t, nsB, append([]string{"run", "--json", "-i", ifB}, reqs...)...)
		k := startCapture(t, nsB, append([]string{"run", "--json", "-i", ifB, "--hierarchy", kernel, "-e", "(export,file=" + arrived + ")"}, reqs...)...)
		waitPrograms(t, 4) // each at its ingress and egress
		waitFile(t, arrived)
		// Paced: the oracle at tc is what the run's export received through
		// the ring buffer, and a burst on a loaded machine overflows it (the
		// bridge counts those as dropped, but the file then lacks them).
		sendTracePaced(t, nsA, ifA, sent, 20000, g+1, 20000)
		settle(t)
		awaitFile(t, arrived, selected(t, sent, stackTakes))
		for _, c := range []struct {
			doc           runJSON
			place, oracle string
		}{{x.stop(t), "xdp", sent}, {k.stop(t), "kernel", arrived}} {
			if _, dropped := bridgeNums(c.doc); dropped > 0 && c.place == "kernel" {
				t.Fatalf("the ring buffer dropped %d packets, so %s lacks them: the oracle is incomplete", dropped, arrived)
			}
			bpfs, bcs := c.doc.byClass("bpf"), c.doc.byClass("bytecount")
			for i, expr := range group {
				f, b := c.doc.Functions[bpfs[i]], c.doc.Functions[bcs[i]]
				if f.Params["expr"] != expr || !strings.HasPrefix(f.Flowspace, c.place) {
					t.Fatalf("bpf#%d is %v in %s", i+1, f.Params["expr"], f.Flowspace)
				}
				wp, wb := libpcapSelect(t, c.oracle, expr)
				if gb := stateNum(t, b.State["bytes"]); f.Out != wp || gb != wb {
					t.Errorf("%q in %s: %d packets, %d bytes; libpcap says %d, %d", expr, c.place, f.Out, gb, wp, wb)
				}
			}
		}
	}
	waitPrograms(t, 0)
}

// TestForksJoinsOverlays: in one eBPF program, a fork feeds two
// filters, a join of two filters counts each packet once, identical
// filters of two requests are shared, and userspace after XDP and tc gets
// libpcap's selection byte for byte; two tc programs in a row (the VLAN
// push and pop must leave the packet as it was) see the same.
func TestForksJoinsOverlays(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPair(t)
	dir := t.TempDir()
	_, kernel := reviewHier(t, dir)
	reqs := func(place string) []string {
		return []string{
			"-e", `[(bpf,"tcp") > (pktcount) | (bpf,"udp") > (bytecount)]`,
			"-e", `[(bpf,"tcp") | (bpf,"port 80")] > (pktcount)`,
			"-e", `[(bpf,"vlan") | (bpf,"vlan and udp")] > [(pktcount) | (export,file=` + filepath.Join(dir, place+".pcap") + `)]`,
		}
	}
	x := startCapture(t, nsB, append([]string{"run", "--json", "-i", ifB}, reqs("xdp")...)...)
	k1 := startCapture(t, nsB, append([]string{"run", "--json", "-i", ifB, "--hierarchy", kernel}, reqs("tc1")...)...)
	waitPrograms(t, 4) // each at its ingress and egress
	k2 := startCapture(t, nsB, append([]string{"run", "--json", "-i", ifB, "--hierarchy", kernel}, reqs("tc2")...)...)
	waitPrograms(t, 6)
	arrived := filepath.Join(dir, "arrived.pcap")
	u := startCapture(t, nsB, "run", "--json", "-i", ifB, "--hierarchy", filepath.Join(dir, "user.yaml"), "(export,file="+arrived+")")
	waitFile(t, arrived)
	for _, place := range []string{"xdp", "tc1", "tc2"} {
		waitFile(t, filepath.Join(dir, place+".pcap"))
	}
	sent := filepath.Join(dir, "sent.pcap")
	sendTrace(t, nsA, ifA, sent, 20000, 7)
	settle(t)
	awaitFile(t, arrived, selected(t, sent, stackTakes))
	awaitFile(t, filepath.Join(dir, "xdp.pcap"), selected(t, sent, "vlan"))
	for _, place := range []string{"tc1", "tc2"} {
		awaitFile(t, filepath.Join(dir, place+".pcap"), selected(t, arrived, "vlan"))
	}
	u.stop(t)
	for _, c := range []struct {
		c             *capture
		place, oracle string
	}{{x, "xdp", sent}, {k1, "tc1", arrived}, {k2, "tc2", arrived}} {
		doc := c.c.stop(t)
		pcs, bpfs := doc.byClass("pktcount"), doc.byClass("bpf")
		if len(bpfs) != 5 {
			t.Errorf("%s: %d bpf functions, want 5 (tcp shared)", c.place, len(bpfs))
		}
		for i, expr := range []string{"tcp", "tcp or port 80", "vlan"} {
			want, _ := libpcapSelect(t, c.oracle, expr)
			if got := stateNum(t, doc.Functions[pcs[i]].State["packets"]); got != want {
				t.Errorf("%s: pktcount after %q counts %d, libpcap says %d", c.place, expr, got, want)
			}
		}
		_, wb := libpcapSelect(t, c.oracle, "udp")
		if got := stateNum(t, doc.Functions[doc.byClass("bytecount")[0]].State["bytes"]); got != wb {
			t.Errorf("%s: %d udp bytes, libpcap says %d", c.place, got, wb)
		}
		a, _ := exec.Command("tcpdump", "-r", c.oracle, "-nn", "-x", "vlan").Output()
		b, _ := exec.Command("tcpdump", "-r", filepath.Join(dir, c.place+".pcap"), "-nn", "-x").Output()
		if strip(a) != strip(b) {
			t.Errorf("%s: the packets exported differ from libpcap's selection", c.place)
		}
	}
	waitPrograms(t, 0)
}

// TestRingOverflowIsCounted: packets the ring buffer has no room for (the
// reader is frozen with SIGSTOP while 20000 frames go by) are counted as
// the bridge's dropped: between the XDP filter and userspace nothing
// vanishes without a trace.
//
// With steal=true the packets go up through AF_XDP sockets instead: what
// the kernel could not put in a full socket is counted the same way.
func TestRingOverflowIsCounted(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPair(t)
	dir := t.TempDir()
	for i, steal := range []bool{false, true} {
		out := filepath.Join(dir, fmt.Sprint(i, ".pcap"))
		c := startCapture(t, nsB, "run", "--json", fmt.Sprintf(`(dev,%s,steal=%v) > (bpf,"ip or ip6 or arp or vlan or less 2000") > (export,file=%s)`,
			ifB, steal, out))
		waitPrograms(t, programsOf(steal))
		waitFile(t, out)
		c.cmd.Process.Signal(syscall.SIGSTOP)
		sendTrace(t, nsA, ifA, filepath.Join(dir, "sent.pcap"), 20000, 1)
		settle(t)
		c.cmd.Process.Signal(syscall.SIGCONT)
		// What the ring or socket held comes up; the rest was dropped.
		awaitFile(t, out, ^uint64(0))
		doc := c.stop(t)
		f, e := doc.Functions[doc.byClass("bpf")[0]], doc.Functions[doc.byClass("export")[0]]
		bin, bdropped := bridgeNums(doc)
		if f.Out != e.In+bdropped || bin != f.Out {
			t.Errorf("steal=%v: the XDP filter passed %d packets; userspace got %d, the bridge took in %d and counts %d dropped: %d lost silently",
				steal, f.Out, e.In, bin, bdropped, f.Out-e.In-bdropped)
		}
		if steal && bdropped == 0 {
			t.Errorf("steal=%v: 20,000 packets fit into the frozen AF_XDP socket's 4,096 frames", steal)
		}
		waitPrograms(t, 0)
	}
}

// TestStopUnderLoad: SIGINT while the ring buffer holds records (the
// reader was frozen): every packet the filter passed entered the bridge,
// and reached userspace or is counted as dropped there (in flight when
// the run stopped).
func TestStopUnderLoad(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPair(t)
	dir := t.TempDir()
	for i := range 3 {
		out := filepath.Join(dir, fmt.Sprint("o", i, ".pcap"))
		c := startCapture(t, nsB, "run", "--json", "-i", ifB, `(bpf,"ip or ip6 or arp or vlan or less 2000") > (export,file=`+out+`)`)
		waitPrograms(t, 2) // ingress and egress
		waitFile(t, out)
		// The export exists before the flowspaces are active: a probe
		// that comes up says the reader above the ring buffer runs (a
		// SIGINT before that is another test).
		sendTrace(t, nsA, ifA, filepath.Join(dir, fmt.Sprint("probe", i, ".pcap")), 10, 100+i)
		for deadline := time.Now().Add(time.Minute); pcapRecords(out) == 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("run %d: no probe came up", i)
			}
		}
		c.cmd.Process.Signal(syscall.SIGSTOP)
		sendTrace(t, nsA, ifA, filepath.Join(dir, "sent.pcap"), 5000, i+1) // fits in the 8 MB ring
		settle(t)
		c.cmd.Process.Signal(os.Interrupt)
		c.cmd.Process.Signal(syscall.SIGCONT)
		// Not c.stop: a second SIGINT ends ffpf at once.
		done := make(chan error, 1)
		go func() { done <- c.cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%v: %s", err, c.err.String())
			}
		case <-time.After(time.Minute):
			// A hang: its goroutines say where.
			c.cmd.Process.Signal(syscall.SIGQUIT)
			<-done
			t.Fatalf("run %d does not stop on SIGINT:\n%s", i, c.err.String())
		}
		doc := parseRun(t, cliResult{c.out.String(), c.err.String(), 0})
		f, e := doc.Functions[doc.byClass("bpf")[0]], doc.Functions[doc.byClass("export")[0]]
		bin, bdropped := bridgeNums(doc)
		if bin != f.Out || f.Out != e.In+bdropped {
			t.Errorf("run %d: the filter passed %d; the bridge took in %d, dropped %d; userspace got %d: %d lost silently",
				i, f.Out, bin, bdropped, e.In, f.Out-e.In-bdropped)
		}
		if bin == 0 || bin != e.In+bdropped {
			t.Errorf("run %d: the bridge took in %d, dropped %d, delivered %d", i, bin, bdropped, e.In)
		}
		waitPrograms(t, 0)
	}
}

// TestTooManyFunctions: one eBPF program holds at most 40 functions; the
// 41st is placed above, the plan says why, and the run works.
func TestTooManyFunctions(t *testing.T) {
	_, nsB, _, ifB := netnsPair(t)
	dir := t.TempDir()
	_, kernel := reviewHier(t, dir)
	var reqs []string
	for i := range 20 {
		reqs = append(reqs, "-e", fmt.Sprintf(`(bpf,"len > %d") > (pktcount)`, i+1))
	}
	for _, h := range [][]string{nil, {"--hierarchy", kernel}} {
		// --foreground: timeout signals ffpf alone, not its process group
		// as well (a second SIGINT would kill ffpf while it stops).
		args := append(append([]string{"netns", "exec", nsB, "timeout", "--foreground", "--preserve-status", "-s", "INT", "4", ffpfBin, "run", "--json", "-i", ifB}, h...), reqs...)
		out, err := exec.Command("ip", args...).Output()
		if err != nil {
			t.Fatalf("%v: %v: %s", h, err, out)
		}
		doc := parseRun(t, cliResult{string(out), "", 0})
		where := map[string]int{}
		for _, f := range doc.Functions {
			where[f.Flowspace]++
		}
		if where["user"] == 0 || len(doc.Functions) != 41 {
			t.Errorf("%v: 41 functions placed %v; some should have moved up to user", h, where)
		}
	}
	waitPrograms(t, 0)
}

// TestSnaplenVerdicts: with (dev,IF,snaplen=64) a filter that loads past
// byte 64 rejects every packet (libpcap's rule, DESIGN §5). An eBPF
// program sees whole packets, so such a filter stays in userspace, and
// every placement gives the same count.
func TestSnaplenVerdicts(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPair(t)
	dir := t.TempDir()
	user, kernel := reviewHier(t, dir)
	req := `(dev,` + ifB + `,snaplen=64) > (bpf,"ether[80] = 0 or ether[63] = 0") > (pktcount)`
	var caps []*capture
	// Each run also exports what its source captured (the same source:
	// the requests overlay), to know when it has caught up.
	var seen []string
	for i, h := range []string{user, kernel, ""} {
		args := []string{"run", "--json"}
		if h != "" {
			args = append(args, "--hierarchy", h)
		}
		seen = append(seen, filepath.Join(dir, fmt.Sprint("seen", i, ".pcap")))
		caps = append(caps, startCapture(t, nsB, append(args, "-e", req, "-e", `(dev,`+ifB+`,snaplen=64) > (export,file=`+seen[i]+`)`)...))
	}
	waitPrograms(t, 4) // each at its ingress and egress
	for _, f := range seen {
		waitFile(t, f) // and the libpcap capture open
	}
	sent := filepath.Join(dir, "sent.pcap")
	sendTrace(t, nsA, ifA, sent, 20000, 31)
	settle(t)
	stack, all := selected(t, sent, stackTakes), pcapRecords(sent)
	for i, f := range seen {
		awaitFile(t, f, []uint64{stack, stack, all}[i])
	}
	var got []string
	for _, c := range caps {
		doc := c.stop(t)
		f := doc.Functions[doc.byClass("pktcount")[0]]
		got = append(got, fmt.Sprintf("%s:%v", f.Flowspace, f.State["packets"]))
	}
	if a, b, c := strings.Split(got[0], ":")[1], strings.Split(got[1], ":")[1], strings.Split(got[2], ":")[1]; a != b || a != c {
		t.Errorf("the same graph counts differently by placement: %v", got)
	}
}
