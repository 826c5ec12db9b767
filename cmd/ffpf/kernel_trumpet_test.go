package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// trumpetLiveEvents read only what phase 1 in eBPF summarises: count(),
// and aggregates of volume, ttl and ecn, over one and two epochs.
var trumpetLiveEvents = []string{
	"heavy: *; sum(volume) > 500; 5-tuple; 500ms",
	"ttl: *; max(ttl) > 0 and avg(ttl) > 10; dstip/16,proto; 500ms",
	"cnt: proto=udp; count() >= 2; srcip/24; 1s",
	"vol: *; stddev(volume) >= 0 and min(volume) >= 0 and max(volume) > 0; proto; 1s",
	"ecn: *; sum(ecn) >= 0 and avg(ecn) >= 0; srcip/8; 500ms",
}

// TestTrumpetInEBPF: trumpet with summarisable events placed in XDP and
// at tc, on live traffic sent in bursts early in aligned seconds (epoch
// 500ms), reports the records that `ffpf run -r` of the sent frames
// reports, line for line (the lines of an interval sorted: their order is
// the flow table's memory order, which in userspace depends on the sweep's
// slices), and drops no packet for a flow map not ready. The captures are
// stopped right after the last burst, before its intervals end: as the
// file run reports its last intervals at the end of the file, the
// captures drain and report theirs when they stop.
func TestTrumpetInEBPF(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPair(t)
	dir := t.TempDir()
	_, kernel := reviewHier(t, dir)
	events := filepath.Join(dir, "events")
	if err := os.WriteFile(events, []byte(strings.Join(trumpetLiveEvents, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	expr := func(out string) string {
		return fmt.Sprintf(`(trumpet,events=%s,epoch=500ms) > (export,format=jsonl,file=%s)`, events, out)
	}
	xOut, kOut, fOut := filepath.Join(dir, "xdp.jsonl"), filepath.Join(dir, "kernel.jsonl"), filepath.Join(dir, "file.jsonl")
	x := startCapture(t, nsB, "run", "--json", "-i", ifB, expr(xOut))
	k := startCapture(t, nsB, "run", "--json", "-i", ifB, "--hierarchy", kernel, expr(kOut))
	waitPrograms(t, 4)
	var bursts []string
	var last time.Time // the last burst's start
	base := time.Now().Truncate(time.Second).Add(time.Second)
	for i, s := range []int{1, 2, 4, 5, 7} {
		mid := base.Add(time.Duration(s)*time.Second + 25*time.Millisecond)
		time.Sleep(time.Until(mid))
		sent := filepath.Join(dir, fmt.Sprintf("sent%d.pcap", i))
		sendTracePaced(t, nsA, ifA, sent, 300, 30+i, 20000)
		if d := time.Since(mid); d > 400*time.Millisecond {
			t.Logf("burst %d took %v: it may cross an epoch's end", i, d)
		}
		bursts = append(bursts, sent)
		last = mid
	}
	// The frames are in once the receive counter has stopped for a while
	// (settle's second would end the last burst's epoch).
	await(t, ^uint64(0), 150*time.Millisecond, func() uint64 { return rxPackets(t) })
	x.cmd.Process.Signal(os.Interrupt)
	k.cmd.Process.Signal(os.Interrupt)
	if d := time.Since(last); d > 450*time.Millisecond {
		t.Logf("the captures stopped %v after the last burst: its 500 ms epoch had ended and was drained before", d)
	}
	docs := map[string]runJSON{"xdp": x.wait(t), "kernel": k.wait(t)}
	waitPrograms(t, 0)
	all := filepath.Join(dir, "sent.pcap")
	concatPcaps(t, all, bursts)
	file := parseRun(t, ffpf(t, "run", "--json", "-r", all, expr(fOut)))
	sorted := func(lines []string) []string {
		slices.Sort(lines)
		return lines
	}
	want := sorted(readLines(t, fOut))
	lastOnes := 0
	for _, l := range want {
		ts, err := strconv.ParseInt(fieldOf(t, l, "ts"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if ts >= last.Truncate(time.Second).UnixNano() {
			lastOnes++
		}
	}
	if lastOnes == 0 {
		t.Errorf("no record of the last burst's intervals, which the runs end in")
	}
	per := map[string]int{}
	for _, l := range want {
		per[strings.Trim(fieldOf(t, l, "event"), `"`)]++
	}
	t.Logf("%d records from the file: %v", len(want), per)
	if len(per) != len(trumpetLiveEvents) {
		t.Fatalf("the file run reports only events %v: the test would not see the others wrong", per)
	}
	for place, out := range map[string]string{"xdp": xOut, "kernel": kOut} {
		got := sorted(readLines(t, out))
		if !slices.Equal(got, want) {
			n := 0
			for _, l := range got {
				if !slices.Contains(want, l) {
					if n++; n < 5 {
						t.Errorf("%s reports %s, the file does not", place, l)
					}
				}
			}
			for _, l := range want {
				if !slices.Contains(got, l) {
					if n++; n < 10 {
						t.Errorf("%s does not report %s", place, l)
					}
				}
			}
			t.Errorf("%s: %d records, the file %d", place, len(got), len(want))
		}
		doc := docs[place]
		fns, ffn := doc.byClass("trumpet"), file.byClass("trumpet")
		if len(fns) != 1 || len(ffn) != 1 {
			t.Fatalf("%s: %d trumpet functions, the file %d", place, len(fns), len(ffn))
		}
		f, w := doc.Functions[fns[0]], file.Functions[ffn[0]]
		if !strings.HasPrefix(f.Flowspace, place) {
			t.Errorf("trumpet runs in %s, not %s", f.Flowspace, place)
		}
		if f.In != w.In || f.Dropped != 0 || stateNum(t, f.State["mapfull"]) != 0 || stateNum(t, f.State["nokey"]) != stateNum(t, w.State["nokey"]) {
			t.Errorf("%s: in %d dropped %d state %v; the file: in %d state %v", place, f.In, f.Dropped, f.State, w.In, w.State)
		}
	}
}

// TestPlaceTrumpet: trumpet with summarisable events goes to XDP; with an
// event that reads TCP state, an epoch too short for its Go half, or the
// DoS defence it stays in userspace, and the plan says why.
func TestPlaceTrumpet(t *testing.T) {
	_, nsB, _, ifB := netnsPair(t)
	place := func(expr string) string {
		out, err := exec.Command("ip", "netns", "exec", nsB, ffpfBin, "place", "-i", ifB, expr).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return string(out)
	}
	out := place(`(trumpet,event="heavy: dstip=10.0.0.0/8; sum(volume) > 125KB; 5-tuple; 10ms")`)
	if want := "trumpet#1  0x00ffffff  lowest flowspace with class trumpet at or above xdp:" + ifB; !strings.Contains(out, want) || strings.Contains(out, "not in xdp") {
		t.Errorf("place does not put trumpet in xdp:%s (%q):\n%s", ifB, want, out)
	}
	for expr, why := range map[string]string{
		`(trumpet,event="loss: proto=tcp; sum(is_lost) > 0; 5-tuple; 10ms")`:       "event loss reads is_lost, which needs per-flow TCP or timing state",
		`(trumpet,event="c: *; 1 - (ack - ack_lastepoch) > 0; 5-tuple; 10ms")`:     "event c reads ack, a flow's TCP state",
		`(trumpet,epoch=1ms,event="heavy: *; sum(volume) > 125KB; 5-tuple; 10ms")`: "an epoch of 1ms is shorter than the 10ms",
		`(trumpet,dos=1KB,event="heavy: *; sum(volume) > 125KB; 5-tuple; 10ms")`:   "DoS defence (dos=)",
		`(trumpet,event="b: *; sum(ecn & is_burst) > 0; 5-tuple; 10ms")`:           "event b reads ecn & is_burst",
	} {
		out := place(expr)
		if !strings.Contains(out, "trumpet#1  0xffffffff") || !strings.Contains(out, "not in xdp:"+ifB+": ") || !strings.Contains(out, why) {
			t.Errorf("%s: place does not keep it in userspace saying %q:\n%s", expr, why, out)
		}
	}
}
