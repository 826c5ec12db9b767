package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"

	"github.com/ffpf-go/ffpf/internal/netnstest"
)

// These tests check what a tcpdump user expects of live captures: both
// directions by default and -Q, several captures on one interface, and
// nothing left on the interface afterwards.

// addressPair gives the two ends of the test's pair IPv4 addresses and
// static neighbour entries, so that pings cross it with no ARP: exactly
// the echo requests and replies.
func addressPair(t *testing.T, nsA, nsB, ifA, ifB string) (ipA, ipB string) {
	t.Helper()
	ipA, ipB = "10.99.0.1", "10.99.0.2"
	mac := func(ns, ifname string) (hw string) {
		netnstest.In(t, ns, func() {
			ifc, err := net.InterfaceByName(ifname)
			if err != nil {
				t.Fatal(err)
			}
			hw = ifc.HardwareAddr.String()
		})
		return hw
	}
	macA, macB := mac(nsA, ifA), mac(nsB, ifB)
	for _, c := range [][]string{
		{"-n", nsA, "addr", "add", ipA + "/24", "dev", ifA},
		{"-n", nsB, "addr", "add", ipB + "/24", "dev", ifB},
		{"-n", nsA, "neigh", "replace", ipB, "lladdr", macB, "dev", ifA, "nud", "permanent"},
		{"-n", nsB, "neigh", "replace", ipA, "lladdr", macA, "dev", ifB, "nud", "permanent"},
	} {
		if out, err := exec.Command("ip", c...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(c, " "), err, out)
		}
	}
	return ipA, ipB
}

// ping sends n ICMP echo requests from namespace ns to dst, each after the
// reply to the one before, and fails the test if a reply does not come.
func ping(t *testing.T, ns, dst string, n int) {
	t.Helper()
	netnstest.In(t, ns, func() {
		c, err := icmp.ListenPacket("ip4:icmp", "0.0.0.0")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		to := &net.IPAddr{IP: net.ParseIP(dst)}
		for seq := 1; seq <= n; seq++ {
			m := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: os.Getpid() & 0xffff, Seq: seq, Data: []byte("ffpf direction")}}
			b, err := m.Marshal(nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.WriteTo(b, to); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 1500)
			for {
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				k, _, err := c.ReadFrom(buf)
				if err != nil {
					t.Fatalf("no reply to ping %d: %v", seq, err)
				}
				r, err := icmp.ParseMessage(1, buf[:k])
				if e, ok := r.Body.(*icmp.Echo); err == nil && r.Type == ipv4.ICMPTypeEchoReply && ok && e.Seq == seq {
					break
				}
			}
		}
	})
}

// bgRun is an ffpf run in a namespace, stopped by SIGINT.
type bgRun struct {
	cmd      *exec.Cmd
	out, err bytes.Buffer
	exited   chan struct{}
	waitErr  error
}

// startRun starts ffpf with args (after ip netns exec ns env: environment
// variables first, then ffpf's path and arguments) and waits until it has
// created out, its -w file (its sources capture); a run that ends before
// fails the test with its message.
func startRun(t *testing.T, ns, out string, args ...string) *bgRun {
	t.Helper()
	r := launchRun(t, ns, args...)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(out); err == nil {
			return r
		}
		select {
		case <-r.exited:
			t.Fatalf("%v ended: %s", args, r.err.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v: %s was not created", args, out)
		}
	}
}

// launchRun starts ffpf as startRun does, without waiting.
func launchRun(t *testing.T, ns string, args ...string) *bgRun {
	t.Helper()
	r := &bgRun{cmd: exec.Command("ip", append([]string{"netns", "exec", ns, "env"}, args...)...), exited: make(chan struct{})}
	r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.err
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.waitErr = r.cmd.Wait(); close(r.exited) }()
	t.Cleanup(func() {
		r.cmd.Process.Kill()
		<-r.exited
	})
	return r
}

