package mafia_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket/pcapgo"

	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/functions"
	_ "github.com/ffpf-go/ffpf/functions/builtin"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/gen"
	"github.com/ffpf-go/ffpf/functions/sample"
	"github.com/ffpf-go/ffpf/functions/sketch"
)

// The trace: 100,000 generated packets at 1 Mpps (100 ms, ten 10 ms
// windows), 1000 flows, IPv4 and IPv6, some VLAN-tagged.
var traceCfg = gen.Config{Seed: 3, Packets: 100000, Flows: 1000, IPv6: 0.2, VLAN: 0.1}

const window = int64(10 * time.Millisecond)

// packet is one packet of a pcap file, with what the exact computations
// need of it.
type packet struct {
	ts   int64 // ns
	wire int
	data []byte

	ok5   bool // has a 5-tuple key
	key   flowkey.Key
	h     uint64 // the key's hash, seed 0 (the sketches' and tag's)
	str   string // the key as JSON, as records write it
	proto uint8  // ip.proto, 0 without an IP header
}

var (
	spec5     = mustSpec("5tuple")
	specProto = mustSpec("proto")
)

func mustSpec(s string) *flowkey.Spec {
	sp, err := flowkey.Parse(s)
	if err != nil {
		panic(err)
	}
	return sp
}

func readPcap(t *testing.T, file string) []packet {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(bufio.NewReader(f))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var out []packet
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		p := packet{ts: ci.Timestamp.UnixNano(), wire: ci.Length, data: data}
		if spec5.Extract(functions.LinkEthernet, data, &p.key) {
			p.ok5 = true
			p.h = spec5.Hash(&p.key, 0)
			p.str = spec5.Format(&p.key)
		}
		var k flowkey.Key
		if specProto.Extract(functions.LinkEthernet, data, &k) {
			var v struct{ Proto uint8 }
			if err := json.Unmarshal([]byte(specProto.Format(&k)), &v); err != nil {
				t.Fatal(err)
			}
			p.proto = v.Proto
		}
		out = append(out, p)
	}
}

func tcpOrUDP(p *packet) bool { return p.proto == 6 || p.proto == 17 }

// The trace is written once, into traceDir, and read once.
var (
	traceDir  string
	traceOnce sync.Once
	tracePkts []packet
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mafia")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	traceDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// setup gives a directory for a test's output files, the trace and its
// packets.
func setup(t *testing.T) (dir, trace string, pkts []packet) {
	trace = filepath.Join(traceDir, "trace.pcap")
	traceOnce.Do(func() {
		var buf bytes.Buffer
		if err := gen.WritePcap(&buf, traceCfg, 0); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(trace, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		tracePkts = readPcap(t, trace)
	})
	if len(tracePkts) != int(traceCfg.Packets) {
		t.Fatalf("the trace has %d packets, want %d", len(tracePkts), traceCfg.Packets)
	}
	return t.TempDir(), trace, tracePkts
}

// run runs an example's expression on the trace, as `ffpf run -r TRACE
// "$(grep -v '^#' FILE)"` does, with its output files in dir, and returns
// the functions' final reports.
func run(t *testing.T, dir, trace, name string) []flowgraph.FunctionState {
	t.Helper()
	src, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(src), "\n") {
		if !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	expr := strings.ReplaceAll(strings.Join(lines, "\n"), "file=", "file="+dir+"/")
	expr = "(pcap,file=" + strconv.Quote(trace) + ") > " + expr
	return runExpr(t, name, expr, flowgraph.RequestOptions{})
}

// runExpr runs expr in userspace to its end and returns the functions'
// final reports.
func runExpr(t *testing.T, name, expr string, opts flowgraph.RequestOptions) []flowgraph.FunctionState {
	t.Helper()
	rt := flowgraph.New(flowgraph.Config{})
	defer rt.Close()
	req, err := rt.Populate(expr, opts)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := rt.Activate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rt.Wait(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	fs := req.Functions()
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	return fs
}

// samePackets fails unless got is exactly the packets of want, in order.
func samePackets(t *testing.T, what string, got, want []packet) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d packets, the exact computation gives %d", what, len(got), len(want))
	}
	for i := range got {
		// export writes microseconds; the trace has microseconds too.
		if got[i].ts != want[i].ts || got[i].wire != want[i].wire || !bytes.Equal(got[i].data, want[i].data) {
			t.Fatalf("%s: packet %d is %s at %d, the exact computation gives %s at %d",
				what, i, got[i].str, got[i].ts, want[i].str, want[i].ts)
		}
	}
	if len(got) == 0 {
		t.Fatalf("%s: no packets; the example tests nothing", what)
	}
}

// record is one JSON line of a producer's report.
type record struct {
	Function string          `json:"function"`
	TS       int64           `json:"ts"`
	Kind     string          `json:"kind"`
	Key      json.RawMessage `json:"key"`
	Value    uint64          `json:"value"`
	Estimate float64         `json:"estimate"`
	Rank     int             `json:"rank"`
}

func readJSONL(t *testing.T, file string) []record {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []record
	for i, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var r record
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%s:%d: %v: %s", file, i+1, err, l)
		}
		out = append(out, r)
	}
	return out
}

