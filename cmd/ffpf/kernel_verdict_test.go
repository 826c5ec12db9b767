package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket/pcapgo"
)

// Tests of the eBPF verdicts (drop, steal) and of the AF_XDP readers under
// stress. Each run sends a generated trace into a namespace and checks what
// reached the stack (a libpcap capture there, which in XDP sees only what
// the hook lets through) and what came up, against libpcap's selections of
// what was sent. They guard against bugs found before: a packet lost in
// the kernel counted once though several captures' streams had it
// (TestExportStress), a frame refilled while a batch still referred to it
// (the same test's byte comparison), zero-copy AF_XDP stalling with four
// captures (TestZeroCopyFourCaptures), AF_XDP ignoring the capture's
// snaplen (TestStealSnaplen). (A Connect on an active flowspace that could
// not reopen the sockets is tested through the embedding API, beside the
// flowspace: flowspaces/kernel TestAddRequestWhileStealing.)

// dumpPackets is the multiset of the packets of file that expr selects,
// as `tcpdump -S -x` prints them (bytes and decoding, without timestamps),
// sorted.
func dumpPackets(t *testing.T, file, expr string) []string {
	t.Helper()
	// -S: absolute sequence numbers, which do not depend on the packets
	// before (a selection that lost some decodes the same bytes alike).
	args := []string{"-r", file, "-nn", "-S", "-x"}
	if expr != "" {
		args = append(args, expr)
	}
	out, err := exec.Command("tcpdump", args...).Output()
	if err != nil {
		t.Fatalf("tcpdump %v: %v", args, err)
	}
	return sortedPackets(out)
}

// missingFrom reports how many packets of got (sorted) are not in want
// (sorted), counting repeats.
func missingFrom(got, want []string) int {
	missing, j := 0, 0
	for _, g := range got {
		for j < len(want) && want[j] < g {
			j++
		}
		if j < len(want) && want[j] == g {
			j++
			continue
		}
		missing++
	}
	return missing
}

// notIn returns the packets of want (sorted) not in got (sorted),
// counting repeats; at most 5.
func notIn(want, got []string) []string {
	var out []string
	j := 0
	for _, w := range want {
		for j < len(got) && got[j] < w {
			j++
		}
		if j < len(got) && got[j] == w {
			j++
			continue
		}
		if len(out) < 5 {
			out = append(out, w)
		}
	}
	return out
}

// countOf counts p in pkts.
func countOf(pkts []string, p string) int {
	n := 0
	for _, q := range pkts {
		if q == p {
			n++
		}
	}
	return n
}

// maxCapLen is the longest captured length in a pcap file.
func maxCapLen(t *testing.T, file string) (packets, maxCap int) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	for {
		_, ci, err := r.ReadPacketData()
		if err != nil {
			return packets, maxCap
		}
		packets++
		maxCap = max(maxCap, ci.CaptureLength)
	}
}

// stopWithin stops c with one SIGINT and fails unless it ends within d.
func (c *capture) stopWithin(t *testing.T, d time.Duration) runJSON {
	t.Helper()
	start := time.Now()
	c.cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%v: %v: %s", c.cmd.Args, err, c.err.String())
		}
	case <-time.After(d):
		c.cmd.Process.Kill()
		<-done
		t.Fatalf("%v did not stop within %v of SIGINT", c.cmd.Args, d)
	}
	if el := time.Since(start); el > d/2 {
		t.Logf("stopping took %v", el)
	}
	return parseRun(t, cliResult{c.out.String(), c.err.String(), 0})
}

// fnByExpr returns the function of doc with the class and, when expr is
// not empty, the bpf expression.
func fnByExpr(t *testing.T, doc runJSON, class, expr string) int {
	t.Helper()
	for _, i := range doc.byClass(class) {
		if expr == "" || doc.Functions[i].Params["expr"] == expr {
			return i
		}
	}
	t.Fatalf("no %s %q in the run", class, expr)
	return -1
}