// waitAttached waits until the test's interface holds want eBPF programs,
// while every run is running: one that ended fails the test with its
// message (a run that cannot attach ends after creating its -w file).
func waitAttached(t *testing.T, runs []*bgRun, want int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ffpfPrograms(t) != want; time.Sleep(10 * time.Millisecond) {
		for _, r := range runs {
			select {
			case <-r.exited:
				t.Fatalf("%v ended: %s", r.cmd.Args, r.err.String())
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d eBPF programs attached to the test's interface, want %d", ffpfPrograms(t), want)
		}
	}
}

// stop ends the run with SIGINT and returns its --json result.
func (r *bgRun) stop(t *testing.T) runJSON {
	t.Helper()
	r.cmd.Process.Signal(os.Interrupt)
	select {
	case <-r.exited:
	case <-time.After(time.Minute):
		t.Fatalf("%v does not stop on SIGINT", r.cmd.Args)
	}
	if r.waitErr != nil {
		t.Fatalf("%v: %v: %s", r.cmd.Args, r.waitErr, r.err.String())
	}
	return parseRun(t, cliResult{r.out.String(), r.err.String(), 0})
}

// tcpdumpRun is a tcpdump writing what it captures to a file.
type tcpdumpRun struct {
	cmd  *exec.Cmd
	file string
}

// startTcpdump starts tcpdump -Q dir on ifname in ns and waits until it
// captures.
func startTcpdump(t *testing.T, ns, ifname, dir, file string) *tcpdumpRun {
	t.Helper()
	d := &tcpdumpRun{file: file}
	d.cmd = exec.Command("ip", "netns", "exec", ns, "tcpdump", "-n", "-U", "-Q", dir, "-i", ifname, "-w", file)
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			d.cmd.Process.Kill()
			d.cmd.Wait()
		}
	})
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "listening on") {
			go func() {
				for sc.Scan() {
				}
			}()
			return d
		}
	}
	t.Fatalf("tcpdump -Q %s did not start", dir)
	return nil
}

// stop ends tcpdump and returns the packets it captured.
func (d *tcpdumpRun) stop(t *testing.T) uint64 {
	t.Helper()
	d.cmd.Process.Signal(os.Interrupt)
	d.cmd.Wait()
	return pcapRecords(d.file)
}

// TestDirectionAsTcpdump: a live capture sees the packets the interface
// receives and those it sends, as tcpdump does, and -Q in|out|inout
// chooses, in every placement: XDP (with tc egress for sent packets), tc
// (TCX), tc through clsact filters, and libpcap in userspace. libpcap's
// inbound and outbound agree with the direction. Each run's counts must
// equal those of tcpdump -Q on the same pings.
func TestDirectionAsTcpdump(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPair(t)
	_, ipB := addressPair(t, nsA, nsB, ifA, ifB)
	dir := t.TempDir()
	userH, kernelH := reviewHier(t, dir)
	dirs := []string{"inout", "in", "out"}
	dumps := map[string]*tcpdumpRun{}
	for _, q := range dirs {
		dumps[q] = startTcpdump(t, nsB, ifB, q, filepath.Join(dir, "tcpdump-"+q+".pcap"))
	}
	type run struct {
		place, q string
		c        *bgRun
		out      string
	}
	var runs []*run
	for _, place := range []string{"default", "kernel", "clsact", "user"} {
		for _, q := range dirs {
			r := &run{place: place, q: q, out: filepath.Join(dir, place+"-"+q+".pcap")}
			args := []string{ffpfBin, "run", "--json", "-i", ifB, "-w", r.out, "-e", "all:(pktcount)"}
			if q != "inout" {
				args = append(args, "-Q", q)
			}
			if !(place == "user" && q == "inout") {
				args = append(args, "-e", `(bpf,"inbound") > in:(pktcount)`, "-e", `(bpf,"outbound") > out:(pktcount)`)
			}
			switch place {
			case "kernel":
				args = append(args, "--hierarchy", kernelH)
			case "clsact":
				args = append([]string{"FFPF_NO_TCX=1"}, append(args, "--hierarchy", kernelH)...)
			case "user":
				args = append(args, "--hierarchy", userH)
			}
			// One at a time: the first takes the XDP hook, the others of
			// the default hierarchy find it taken.
			r.c = startRun(t, nsB, r.out, args...)
			runs = append(runs, r)
		}
	}
	// Two programs for -Q inout (received and sent packets: XDP or tc
	// ingress, and tc egress), one for -Q in and one for -Q out, in three
	// placements of eBPF (XDP, TCX, clsact).
	var all []*bgRun
	for _, r := range runs {
		all = append(all, r.c)
	}
	waitAttached(t, all, 3*(2+1+1))
	ping(t, nsA, ipB, 3)
	settle(t)
	for _, r := range runs {
		await(t, ^uint64(0), 2*time.Second, func() uint64 { return pcapRecords(r.out) })
	}
	want := map[string]uint64{}
	for _, q := range dirs {
		want[q] = dumps[q].stop(t)
	}
	if want["in"] != 3 || want["out"] != 3 || want["inout"] != 6 {
		t.Fatalf("tcpdump saw %v packets (in, out, inout), want 3, 3, 6", want)
	}
	for _, r := range runs {
		doc := r.c.stop(t)
		counts := map[string]uint64{}
		for _, i := range doc.byClass("pktcount") {
			counts[doc.Functions[i].Label] = stateNum(t, doc.Functions[i].State["packets"])
		}
		dev := doc.Functions[doc.byClass("dev")[0]]
		name := fmt.Sprintf("%s -Q %s (dev in %s)", r.place, r.q, dev.Flowspace)
		if counts["all"] != want[r.q] {
			t.Errorf("%s: %d packets, tcpdump -Q %s %d", name, counts["all"], r.q, want[r.q])
		}
		if r.place == "user" && r.q == "inout" {
			continue
		}
		wantIn, wantOut := want["in"], want["out"]
		if r.q == "out" {
			wantIn = 0
		}
		if r.q == "in" {
			wantOut = 0
		}
		if counts["in"] != wantIn || counts["out"] != wantOut {
			t.Errorf("%s: inbound %d, outbound %d; want %d, %d", name, counts["in"], counts["out"], wantIn, wantOut)
		}
		wantFS := map[string]string{"kernel": "kernel", "clsact": "kernel", "user": "user"}[r.place]
		if r.place == "default" {
			// The first run (-Q inout) holds the XDP hook: the run -Q in
			// finds it taken; sent packets need none (tc egress).
			wantFS = "xdp:" + ifB
			if r.q == "in" {
				wantFS = "kernel"
			}
		}
		if dev.Flowspace != wantFS {
			t.Errorf("%s: the capture runs in %s, want %s", name, dev.Flowspace, wantFS)
		}
	}
	waitPrograms(t, 0)
}