// byWindow groups records by their window's start.
func byWindow(rs []record) map[int64][]record {
	m := map[int64][]record{}
	for _, r := range rs {
		m[r.TS] = append(m[r.TS], r)
	}
	return m
}

func windowOf(ts int64) int64 { return ts - ts%window }

func param(t *testing.T, fs []flowgraph.FunctionState, class, name string) int {
	t.Helper()
	for _, f := range fs {
		if f.Class == class {
			n, err := strconv.Atoi(fmt.Sprint(f.Params[name]))
			if err != nil {
				t.Fatalf("%s's %s: %v", class, name, err)
			}
			return n
		}
	}
	t.Fatalf("no %s", class)
	return 0
}

// Listing 1: the alarms are exactly those of the per-packet definition
// (total, count-min estimate, threshold, Bloom filter, in that order at
// every packet), and they mean what MAFIA means: one per flow, every flow
// whose exact volume crossed γ·total at some packet alarmed, every alarmed
// flow's estimate at least its exact volume and at most εN above it.
func TestListing1(t *testing.T) {
	dir, trace, pkts := setup(t)
	fs := run(t, dir, trace, "listing1.ffpf")
	alarms := readPcap(t, filepath.Join(dir, "alarms.pcap"))

	const gamma = 0.01
	depth, width := param(t, fs, "cms", "depth"), param(t, fs, "cms", "width")
	bits, hashes := param(t, fs, "bloom", "bits"), param(t, fs, "bloom", "hashes")
	cm, err := sketch.NewCountMin(make([]uint64, depth*width), depth, width, sketch.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	bl, err := sketch.NewBloom(make([]uint64, sketch.BloomWords(bits)), bits, hashes)
	if err != nil {
		t.Fatal(err)
	}
	eps := math.E / float64(width)

	var total, cmsN uint64
	exact := map[string]uint64{}
	crossed := map[string]bool{} // flows whose exact volume crossed γ·total
	var want []packet
	type alarm struct{ est, exact, total, n uint64 }
	info := map[string]alarm{}
	for i := range pkts {
		p := &pkts[i]
		total += uint64(p.wire)
		if !p.ok5 {
			continue
		}
		cmsN += uint64(p.wire)
		exact[p.str] += uint64(p.wire)
		est := cm.Add(p.h, uint64(p.wire))
		if float64(exact[p.str]) > gamma*float64(total) {
			crossed[p.str] = true
		}
		if float64(est) > gamma*float64(total) && !bl.Add(p.h) {
			want = append(want, *p)
			info[p.str] = alarm{est, exact[p.str], total, cmsN}
		}
	}
	samePackets(t, "alarms.pcap", alarms, want)

	seen := map[string]bool{}
	for _, a := range alarms {
		if seen[a.str] {
			t.Errorf("two alarms for %s", a.str)
		}
		seen[a.str] = true
		in := info[a.str]
		if in.est < in.exact || float64(in.est) > float64(in.exact)+eps*float64(in.n) {
			t.Errorf("%s alarmed with estimate %d, exact volume %d: outside [exact, exact+εN=%.0f]",
				a.str, in.est, in.exact, float64(in.exact)+eps*float64(in.n))
		}
	}
	for k := range crossed {
		if !seen[k] {
			t.Errorf("%s crossed γ·total but raised no alarm", k)
		}
	}
	t.Logf("%d alarms, %d flows crossed γ·total exactly", len(alarms), len(crossed))
}

// Flow volume: each window's report is the exact top 10 of bytes per
// TCP/UDP 5-tuple.
func TestFlowVolume(t *testing.T) {
	dir, trace, pkts := setup(t)
	run(t, dir, trace, "flow-volume.ffpf")
	got := byWindow(readJSONL(t, filepath.Join(dir, "flow-volume.jsonl")))

	exact := map[int64]map[string]uint64{}
	for i := range pkts {
		p := &pkts[i]
		if !tcpOrUDP(p) {
			continue
		}
		w := windowOf(p.ts)
		if exact[w] == nil {
			exact[w] = map[string]uint64{}
		}
		exact[w][p.str] += uint64(p.wire)
	}
	if len(got) != len(exact) {
		t.Fatalf("%d windows reported, the trace has %d", len(got), len(exact))
	}
	for w, vol := range exact {
		values := make([]uint64, 0, len(vol))
		for _, v := range vol {
			values = append(values, v)
		}
		sort.Slice(values, func(i, j int) bool { return values[i] > values[j] })
		rs := got[w]
		if len(rs) != min(10, len(vol)) {
			t.Fatalf("window %d: %d records, want %d", w, len(rs), min(10, len(vol)))
		}
		for i, r := range rs {
			k := compact(t, r.Key)
			if r.Rank != i+1 || r.Value != values[i] || vol[k] != r.Value {
				t.Errorf("window %d: record %d is %s rank %d value %d; exact: rank %d has %d, %s has %d",
					w, i, k, r.Rank, r.Value, i+1, values[i], k, vol[k])
			}
		}
	}
}

func compact(t *testing.T, raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Approximate flow volume: each reported estimate is within count-min's
// bound of the exact volume, and no flow heavier than the lightest reported
// estimate is missing.
func TestApproxFlowVolume(t *testing.T) {
	dir, trace, pkts := setup(t)
	fs := run(t, dir, trace, "approx-flow-volume.ffpf")
	got := byWindow(readJSONL(t, filepath.Join(dir, "approx-flow-volume.jsonl")))
	eps := math.E / float64(param(t, fs, "cms", "width"))

	exact := map[int64]map[string]uint64{}
	n := map[int64]uint64{}
	for i := range pkts {
		p := &pkts[i]
		if !tcpOrUDP(p) {
			continue
		}
		w := windowOf(p.ts)
		if exact[w] == nil {
			exact[w] = map[string]uint64{}
		}
		exact[w][p.str] += uint64(p.wire)
		n[w] += uint64(p.wire)
	}
	if len(got) != len(exact) {
		t.Fatalf("%d windows reported, the trace has %d", len(got), len(exact))
	}
	for w, vol := range exact {
		rs := got[w]
		if len(rs) != min(10, len(vol)) {
			t.Fatalf("window %d: %d records, want %d", w, len(rs), min(10, len(vol)))
		}
		reported := map[string]bool{}
		lightest := math.Inf(1)
		for i, r := range rs {
			k := compact(t, r.Key)
			reported[k] = true
			lightest = min(lightest, r.Estimate)
			x := float64(vol[k])
			if r.Rank != i+1 || r.Estimate < x || r.Estimate > x+eps*float64(n[w]) {
				t.Errorf("window %d: %s rank %d estimate %.0f, exact %d: outside [exact, exact+εN=%.0f]",
					w, k, r.Rank, r.Estimate, vol[k], x+eps*float64(n[w]))
			}
		}
		for k, v := range vol {
			if float64(v) > lightest && !reported[k] {
				t.Errorf("window %d: %s has %d bytes, more than the lightest estimate reported (%.0f), but is not reported", w, k, v, lightest)
			}
		}
	}
}

// Flow cardinality: each window's estimate of distinct TCP 5-tuples is
// within three standard errors of the exact count.
func TestCardinality(t *testing.T) {
	dir, trace, pkts := setup(t)
	exact := map[int64]map[string]bool{}
	for i := range pkts {
		p := &pkts[i]
		if p.proto != 6 {
			continue
		}
		w := windowOf(p.ts)
		if exact[w] == nil {
			exact[w] = map[string]bool{}
		}
		exact[w][p.str] = true
	}
	for _, c := range []struct {
		file, out string
		stderr    float64
	}{
		{"cardinality-pcsa.ffpf", "cardinality-pcsa.jsonl", 0.78 / math.Sqrt(256)},
		{"cardinality-hll.ffpf", "cardinality-hll.jsonl", 1.04 / math.Sqrt(1<<12)},
	} {
		run(t, dir, trace, c.file)
		got := byWindow(readJSONL(t, filepath.Join(dir, c.out)))
		if len(got) != len(exact) {
			t.Fatalf("%s: %d windows reported, the trace has %d", c.file, len(got), len(exact))
		}
		for w, set := range exact {
			rs := got[w]
			n := float64(len(set))
			if len(rs) != 1 || math.Abs(rs[0].Estimate-n) > 3*c.stderr*n {
				t.Errorf("%s: window %d: %v, want one estimate within %.1f%% of %d", c.file, w, rs, 300*c.stderr, len(set))
			}
		}
	}
}

// Counter thresholds: the 1-in-10 sample of the packets of flows past 500
// packets and the packets with which flows cross 100 KB are exactly those
// of per-flow packet and byte counts.
func TestCounterThresholds(t *testing.T) {
	dir, trace, pkts := setup(t)
	run(t, dir, trace, "counter-thresholds.ffpf")
	const T = 100 << 10
	np, nb := map[string]uint64{}, map[string]uint64{}
	var over, cross []packet
	var n int
	for i := range pkts {
		p := &pkts[i]
		if !tcpOrUDP(p) {
			continue
		}
		np[p.str]++
		if np[p.str] > 500 {
			if n%10 == 0 {
				over = append(over, *p)
			}
			n++
		}
		nb[p.str] += uint64(p.wire)
		if v := nb[p.str]; v >= T && v-uint64(p.wire) < T {
			cross = append(cross, *p)
		}
	}
	samePackets(t, "pkts-exceeded.pcap", readPcap(t, filepath.Join(dir, "pkts-exceeded.pcap")), over)
	samePackets(t, "bytes-crossed.pcap", readPcap(t, filepath.Join(dir, "bytes-crossed.pcap")), cross)
}

// Stochastic sampling: the sample is exactly the TCP packets whose draw
// (sample.Draw with the seed and the packet's index) is below the rate,
// and its size is within five standard deviations of the binomial mean.
func TestStochasticSampling(t *testing.T) {
	dir, trace, pkts := setup(t)
	run(t, dir, trace, "stochastic-sampling.ffpf")
	const rate = 0.01
	limit := uint64(float64(rate) * (1 << 64))
	var want []packet
	var i uint64
	for j := range pkts {
		p := &pkts[j]
		if p.proto != 6 {
			continue
		}
		r := sample.Draw(7, i)
		i++
		if r < limit && float64(r)/(1<<64) < rate {
			want = append(want, *p)
		}
	}
	samePackets(t, "sampled.pcap", readPcap(t, filepath.Join(dir, "sampled.pcap")), want)
	mean := rate * float64(i)
	if d := math.Abs(float64(len(want)) - mean); d > 5*math.Sqrt(mean*(1-rate)) {
		t.Errorf("%d of %d packets sampled at rate %v", len(want), i, rate)
	}
}

// Deterministic sampling: every 50th TCP packet of flows past their 10th
// packet, of the flows whose tag (the top 53 bits of the 5-tuple's hash)
// is even.
func TestDeterministicSampling(t *testing.T) {
	dir, trace, pkts := setup(t)
	run(t, dir, trace, "deterministic-sampling.ffpf")
	c := map[string]uint64{}
	var want []packet
	var n int
	for i := range pkts {
		p := &pkts[i]
		if p.proto != 6 {
			continue
		}
		c[p.str]++
		if c[p.str] <= 10 {
			continue
		}
		if n%50 == 0 && (p.h>>11)%2 == 0 {
			want = append(want, *p)
		}
		n++
	}
	samePackets(t, "sampled-flows.pcap", readPcap(t, filepath.Join(dir, "sampled-flows.pcap")), want)
}
