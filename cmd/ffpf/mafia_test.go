package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
)

// ffpf mafia check: a use case prints the request it becomes; the
// issue's four errors (a Bloom test used as a number, an undeclared state
// variable, a stream never consumed, a + whose branches write the same
// state) are exit 2, one line FILE:LINE:COL, the line and a caret under
// the column, a suggestion where one is near.
func TestMafiaCheckErrors(t *testing.T) {
	r := ffpf(t, "mafia", "check", "../../examples/mafia/heavy-hitter.mafia")
	if r.code != 0 || !strings.Contains(r.stdout, "nbytes:(cms,key=5tuple,width=256,depth=4,value=bytes,hash=switch)") {
		t.Fatalf("heavy-hitter: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	udp := filepath.Join(t.TempDir(), "udp.mafia")
	if err := os.WriteFile(udp, []byte("pkts >> duplicate(d)\nd >> collect(\"udp:127.0.0.1:9999\")\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := ffpf(t, "mafia", "check", udp); r.code != 0 || !strings.Contains(r.stdout, `(export,to="127.0.0.1:9999")`) {
		t.Errorf("collect to UDP: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	const decl = "flowid = Key(ip.src, ip.dst, tcp.src, tcp.dst, ip.proto)\n" +
		"hh = BloomFilter(alg=\"membership\", key=flowid, nhash=4, size=64)\n" +
		"n = Sketch(alg=\"count-min\", key=flowid, nhash=4, size=256)\n" +
		"c = HashMap(key=flowid, size=1024, type=Counter(width=32))\n"
	dir := t.TempDir()
	for i, tc := range []struct{ step, at, msg string }{
		{"pkts >> match(hh.test() + 1 > 2)", ":5:15:", "a truth value (a Bloom test), used as a number"},
		{"pkts >> n.set(n + 1) >> match(nn.min() > 1)", ":5:31:", "not declared (did you mean n?)"},
		{"pkts >> n.set(n + pkt.size) >> match(n.min() > 5) >> duplicate(alarms)", ":5:64:", "stream alarms is never consumed"},
		{"pkts >> (c.set(c + 1) + c.set(c + pkt.size))", ":5:25:", "both write c"},
	} {
		f := filepath.Join(dir, "p"+string(rune('a'+i))+".mafia")
		if err := os.WriteFile(f, []byte(decl+tc.step+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := ffpf(t, "mafia", "check", f)
		lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
		if r.code != 2 || !strings.Contains(lines[0], f+tc.at) || !strings.Contains(lines[0], tc.msg) {
			t.Errorf("%s: exit %d, want 2 and %s%s …%s…:\n%s", tc.step, r.code, f, tc.at, tc.msg, r.stderr)
			continue
		}
		if len(lines) != 3 || strings.TrimSpace(lines[1]) != tc.step || strings.TrimSpace(lines[2]) != "^" {
			t.Errorf("%s: no line and caret:\n%s", tc.step, r.stderr)
			continue
		}
		c, err := strconv.Atoi(strings.Split(tc.at, ":")[2])
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Index(lines[2], "^") - strings.Index(lines[1], "pkts"); got != c-1 {
			t.Errorf("%s: the caret is under column %d, want %d", tc.step, got+1, c)
		}
	}
}

// The same programs in userspace (ffpf run --mafia): their HashMaps keep
// a switch's one-slot tables (hash=switch, as lang/mafia asks), so the
// samples and the packets past a threshold are exactly those of the
// definition for the flows whose slot they hold (the first flow at each
// of the 1024 positions, crc32 and crc16 of its key), and the packets of
// the others are each counter's dropped ones.
func TestMafiaRunUserspace(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "trace.pcap")
	if r := ffpf(t, "gen", "-o", trace, "--packets", "20000", "--flows", "300", "--seed", "11"); r.code != 0 {
		t.Fatalf("gen: %s", r.stderr)
	}
	sp, err := flowkey.Parse("5tuple")
	if err != nil {
		t.Fatal(err)
	}
	frames := pcapFrames(t, trace)
	for _, tc := range []struct {
		file, out string
		want      func(n, bytes uint64) bool
	}{
		{"deterministic-sampling.mafia", "samples.pcap", func(n, _ uint64) bool { return n%64 > 10 && n%64 <= 15 }},
		{"counter-thresholds.mafia", "exceeded.pcap", func(n, b uint64) bool { return n > 100 || b > 64*1024 }},
	} {
		prog, err := filepath.Abs(filepath.Join("../../examples/mafia", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		r := runCLI(t, ffpfBin, dir, nil, nil, "run", "--json", "--mafia", prog, "-r", trace)
		if r.code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.file, r.code, r.stderr)
		}
		var run runJSON
		if err := json.Unmarshal([]byte(r.stdout), &run); err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		n, b := map[flowkey.Key]uint64{}, map[flowkey.Key]uint64{}
		slots := map[uint32]flowkey.Key{}
		var want [][]byte
		var dropped uint64
		for _, f := range frames {
			var k flowkey.Key
			if !sp.Extract(functions.LinkEthernet, f, &k) {
				continue
			}
			h1, h2 := sp.P4Hashes(&k)
			at := flowkey.P4Index(h1, h2, 0, 10)
			if held, ok := slots[at]; !ok {
				slots[at] = k
			} else if held != k {
				dropped++
				continue
			}
			n[k]++
			b[k] += uint64(len(f))
			if tc.want(n[k], b[k]) {
				want = append(want, f)
			}
		}
		if dropped == 0 || len(slots) < 250 {
			t.Fatalf("%s: %d flows held, %d packets dropped: the trace shows nothing", tc.file, len(slots), dropped)
		}
		counters := 0
		for _, f := range run.Functions {
			if strings.HasPrefix(f.ID, "counter") {
				counters++
				if f.State["dropped"] != float64(dropped) || f.State["keys"] != float64(len(slots)) {
					t.Fatalf("%s: %s: %v; the switch's slots hold %d flows and drop %d packets", tc.file, f.ID, f.State, len(slots), dropped)
				}
			}
		}
		if counters == 0 {
			t.Fatalf("%s: no counter in %s", tc.file, r.stdout)
		}
		got := pcapFrames(t, filepath.Join(dir, tc.out))
		if len(got) != len(want) || len(want) == 0 {
			t.Fatalf("%s: %d packets in %s, the definition gives %d", tc.file, len(got), tc.out, len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("%s: packet %d of %s is not the definition's", tc.file, i, tc.out)
			}
		}
	}
}

// TestMafiaRunInputPort: the issue's own example, heavy hitters in
// userspace. pkt.input_port is the source's position from 1, so every
// packet of the one -r file came in by port 1 (as the trace enters a
// switch by port 1 in examples/mafia): the total counts every packet and
// the alarms are packets of the trace; with PORT = 2 none passes.
func TestMafiaRunInputPort(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "t.pcap")
	if r := ffpf(t, "gen", "-o", trace, "--packets", "5000", "--flows", "50", "--seed", "5"); r.code != 0 {
		t.Fatalf("gen: %s", r.stderr)
	}
	frames := pcapFrames(t, trace)
	src, err := os.ReadFile("../../examples/mafia/heavy-hitter.mafia")
	if err != nil {
		t.Fatal(err)
	}
	for _, port := range []string{"1", "2"} {
		prog := filepath.Join(dir, "hh"+port+".mafia")
		if err := os.WriteFile(prog, bytes.Replace(src, []byte("PORT = 1"), []byte("PORT = "+port), 1), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(dir, "alarms.pcap"))
		r := runCLI(t, ffpfBin, dir, nil, nil, "run", "--json", "--mafia", prog, "-r", trace)
		if r.code != 0 {
			t.Fatalf("PORT = %s: exit %d: %s", port, r.code, r.stderr)
		}
		var run runJSON
		if err := json.Unmarshal([]byte(r.stdout), &run); err != nil {
			t.Fatal(err)
		}
		want := 0.0
		if port == "1" {
			want = float64(len(frames))
		}
		found := false
		for _, f := range run.Functions {
			if strings.HasPrefix(f.ID, "counter") {
				found = true
				if f.State["packets"] != want {
					t.Fatalf("PORT = %s: total counted %v packets, want %v", port, f.State["packets"], want)
				}
			}
		}
		if !found {
			t.Fatalf("no counter in %s", r.stdout)
		}
		alarms := pcapFrames(t, filepath.Join(dir, "alarms.pcap"))
		if port == "2" {
			if len(alarms) != 0 {
				t.Fatalf("PORT = 2: %d alarms", len(alarms))
			}
			continue
		}
		if len(alarms) == 0 {
			t.Fatal("PORT = 1: no alarm")
		}
		in := map[int]bool{}
		for _, f := range frames {
			in[len(f)] = true
		}
		for i, a := range alarms {
			if !in[len(a)] {
				t.Fatalf("alarm %d (%d bytes) is no packet of the trace", i, len(a))
			}
		}
	}
}