// TestInboundNeedsADirectionInUserspace: a userspace filter cannot tell
// the direction of packets of a capture of both directions; it says so
// rather than count wrong.
func TestInboundNeedsADirectionInUserspace(t *testing.T) {
	_, nsB, _, ifB := netnsPair(t)
	userH, _ := reviewHier(t, t.TempDir())
	out, err := exec.Command("ip", "netns", "exec", nsB, "timeout", "60", ffpfBin, "run", "--hierarchy", userH, "-i", ifB, `(bpf,"inbound") > (pktcount)`).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "inbound and outbound need each packet's direction") {
		t.Fatalf("inbound on both directions in userspace: %v: %s", err, out)
	}
	if out, err := exec.Command("ip", "netns", "exec", nsB, ffpfBin, "check", "-Q", "sideways", "-i", ifB, "(pktcount)").CombinedOutput(); err == nil ||
		!strings.Contains(string(out), `direction "sideways" is not in, out or inout`) {
		t.Fatalf("-Q sideways: %v: %s", err, out)
	}
}

// TestRunsShareAnInterface: several runs capture on one interface at once,
// as tcpdumps do. The first takes the XDP hook; the next find it taken and
// capture at tc (TCX), another through clsact filters; each counts every
// frame sent.
func TestRunsShareAnInterface(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPair(t)
	dir := t.TempDir()
	_, kernelH := reviewHier(t, dir)
	sent := filepath.Join(dir, "sent.pcap")
	var runs []*bgRun
	for i, env := range []string{"", "", "FFPF_NO_TCX=1"} {
		out := filepath.Join(dir, fmt.Sprintf("run%d.pcap", i))
		args := []string{ffpfBin, "run", "--json", "-i", ifB, "-w", out, "(pktcount)"}
		if env != "" {
			args = append([]string{env}, append(args, "--hierarchy", kernelH)...)
		}
		runs = append(runs, startRun(t, nsB, out, args...))
	}
	waitAttached(t, runs, 2*3) // each at its ingress (XDP, TCX, clsact) and tc egress
	sendTracePaced(t, nsA, ifA, sent, 3000, 11, 20000)
	want := pcapRecords(sent)
	settle(t)
	for i := range runs {
		awaitFile(t, filepath.Join(dir, fmt.Sprintf("run%d.pcap", i)), want)
	}
	for i, c := range runs {
		doc := c.stop(t)
		pc := doc.Functions[doc.byClass("pktcount")[0]]
		wantFS := []string{"xdp:" + ifB, "kernel", "kernel"}[i]
		if got := stateNum(t, pc.State["packets"]); got != want || pc.Flowspace != wantFS {
			t.Errorf("run %d: %d packets in %s; %d sent, want it in %s", i, got, pc.Flowspace, want, wantFS)
		}
	}
	waitPrograms(t, 0)
}

