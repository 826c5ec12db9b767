package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// checkAccounting: every function and bridge of a run keeps
// in = out + filtered + dropped.
func checkAccounting(t *testing.T, doc runJSON) {
	t.Helper()
	for _, f := range doc.Functions {
		if f.In != f.Out+f.Filtered+f.Dropped {
			t.Errorf("%s in %s: in %d != out %d + filtered %d + dropped %d", f.ID, f.Flowspace, f.In, f.Out, f.Filtered, f.Dropped)
		}
	}
	for _, b := range doc.Bridges {
		m, _ := b.(map[string]any)
		in, out, dropped := stateNum(t, m["in"]), stateNum(t, m["out"]), stateNum(t, m["dropped"])
		if in != out+dropped {
			t.Errorf("bridge %v: in %d != out %d + dropped %d", m, in, out, dropped)
		}
	}
}

// TestWindowsEndAboveAKernelFilter: an XDP filter drops every packet that
// arrives, so none goes up; the windows of a counter in userspace still
// end while the traffic flows (the ring buffer carries the clock without
// packets), each reporting no packet, and the accounting holds: clock
// messages are not packets.
func TestWindowsEndAboveAKernelFilter(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPair(t)
	out := filepath.Join(t.TempDir(), "w.jsonl")
	c := startCapture(t, nsB, "run", "--json", "-i", ifB,
		`(bpf,"ether proto 0x88b5") > (match,"pkt.len > 0") > (counter,window=100ms,report=1) > (export,format=jsonl,file=`+out+`)`)
	waitPrograms(t, 2)
	waitFile(t, out)
	if o, err := exec.Command("ip", "netns", "exec", nsA, ffpfBin, "gen", "-i", ifA, "--packets", "3000", "--pps", "3000").CombinedOutput(); err != nil {
		t.Fatalf("gen: %v: %s", err, o)
	}
	// The run goes on: the windows that ended are in the file already.
	lines := func() int {
		b, _ := os.ReadFile(out)
		return bytes.Count(b, []byte("\n"))
	}
	for deadline := time.Now().Add(time.Minute); lines() < 5; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d window records while the run goes on, want at least 5 (a second of traffic, windows of 100 ms)", lines())
		}
	}
	doc := c.stop(t)
	f := doc.Functions[doc.byClass("bpf")[0]]
	k := doc.Functions[doc.byClass("counter")[0]]
	if !strings.HasPrefix(f.Flowspace, "xdp:") || k.Flowspace != "user" {
		t.Fatalf("bpf ran in %s, counter in %s; want xdp and user", f.Flowspace, k.Flowspace)
	}
	if f.In < 2900 || f.Filtered != f.In || k.In != 0 {
		t.Errorf("bpf: in %d, filtered %d; counter in %d: want about 3000 filtered and none above", f.In, f.Filtered, k.In)
	}
	checkAccounting(t, doc)
	b, _ := os.ReadFile(out)
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if !strings.Contains(l, `"packets":0`) {
			t.Errorf("a window with packets: %s", l)
		}
	}
}

// TestTimestampInXDPReadAbove: timestamp runs in XDP after the filter;
// in userspace its word equals the packet's timestamp there (the same time
// base, carried in the ring buffer's record) and the wall clock a
// userspace timestamp reads, within a tolerance.
func TestTimestampInXDPReadAbove(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPair(t)
	sent := filepath.Join(t.TempDir(), "sent.pcap")
	c := startCapture(t, nsB, "run", "--json", "-i", ifB,
		`(bpf,"udp and not vlan") > t:(timestamp) > (match,"t.ts == pkt.ts") > w:(timestamp,clock=wall) > (match,"w.ts - t.ts > -1s and w.ts - t.ts < 10s") > (pktcount)`)
	waitPrograms(t, 2)
	if o, err := exec.Command("ip", "netns", "exec", nsA, ffpfBin, "gen", "-i", ifA, "--packets", "5000", "-o", sent).CombinedOutput(); err != nil {
		t.Fatalf("gen: %v: %s", err, o)
	}
	settle(t)
	time.Sleep(500 * time.Millisecond) // the last batch goes up after inproc.FlushAfter
	doc := c.stop(t)
	want, _ := libpcapSelect(t, sent, "udp and not vlan")
	ts := doc.Functions[doc.byClass("timestamp")[0]]
	if ts.Label != "t" {
		ts = doc.Functions[doc.byClass("timestamp")[1]]
	}
	if !strings.HasPrefix(ts.Flowspace, "xdp:") || ts.In != want {
		t.Fatalf("t:timestamp ran in %s on %d packets; want XDP, on libpcap's %d", ts.Flowspace, ts.In, want)
	}
	for _, i := range doc.byClass("match") {
		m := doc.Functions[i]
		if m.Flowspace != "user" || m.In != want || m.Filtered != 0 {
			t.Errorf("%s %v in %s: in %d, filtered %d; want userspace, %d in, none filtered", m.ID, m.Params, m.Flowspace, m.In, m.Filtered, want)
		}
	}
	if n := stateNum(t, doc.Functions[doc.byClass("pktcount")[0]].State["packets"]); n != want {
		t.Errorf("pktcount %d, want %d", n, want)
	}
	checkAccounting(t, doc)
}

// TestTimestampThroughAFXDP: a capture that steals sends its packets up
// through AF_XDP; the annotation word of timestamp in XDP comes with each
// frame in its XDP metadata, a little before the time the socket's reader
// gives the packet.
func TestTimestampThroughAFXDP(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPair(t)
	sent := filepath.Join(t.TempDir(), "sent.pcap")
	c := startCapture(t, nsB, "run", "--json",
		`(dev,expr=`+ifB+`,steal=true) > (bpf,"udp and not vlan") > t:(timestamp) > (match,"pkt.ts - t.ts > -1s and pkt.ts - t.ts < 10s") > (pktcount)`)
	waitPrograms(t, 1) // at XDP only
	if o, err := exec.Command("ip", "netns", "exec", nsA, ffpfBin, "gen", "-i", ifA, "--packets", "5000", "-o", sent).CombinedOutput(); err != nil {
		t.Fatalf("gen: %v: %s", err, o)
	}
	settle(t)
	time.Sleep(500 * time.Millisecond)
	doc := c.stop(t)
	want, _ := libpcapSelect(t, sent, "udp and not vlan and len <= 1792")
	m := doc.Functions[doc.byClass("match")[0]]
	if ts := doc.Functions[doc.byClass("timestamp")[0]]; !strings.HasPrefix(ts.Flowspace, "xdp:") {
		t.Fatalf("timestamp ran in %s, want XDP", ts.Flowspace)
	}
	if m.In != want || m.Filtered != 0 {
		t.Errorf("match: in %d, filtered %d; want %d (libpcap's), none filtered", m.In, m.Filtered, want)
	}
	checkAccounting(t, doc)
}