// TestDropVerdictsXDP: drop=true in XDP with forks, joins, an
// exported intermediate function that also feeds XDP, an overlay with a
// request that observes, a source whose only consumer is in userspace,
// and drop with steal. What reaches the stack (libpcap on the interface,
// after XDP), what comes up, and the capture's discarded and stolen
// counts are checked against libpcap's selections of what was sent.
func TestDropVerdictsXDP(t *testing.T) {
	// Every frame, but those the stack cannot take.
	const stackAll = stackTakes

	nsA, nsB, ifA, ifB := netnsPair(t)
	dir := t.TempDir()
	user, _ := reviewHier(t, dir)
	type export struct{ file, expr string }
	for i, tc := range []struct {
		name    string
		reqs    []string // %[1]s: the interface, %[2]s: the directory
		arrive  string   // what must reach the stack ("" all)
		kept    string   // what is not discarded ("" all)
		stolen  string   // what is redirected to AF_XDP ("-" nothing)
		exports []export
		where   map[string]string // bpf expression -> flowspace prefix
	}{
		{
			name: "forks joins and an export",
			reqs: []string{
				`(dev,%[1]s,drop=true) > [(bpf,"tcp") > (bpf,"port 80") > (pktcount) | (bpf,"tcp") > (bpf,"port 22") > (pktcount)]`,
				`(dev,%[1]s,drop=true) > [(bpf,"arp") | (bpf,"icmp")] > (pktcount)`,
				`(dev,%[1]s,drop=true) > (bpf,"udp") > [(bpf,"port 53") > (pktcount) | (export,file=%[2]s/udp0.pcap)]`,
			},
			arrive:  "(tcp and (port 80 or port 22)) or arp or icmp or udp",
			kept:    "(tcp and (port 80 or port 22)) or arp or icmp or udp",
			stolen:  "-",
			exports: []export{{"udp0.pcap", "udp"}},
			where:   map[string]string{"port 53": "xdp:", "udp": "xdp:"},
		},
		{
			name: "overlay with an observer",
			reqs: []string{
				`(dev,%[1]s,drop=true) > (bpf,"tcp") > (pktcount)`,
				`(dev,%[1]s) > (bpf,"udp") > (pktcount)`,
			},
			arrive: stackAll,
			stolen: "-",
		},
		{
			name:   "only consumer in userspace",
			reqs:   []string{`(dev,%[1]s,drop=true) > (bpf,"ip protochain 17") > (pktcount)`},
			arrive: stackAll,
			stolen: "-",
			where:  map[string]string{"ip protochain 17": "user"},
		},
		{
			name: "drop and steal",
			reqs: []string{
				`(dev,%[1]s,drop=true,steal=true) > (bpf,"ip or ip6 or arp or vlan") > [(bpf,"udp") > (export,file=%[2]s/udp3.pcap) | (bpf,"tcp") > (pktcount)]`,
			},
			arrive:  "tcp",
			kept:    "tcp or udp",
			stolen:  "udp",
			exports: []export{{"udp3.pcap", "udp"}},
			where:   map[string]string{"udp": "xdp:", "tcp": "xdp:"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			arrived := filepath.Join(dir, fmt.Sprint("arrived", i, ".pcap"))
			args := []string{"run", "--json"}
			for _, r := range tc.reqs {
				args = append(args, "-e", fmt.Sprintf(r, ifB, dir))
			}
			x := startCapture(t, nsB, args...)
			waitPrograms(t, programsOf(strings.Contains(tc.reqs[0], "steal=true")))
			u := startCapture(t, nsB, "run", "--json", "--hierarchy", user, "-i", ifB, "(export,file="+arrived+")")
			waitFile(t, arrived)
			for _, e := range tc.exports {
				waitFile(t, filepath.Join(dir, e.file))
			}
			sent := filepath.Join(dir, fmt.Sprint("sent", i, ".pcap"))
			sendTrace(t, nsA, ifA, sent, 10000, 40+i)
			settle(t)
			awaitFile(t, arrived, selected(t, sent, tc.arrive))
			for _, e := range tc.exports {
				awaitFile(t, filepath.Join(dir, e.file), selected(t, sent, e.expr))
			}
			u.stop(t)
			doc := x.stop(t)
			waitPrograms(t, 0)

			total, _ := libpcapSelect(t, sent, "")
			wantArrive, _ := libpcapSelect(t, sent, tc.arrive)
			gotArrive, _ := libpcapSelect(t, arrived, "")
			if gotArrive != wantArrive {
				t.Errorf("%d packets reached the stack, want %d (%q of %d sent)", gotArrive, wantArrive, tc.arrive, total)
				a, b := dumpPackets(t, arrived, ""), dumpPackets(t, sent, tc.arrive)
				for _, p := range notIn(b, a) {
					t.Logf("did not reach the stack: %.400s", p)
				}
			} else if a, b := dumpPackets(t, arrived, ""), dumpPackets(t, sent, tc.arrive); !slices.Equal(a, b) {
				t.Errorf("the packets that reached the stack differ from libpcap's selection %q of what was sent", tc.arrive)
			}
			kept, _ := libpcapSelect(t, sent, tc.kept)
			var stolen uint64
			if tc.stolen != "-" {
				stolen, _ = libpcapSelect(t, sent, tc.stolen)
			}
			for _, d := range doc.byClass("dev") {
				f := doc.Functions[d]
				if !strings.HasPrefix(f.Flowspace, "xdp:") {
					t.Errorf("%s runs in %s", f.ID, f.Flowspace)
				}
				if f.Out != total {
					t.Errorf("%s saw %d packets, %d were sent", f.ID, f.Out, total)
				}
				if got := stateNum(t, f.State["discarded"]); got != total-kept {
					t.Errorf("%s: discarded %d, want %d (%d sent, %d kept)", f.ID, got, total-kept, total, kept)
				}
				if got := stateNum(t, f.State["stolen"]); got != stolen {
					t.Errorf("%s: stolen %d, want %d", f.ID, got, stolen)
				}
			}
			for expr, where := range tc.where {
				if f := doc.Functions[fnByExpr(t, doc, "bpf", expr)]; !strings.HasPrefix(f.Flowspace, where) {
					t.Errorf("bpf %q runs in %s, want %s", expr, f.Flowspace, where)
				}
			}
			for _, e := range tc.exports {
				got, want := dumpPackets(t, filepath.Join(dir, e.file), ""), dumpPackets(t, sent, e.expr)
				if !slices.Equal(got, want) {
					t.Errorf("%s holds %d packets, libpcap selects %d %q, or their bytes differ", e.file, len(got), len(want), e.expr)
				}
			}
			if bin, bdropped := bridgeNums(doc); bdropped != 0 {
				t.Logf("bridges: in %d, dropped %d", bin, bdropped)
			}
		})
	}
}