// TestCapturesStartedTogether: captures started at the same moment on one
// interface all capture, as tcpdumps do. Each finds the XDP hook free at
// placement; the first to instantiate takes it, and the others, finding it
// taken since, are placed again at tc by themselves and say so as when the
// hook was taken beforehand. Each then counts its -c packets. One of two
// used to fail in most tries.
func TestCapturesStartedTogether(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPair(t)
	dir := t.TempDir()
	const runs, rounds = 3, 4
	filters := []string{"udp or tcp", "ip or ip6", "tcp"}
	for round := range rounds {
		var rs []*bgRun
		for i := range runs {
			rs = append(rs, launchRun(t, nsB, ffpfBin, "run", "-i", ifB, "-Q", "in",
				"-c", fmt.Sprint(40+10*i), `(bpf,"`+filters[i]+`") > (pktcount)`))
		}
		waitAttached(t, rs, runs) // one XDP, the others TCX
		sendTracePaced(t, nsA, ifA, filepath.Join(dir, fmt.Sprint("sent", round, ".pcap")), 300, round+1, 20000)
		xdp := 0
		for i, r := range rs {
			select {
			case <-r.exited:
			case <-time.After(time.Minute):
				t.Fatalf("round %d: run %d did not end by itself: %s", round, i, r.err.String())
			}
			if r.waitErr != nil {
				t.Fatalf("round %d: run %d: %v: %s", round, i, r.waitErr, r.err.String())
			}
			// The result says where it was attached, and why.
			text := r.out.String()
			var where, count string
			for _, line := range strings.Split(text, "\n") {
				if f := strings.Fields(line); len(f) == 7 && f[0] == "pktcount#1" {
					where, count = f[1], f[6]
				}
			}
			if want := fmt.Sprint("packets=", 40+10*i); count != want {
				t.Errorf("round %d: run %d counted %q, want %s: %s", round, i, count, want, text)
			}
			switch where {
			case "xdp:" + ifB:
				xdp++
			case "kernel":
				if !strings.Contains(text, "its XDP hook is taken by program") || !strings.Contains(text, ifB+": tc ingress") {
					t.Errorf("round %d: run %d at tc does not say why: %s", round, i, text)
				}
			default:
				t.Errorf("round %d: run %d placed in %q: %s", round, i, where, text)
			}
		}
		if xdp != 1 {
			t.Errorf("round %d: %d runs captured at XDP, want 1", round, xdp)
		}
		waitPrograms(t, 0)
	}
}

// stablePrograms waits until eBPF programs are attached to the test's
// interface and their number has not changed for 100 ms, and returns it.
func stablePrograms(t *testing.T) int {
	t.Helper()
	last := ffpfPrograms(t)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		n := ffpfPrograms(t)
		if n > 0 && n == last {
			return n
		}
		last = n
	}
	t.Fatal("no eBPF program was attached to the test's interface")
	return 0
}

// clsact reports whether the test's interface has a clsact qdisc.
func clsact(t *testing.T) bool {
	t.Helper()
	ns, ifname := testIface(t)
	out, err := exec.Command("tc", "-n", ns, "qdisc", "show", "dev", ifname).CombinedOutput()
	if err != nil {
		t.Fatalf("tc qdisc show: %v: %s", err, out)
	}
	return strings.Contains(string(out), "clsact")
}

// TestClsactQdiscRemoved: where the kernel has no TCX (forced with
// FFPF_NO_TCX), a run adds a clsact qdisc for its filters and removes it
// at the end when it is the only user; a qdisc that was there before, or
// that another run's filters use, stays.
func TestClsactQdiscRemoved(t *testing.T) {
	_, nsB, _, ifB := netnsPair(t)
	dir := t.TempDir()
	_, kernelH := reviewHier(t, dir)
	start := func(name string) *bgRun {
		out := filepath.Join(dir, name+".pcap")
		return startRun(t, nsB, out, "FFPF_NO_TCX=1", ffpfBin, "run", "--json", "--hierarchy", kernelH, "-i", ifB, "-w", out, "(pktcount)")
	}

	// Alone: the qdisc goes with the run.
	a := start("alone")
	one := stablePrograms(t)
	if !clsact(t) {
		t.Fatal("no clsact qdisc while the run captures")
	}
	a.stop(t)
	waitPrograms(t, 0)
	if clsact(t) {
		t.Error("a clsact qdisc stays after the run that added it")
	}

	// Another run still uses it: it stays, and that run's filters with it.
	a, b := start("first"), start("second")
	waitPrograms(t, 2*one)
	a.stop(t)
	waitPrograms(t, one)
	if !clsact(t) {
		t.Error("the clsact qdisc went while another run's filters were on it")
	}
	b.stop(t)
	waitPrograms(t, 0)
	exec.Command("tc", "-n", nsB, "qdisc", "del", "dev", ifB, "clsact").Run()

	// There before: it stays.
	if out, err := exec.Command("tc", "-n", nsB, "qdisc", "add", "dev", ifB, "clsact").CombinedOutput(); err != nil {
		t.Fatalf("tc qdisc add: %v: %s", err, out)
	}
	// SIGINT once it runs: its programs are attached, which Activate does
	// after set-up (a signal during set-up ends ffpf as killed by it).
	before := start("before")
	waitAttached(t, []*bgRun{before}, one)
	before.stop(t)
	waitPrograms(t, 0)
	if !clsact(t) {
		t.Error("the run removed a clsact qdisc it did not add")
	}
}