// TestDropVLANAtTC: at tc, with drop=true, a second tc program
// attached after the first sees only the packets the first kept, and
// those exactly as they arrived: the VLAN tag pushed back into the packet
// for the filters is taken out again. The capture's discarded counts the
// rest (libpcap's tap comes before tc and sees everything: the oracle).
func TestDropVLANAtTC(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPair(t)
	dir := t.TempDir()
	user, kernel := reviewHier(t, dir)
	const keep = "vlan or tcp port 80"
	k1 := startCapture(t, nsB, "run", "--json", "--hierarchy", kernel,
		fmt.Sprintf(`(dev,%s,drop=true) > (bpf,"%s") > (pktcount)`, ifB, keep))
	waitPrograms(t, 2) // ingress and egress
	after, arrived := filepath.Join(dir, "after.pcap"), filepath.Join(dir, "arrived.pcap")
	k2 := startCapture(t, nsB, "run", "--json", "--hierarchy", kernel, fmt.Sprintf(`(dev,%s) > (export,file=%s)`, ifB, after))
	waitPrograms(t, 4)
	u := startCapture(t, nsB, "run", "--json", "--hierarchy", user, "-i", ifB, "(export,file="+arrived+")")
	waitFile(t, after)
	waitFile(t, arrived)
	sent := filepath.Join(dir, "sent.pcap")
	sendTrace(t, nsA, ifA, sent, 20000, 51)
	settle(t)
	awaitFile(t, arrived, selected(t, sent, stackTakes))
	awaitFile(t, after, selected(t, sent, "("+stackTakes+") and ("+keep+")"))
	u.stop(t)
	d2 := k2.stop(t)
	d1 := k1.stop(t)
	waitPrograms(t, 0)
	total, _ := libpcapSelect(t, arrived, "")
	kept, _ := libpcapSelect(t, arrived, keep)
	dev := d1.Functions[d1.byClass("dev")[0]]
	if dev.Flowspace != "kernel" {
		t.Fatalf("the capture ran in %s", dev.Flowspace)
	}
	if got := stateNum(t, dev.State["discarded"]); got != total-kept {
		t.Errorf("discarded %d, want %d (%d arrived, %d kept)", got, total-kept, total, kept)
	}
	if got := d2.Functions[d2.byClass("dev")[0]].Out; got != kept {
		t.Errorf("the tc program after the dropping one saw %d packets, want the %d kept", got, kept)
	}
	got, want := dumpPackets(t, after, ""), dumpPackets(t, arrived, keep)
	if !slices.Equal(got, want) {
		t.Errorf("after the dropping program: %d packets, libpcap selects %d of what arrived, or their bytes differ (VLAN tag not restored?)", len(got), len(want))
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Logf("first difference:\n got %s\nwant %s", got[i], want[i])
				break
			}
		}
	}
	if n, _ := libpcapSelect(t, arrived, "vlan"); n == 0 {
		t.Error("no VLAN traffic in the trace")
	}
}

// TestExportStress: two captures on one interface whose selections
// overlap (with zero-copy AF_XDP, a frame is referred to by the regions of
// both), 4 queues, the reader frozen with SIGSTOP while traffic arrives,
// then more traffic; through the ring buffer, AF_XDP copy-once and
// AF_XDP zero-copy. Every exported packet must be one libpcap selects,
// byte for byte (a frame refilled while referred to would show as wrong
// bytes), the traffic after the freeze must come up, and every packet a
// filter passed must reach userspace or be counted as the bridge's
// dropped.
func TestExportStress(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPairQueues(t, 4)
	dir := t.TempDir()
	zc := filepath.Join(dir, "zc.yaml")
	os.WriteFile(zc, []byte("children:\n  - kind: kernel\n    bridge: zero-copy\n    children:\n"+
		"      - {kind: xdp, interface: "+ifB+", bridge: zero-copy}\n"), 0o644)
	for i, tc := range []struct {
		name  string
		args  []string
		steal bool
	}{
		{"ring buffer", nil, false},
		{"AF_XDP copy-once", nil, true},
		{"AF_XDP zero-copy", []string{"--hierarchy", zc}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ipf, udpf := filepath.Join(dir, fmt.Sprint("ip", i, ".pcap")), filepath.Join(dir, fmt.Sprint("udp", i, ".pcap"))
			c := startCapture(t, nsB, append(append([]string{"run", "--json"}, tc.args...), fmt.Sprintf(
				`[(dev,%[1]s,steal=%[4]v) > (bpf,"ip or ip6") > (export,file=%[2]s) | (dev,%[1]s,steal=%[4]v,snaplen=65535) > (bpf,"udp") > (export,file=%[3]s)]`,
				ifB, ipf, udpf, tc.steal))...)
			waitPrograms(t, programsOf(tc.steal))
			waitFile(t, udpf)
			waitFile(t, ipf)
			s1, s2 := filepath.Join(dir, fmt.Sprint("s1-", i, ".pcap")), filepath.Join(dir, fmt.Sprint("s2-", i, ".pcap"))
			c.cmd.Process.Signal(syscall.SIGSTOP)
			sendTrace(t, nsA, ifA, s1, 40000, 61) // more than the ring buffer holds
			settle(t)
			c.cmd.Process.Signal(syscall.SIGCONT)
			// The reader drains what the ring or sockets held.
			var ic, uc recordCounter
			await(t, ^uint64(0), 3*time.Second, func() uint64 { return ic.count(ipf) + uc.count(udpf) })
			n1, u1 := ic.count(ipf), uc.count(udpf)
			sendTrace(t, nsA, ifA, s2, 12000, 62)
			settle(t)
			awaitFile(t, ipf, n1+selected(t, s2, "ip or ip6"))
			awaitFile(t, udpf, u1+selected(t, s2, "udp"))
			doc := c.stopWithin(t, 30*time.Second)
			waitPrograms(t, 0)

			var passed, got uint64
			for _, x := range [][2]string{{"ip or ip6", ipf}, {"udp", udpf}} {
				f := doc.Functions[fnByExpr(t, doc, "bpf", x[0])]
				want1, _ := libpcapSelect(t, s1, x[0])
				want2, _ := libpcapSelect(t, s2, x[0])
				if f.Out != want1+want2 {
					t.Errorf("bpf %q passed %d, libpcap selects %d", x[0], f.Out, want1+want2)
				}
				exported, sel2 := dumpPackets(t, x[1], ""), dumpPackets(t, s2, x[0])
				all := append(dumpPackets(t, s1, x[0]), sel2...)
				slices.Sort(all)
				if bad := missingFrom(exported, all); bad > 0 {
					t.Errorf("%s: %d of %d exported packets are not among libpcap's selection %q of what was sent (wrong bytes)", x[1], bad, len(exported), x[0])
					for _, p := range notIn(exported, all) {
						t.Logf("not sent (exported %d times, sent %d times):\n%s", countOf(exported, p), countOf(all, p), p)
					}
				}
				// The second trace came while the reader was running: it
				// should come up (nearly) whole.
				if n2 := missingFrom(sel2, exported); n2 > int(want2/20) {
					t.Errorf("%s: %d of the %d packets of the unfrozen trace never came up", x[1], n2, want2)
				}
				passed += f.Out
				for _, e := range doc.byClass("export") {
					if doc.Functions[e].Params["file"] == x[1] {
						got += doc.Functions[e].In
						t.Logf("bpf %q passed %d, its export got %d: %d lost", x[0], f.Out, doc.Functions[e].In, f.Out-doc.Functions[e].In)
					}
				}
			}
			bin, bdropped := bridgeNums(doc)
			t.Logf("filters passed %d, userspace got %d, bridge in %d dropped %d", passed, got, bin, bdropped)
			if passed != got+bdropped || bin != passed {
				t.Errorf("the filters passed %d packets; userspace got %d, the bridge took in %d and dropped %d: %d unaccounted",
					passed, got, bin, bdropped, int64(passed)-int64(got+bdropped))
			}
			if bdropped == 0 {
				t.Error("nothing was lost while the reader was frozen: the test does not stress the reader")
			}
		})
	}
}

// TestZeroCopyFourCaptures: four captures on one interface over a
// zero-copy bridge (one of them exports). Each socket gets Depth regions
// per capture, 16 × 256 slots: as many as the UMEM's 4096 frames. Two
// bursts that fill whole batches (the reader was frozen) leave every
// frame referred to by a released region, which gives its frames back only
// when it is taken again — for a packet that can no longer arrive: the
// socket never receives again.
func TestZeroCopyFourCaptures(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPair(t)
	dir := t.TempDir()
	zc := filepath.Join(dir, "zc.yaml")
	os.WriteFile(zc, []byte("children:\n  - kind: kernel\n    bridge: zero-copy\n    children:\n"+
		"      - {kind: xdp, interface: "+ifB+", bridge: zero-copy}\n"), 0o644)
	for _, captures := range []int{1, 4} {
		t.Run(fmt.Sprint(captures, " captures"), func(t *testing.T) {
			out := filepath.Join(dir, fmt.Sprint("out", captures, ".pcap"))
			args := []string{"run", "--json", "--hierarchy", zc, "-e",
				fmt.Sprintf(`(dev,%s,steal=true) > (bpf,"ip or ip6 or arp or vlan or less 2000") > (export,file=%s)`, ifB, out)}
			for i := 1; i < captures; i++ {
				args = append(args, "-e", fmt.Sprintf(`(dev,%s,buffer=%dMB) > (pktcount)`, ifB, i))
			}
			c := startCapture(t, nsB, args...)
			waitPrograms(t, min(captures, 2)) // XDP, and tc egress for the counters' captures (both directions)
			waitFile(t, out)
			for b := range 2 {
				c.cmd.Process.Signal(syscall.SIGSTOP)
				sendTrace(t, nsA, ifA, filepath.Join(dir, fmt.Sprint("burst", b, ".pcap")), 6000, 70+b)
				settle(t)
				c.cmd.Process.Signal(syscall.SIGCONT)
				awaitFile(t, out, ^uint64(0)) // the reader drains the socket
			}
			before := pcapRecords(out)
			// Now a trace at the reader's pace.
			last := filepath.Join(dir, "last.pcap")
			if o, err := exec.Command("ip", "netns", "exec", nsA, ffpfBin, "gen", "-i", ifA, "--packets", "3000",
				"--pps", "30000", "--seed", "79", "-o", last).CombinedOutput(); err != nil {
				t.Fatalf("gen: %v: %s", err, o)
			}
			settle(t)
			awaitFile(t, out, before+selected(t, last, "ip or ip6 or arp or vlan or less 2000"))
			// An idle run should sleep in poll(2).
			stat := fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid)
			st0, _ := os.ReadFile(stat)
			time.Sleep(500 * time.Millisecond)
			st1, _ := os.ReadFile(stat)
			idleCPU := cpuTicks(st1) - cpuTicks(st0) // in 10 ms ticks
			doc := c.stopWithin(t, 30*time.Second)
			waitPrograms(t, 0)
			if idleCPU > 20 {
				t.Errorf("%d captures: the idle run used %d ms of CPU in 500 ms (the reader spins)", captures, idleCPU*10)
			}
			want := dumpPackets(t, last, "ip or ip6 or arp or vlan or less 2000")
			missing := missingFrom(want, dumpPackets(t, out, ""))
			e := doc.Functions[fnByExpr(t, doc, "export", "")]
			_, bdropped := bridgeNums(doc)
			t.Logf("%d captures: the export got %d packets; the bridge dropped %d; %d of the %d packets of the paced trace missing",
				captures, e.In, bdropped, missing, len(want))
			if missing > len(want)/20 {
				t.Errorf("%d captures: %d of the %d packets sent at 30 kpps after the bursts never came up (the socket stopped receiving)",
					captures, missing, len(want))
			}
		})
	}
}

// TestStealSnaplen: a capture's snaplen bounds the bytes of each
// packet that come up, through the ring buffer and through AF_XDP alike.
func TestStealSnaplen(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPair(t)
	dir := t.TempDir()
	for _, steal := range []bool{false, true} {
		out := filepath.Join(dir, fmt.Sprint("out", steal, ".pcap"))
		c := startCapture(t, nsB, "run", "--json", fmt.Sprintf(`(dev,%s,snaplen=128,steal=%v) > (export,file=%s)`, ifB, steal, out))
		waitPrograms(t, programsOf(steal))
		waitFile(t, out)
		sent := filepath.Join(dir, "sent.pcap")
		sendTrace(t, nsA, ifA, sent, 2000, 81)
		settle(t)
		awaitFile(t, out, pcapRecords(sent))
		c.stop(t)
		waitPrograms(t, 0)
		n, maxCap := maxCapLen(t, out)
		if n == 0 {
			t.Fatalf("steal=%v: nothing exported", steal)
		}
		if maxCap > 128 {
			t.Errorf("steal=%v: packets of up to %d bytes came up from a capture with snaplen=128", steal, maxCap)
		}
	}
}

// TestSIGINTUnderLoad4Queues: SIGINT while frames pour into 4
// queues (AF_XDP copy-once and zero-copy, and the ring buffer): the run
// stops within a few seconds, accounts for every packet, and leaves no
// program behind.
func TestSIGINTUnderLoad4Queues(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPairQueues(t, 4)
	dir := t.TempDir()
	zc := filepath.Join(dir, "zc.yaml")
	os.WriteFile(zc, []byte("children:\n  - kind: kernel\n    bridge: zero-copy\n    children:\n"+
		"      - {kind: xdp, interface: "+ifB+", bridge: zero-copy}\n"), 0o644)
	for _, tc := range []struct {
		name  string
		args  []string
		steal bool
	}{
		{"ring buffer", nil, false},
		{"AF_XDP copy-once", nil, true},
		{"AF_XDP zero-copy", []string{"--hierarchy", zc}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".pcap")
			args := append(append([]string{"run", "--json"}, tc.args...),
				fmt.Sprintf(`(dev,%s,steal=%v) > (bpf,"ip or ip6 or arp or vlan or less 2000") > (export,file=%s)`, ifB, tc.steal, out))
			c := startCapture(t, nsB, args...)
			waitPrograms(t, programsOf(tc.steal))
			waitFile(t, out)
			g := exec.Command("ip", "netns", "exec", nsA, ffpfBin, "gen", "-i", ifA, "--packets", "3000000", "--seed", "91")
			if err := g.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				g.Process.Kill()
				g.Wait()
			}()
			// SIGINT once packets are pouring in.
			for deadline := time.Now().Add(time.Minute); pcapRecords(out) < 1000 && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond)
			}
			doc := c.stopWithin(t, 30*time.Second)
			waitPrograms(t, 0)
			f, e := doc.Functions[fnByExpr(t, doc, "bpf", "")], doc.Functions[fnByExpr(t, doc, "export", "")]
			bin, bdropped := bridgeNums(doc)
			t.Logf("filter passed %d, export got %d, bridge in %d dropped %d", f.Out, e.In, bin, bdropped)
			if f.Out == 0 || f.Out != e.In+bdropped || bin != f.Out {
				t.Errorf("the filter passed %d; userspace got %d, the bridge took in %d and dropped %d: %d unaccounted",
					f.Out, e.In, bin, bdropped, int64(f.Out)-int64(e.In+bdropped))
			}
		})
	}
}

// TestPlaceDrop: a drop=true capture never goes to userspace: with
// only userspace, or only an XDP flowspace of another interface, placement
// fails with the reason (exit 2); with the tc hook it goes there.
func TestPlaceDrop(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the kernel flowspaces need root")
	}
	dir := t.TempDir()
	user, kernel := reviewHier(t, dir)
	uxdp := filepath.Join(dir, "uxdp.yaml")
	os.WriteFile(uxdp, []byte("children:\n  - {kind: xdp, interface: lo}\n"), 0o644)
	for _, h := range []string{user, uxdp} {
		r := ffpf(t, "place", "--hierarchy", h, "(dev,ffpfnone0,drop=true) > (pktcount)")
		if r.code != 2 || !strings.Contains(r.stderr, "drop=true drops packets at an eBPF hook") {
			t.Errorf("%s: exit %d: %s", filepath.Base(h), r.code, r.stderr)
		}
	}
	r := ffpf(t, "place", "--hierarchy", kernel, "(dev,lo,drop=true) > (bpf,\"tcp\") > (pktcount)")
	if r.code != 0 {
		t.Fatalf("kernel: exit %d: %s", r.code, r.stderr)
	}
	// Every function sits in the kernel flowspace (path 0x0fffffff).
	placed := 0
	for _, l := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(l); len(f) >= 2 && strings.HasSuffix(f[0], "#1") {
			placed++
			if f[1] != "0x0fffffff" {
				t.Errorf("kernel: %s", l)
			}
		}
	}
	if placed != 3 {
		t.Errorf("kernel: %d functions placed:\n%s", placed, r.stdout)
	}
}

// programsOf is how many eBPF programs one capture on the test's interface
// attaches: one at XDP for a capture that steals (it captures received
// packets only), else one at the ingress and one at tc egress.
func programsOf(steal bool) int {
	if steal {
		return 1
	}
	return 2
}
