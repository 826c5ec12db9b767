package measure_test

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/user"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/gen"
)

const win = int64(20 * time.Millisecond)

// trace is 200000 generated packets 1 µs apart (10 windows of 20 ms) over
// 5000 flows, starting off a window boundary, written to a pcap file and
// read back with gopacket.
func trace(t *testing.T) (string, []pkt) {
	t.Helper()
	start := gen.DefaultStart.Add(7*time.Millisecond + 123457*time.Nanosecond)
	path := writePcap(t, "t.pcap", genTrace(gen.Config{Seed: 3, Packets: 200000, Flows: 5000, IPv6: 0.2, VLAN: 0.05, Malformed: 0.01, Start: start}))
	return path, readPcap(t, path)
}

// exactCounts is the exact value per key per window (w = 0: one window
// starting at the first packet).
func exactCounts(t *testing.T, pkts []pkt, key string, w int64, bytes bool) map[int64]map[string]uint64 {
	sp := mustSpec(t, key)
	out := map[int64]map[string]uint64{}
	for _, p := range pkts {
		k := keyOf(sp, p)
		if k == "" {
			continue
		}
		ws := pkts[0].ts
		if w > 0 {
			ws = window(p.ts, w)
		}
		if out[ws] == nil {
			out[ws] = map[string]uint64{}
		}
		v := uint64(1)
		if bytes {
			v = uint64(p.wire)
		}
		out[ws][k] += v
	}
	return out
}

// A keyed counter reports per window exactly the K largest keys.
func TestCounterExactTopK(t *testing.T) {
	path, pkts := trace(t)
	const K = 7
	for _, c := range []struct{ key, value string }{{"srcip/24", "bytes"}, {"dstport", "packets"}, {"5tuple", "packets"}} {
		t.Run(c.key, func(t *testing.T) {
			lines, _ := run(t, testRegistry(t, nil, 0, nil),
				fmt.Sprintf(`(pcap,file=%q) > (counter,key=%s,value=%s,window=20ms,report=%d) > (export,format=jsonl,file=OUT)`, path, c.key, c.value, K))
			exact := exactCounts(t, pkts, c.key, win, c.value == "bytes")
			order, got := byWindow(t, parse(t, lines))
			if want := sortedKeys(exact); !slices.Equal(order, want) {
				t.Fatalf("windows reported %v, want %v", order, want)
			}
			if len(order) < 5 {
				t.Fatalf("only %d windows", len(order))
			}
			total := 0
			for _, ws := range order {
				if ws%win != 0 {
					t.Errorf("ts %d is not aligned to the window", ws)
				}
				ex := exact[ws]
				vals := make([]uint64, 0, len(ex))
				for _, v := range ex {
					vals = append(vals, v)
				}
				slices.Sort(vals)
				slices.Reverse(vals)
				n := min(K, len(vals))
				total += n
				rs := got[ws]
				if len(rs) != n {
					t.Errorf("window %d: %d records, want %d", ws, len(rs), n)
					continue
				}
				seen := map[string]bool{}
				for i, r := range rs {
					k := string(r.Key)
					if r.Rank != i+1 || r.Value == nil || seen[k] {
						t.Errorf("window %d: record %d: rank %d, value %v, key %s (repeated %v)", ws, i, r.Rank, r.Value, k, seen[k])
						continue
					}
					seen[k] = true
					if *r.Value != ex[k] || *r.Value != vals[i] {
						t.Errorf("window %d rank %d: %s = %d; exact %d, exact rank %d value %d", ws, i+1, k, *r.Value, ex[k], i+1, vals[i])
					}
				}
			}
			if len(lines) != total {
				t.Errorf("%d records, want %d", len(lines), total)
			}
		})
	}
}

// Keys look as documented: {"srcip":"10.0.1.0/24"}.
func TestReportKeyFormat(t *testing.T) {
	path, _ := trace(t)
	lines, _ := run(t, testRegistry(t, nil, 0, nil),
		fmt.Sprintf(`(pcap,file=%q) > (bpf,"ip") > (counter,key=srcip/24,report=50) > (export,format=jsonl,file=OUT)`, path))
	if len(lines) != 50 {
		t.Fatalf("%d records", len(lines))
	}
	for _, r := range parse(t, lines) {
		var a, b, c int
		var tail string
		if n, _ := fmt.Sscanf(string(r.Key), `{"srcip":"%d.%d.%d.%s`, &a, &b, &c, &tail); n != 4 || tail != `0/24"}` {
			t.Errorf("key %s is not {\"srcip\":\"A.B.C.0/24\"}", r.Key)
		}
	}
}

// Without window= a counter reports once, at the end, with the whole run's
// totals, at the time of the first packet.
func TestCounterWindowless(t *testing.T) {
	path, pkts := trace(t)
	var packets, bytes uint64
	for _, p := range pkts {
		packets++
		bytes += uint64(p.wire)
	}
	lines, _ := run(t, testRegistry(t, nil, 0, nil), fmt.Sprintf(`(pcap,file=%q) > (counter,report=3) > (export,format=jsonl,file=OUT)`, path))
	rs := parse(t, lines)
	if len(rs) != 1 || rs[0].Packets == nil || rs[0].Bytes == nil {
		t.Fatalf("records %v", lines)
	}
	if *rs[0].Packets != packets || *rs[0].Bytes != bytes || rs[0].TS != pkts[0].ts {
		t.Errorf("%s; want packets %d bytes %d ts %d", lines[0], packets, bytes, pkts[0].ts)
	}
	// Keyed and windowless: one report of the whole run's K largest.
	lines, _ = run(t, testRegistry(t, nil, 0, nil), fmt.Sprintf(`(pcap,file=%q) > (counter,key=proto,report=2) > (export,format=jsonl,file=OUT)`, path))
	rs = parse(t, lines)
	ex := exactCounts(t, pkts, "proto", 0, false)[pkts[0].ts]
	if len(rs) != 2 || rs[0].TS != pkts[0].ts || rs[1].TS != pkts[0].ts {
		t.Fatalf("records %v", lines)
	}
	for _, r := range rs {
		if *r.Value != ex[string(r.Key)] {
			t.Errorf("%s: exact %d", lines, ex[string(r.Key)])
		}
	}
}

// cms's reports and its estimates read by label never fall below the
// exact sums, and exceed them by at most εN but with probability δ.
func TestCMSBounds(t *testing.T) {
	path, pkts := trace(t)
	const width, depth = 272, 3 // ε = e/272 ≈ 0.01, δ = e^-3 ≈ 0.05
	eps, delta := math.E/width, math.Exp(-depth)
	for _, value := range []string{"packets", "bytes"} {
		t.Run(value, func(t *testing.T) {
			exact := exactCounts(t, pkts, "srcip", win, value == "bytes")
			N := map[int64]uint64{}
			for ws, m := range exact {
				for _, v := range m {
					N[ws] += v
				}
			}
			lines, _ := run(t, testRegistry(t, nil, 0, nil), fmt.Sprintf(
				`(pcap,file=%q) > (cms,key=srcip,value=%s,width=%d,depth=%d,window=20ms,report=100) > (export,format=jsonl,file=OUT)`,
				path, value, width, depth))
			rs := parse(t, lines)
			over := 0
			for _, r := range rs {
				ex := exact[r.TS][string(r.Key)]
				if r.Estimate == nil || *r.Estimate < float64(ex) {
					t.Errorf("%v: estimate below the exact %d", r, ex)
				} else if *r.Estimate > float64(ex)+eps*float64(N[r.TS]) {
					over++
				}
			}
			if len(rs) != 100*len(exact) {
				t.Errorf("%d records for %d windows", len(rs), len(exact))
			}
			if float64(over) > 2*delta*float64(len(rs))+1 {
				t.Errorf("%d of %d reported estimates exceed exact + εN (δ = %.3f)", over, len(rs), delta)
			}
			// The same estimates read by label, for each packet after the
			// cms counted it.
			var probed []float64
			_, states := run(t, testRegistry(t, pkts, 0, &probed), fmt.Sprintf(
				`(replay) > x:(cms,key=srcip,value=%s,width=%d,depth=%d,window=20ms) > (probe,read=x.min)`, value, width, depth))
			sp := mustSpec(t, "srcip")
			so := map[string]uint64{}
			cur := int64(-1)
			i, keyed, over := 0, 0, 0
			for _, p := range pkts {
				if i >= len(probed) {
					t.Fatalf("probe read %d values", len(probed))
				}
				est := probed[i]
				i++
				k := keyOf(sp, p)
				if k == "" {
					if est != 0 {
						t.Fatalf("packet %d has no key but x.min %v", i, est)
					}
					continue
				}
				if ws := window(p.ts, win); ws != cur {
					cur, so = ws, map[string]uint64{}
				}
				v := uint64(1)
				if value == "bytes" {
					v = uint64(p.wire)
				}
				so[k] += v
				keyed++
				if est < float64(so[k]) {
					t.Fatalf("packet %d: x.min %v below the exact %d so far", i, est, so[k])
				}
				if est > float64(exact[cur][k])+eps*float64(N[cur]) {
					over++
				}
			}
			if i != len(probed) {
				t.Errorf("probe read %d values, %d packets keyed", len(probed), i)
			}
			if float64(over) > 2*delta*float64(keyed)+1 {
				t.Errorf("%d of %d read estimates exceed exact + εN", over, keyed)
			}
			if st := states[1].State; st["total"] != float64(N[cur]) {
				t.Errorf("cms state %v: total of the last window %d", st, N[cur])
			}
		})
	}
}

// hll and pcsa estimate the distinct keys of each window within three
// standard errors, and so does --json's "estimate" for the whole run.
func TestCardinalityBounds(t *testing.T) {
	path, pkts := trace(t)
	for _, c := range []struct {
		class, size string
		m           float64
		c           float64
	}{{"hll", "precision=12", 4096, 1.04}, {"hll", "precision=14", 16384, 1.04}, {"pcsa", "bitmaps=256", 256, 0.78}, {"pcsa", "bitmaps=1024", 1024, 0.78}} {
		bound := 3 * c.c / math.Sqrt(c.m)
		for _, key := range []string{"5tuple", "srcip"} {
			t.Run(c.class+"/"+c.size+"/"+key, func(t *testing.T) {
				ex := exactCounts(t, pkts, key, win, false)
				lines, states := run(t, testRegistry(t, nil, 0, nil), fmt.Sprintf(
					`(pcap,file=%q) > (%s,key=%s,%s,window=20ms,report=1) > (export,format=jsonl,file=OUT)`, path, c.class, key, c.size))
				rs := parse(t, lines)
				if len(rs) != len(ex) {
					t.Fatalf("%d reports for %d windows", len(rs), len(ex))
				}
				for _, r := range rs {
					n := float64(len(ex[r.TS]))
					if r.Estimate == nil || math.Abs(*r.Estimate-n)/n > bound {
						t.Errorf("window %d: estimate %v of %v distinct (bound %.3f)", r.TS, *r.Estimate, n, bound)
					}
				}
				_ = states
				all := map[string]bool{}
				sp := mustSpec(t, key)
				for _, p := range pkts {
					if k := keyOf(sp, p); k != "" {
						all[k] = true
					}
				}
				_, states = run(t, testRegistry(t, nil, 0, nil), fmt.Sprintf(`(pcap,file=%q) > (%s,key=%s,%s)`, path, c.class, key, c.size))
				est, _ := states[1].State["estimate"].(float64)
				if n := float64(len(all)); math.Abs(est-n)/n > bound {
					t.Errorf("--json estimate %v (%v) of %v distinct (bound %.3f)", est, states[1].State, n, bound)
				}
			})
		}
	}
}

// bloom pass=new passes exactly the first packet of each key when the
// filter is large enough: none twice (no false negative), none missed.
func TestBloomPassNew(t *testing.T) {
	path, pkts := trace(t)
	sp := mustSpec(t, "5tuple")
	first := map[string]bool{}
	for _, p := range pkts {
		if k := keyOf(sp, p); k != "" {
			first[k] = true
		}
	}
	lines, states := run(t, testRegistry(t, nil, 0, nil), fmt.Sprintf(
		`(pcap,file=%q) > (bloom,key=5tuple,bits=4M,hashes=4) > (counter,key=5tuple,report=65536) > (export,format=jsonl,file=OUT)`, path))
	rs := parse(t, lines)
	if len(rs) != len(first) {
		t.Errorf("%d keys passed, %d distinct", len(rs), len(first))
	}
	for _, r := range rs {
		if *r.Value != 1 || !first[string(r.Key)] {
			t.Errorf("key %s passed %d times (distinct in the trace: %v)", r.Key, *r.Value, first[string(r.Key)])
		}
	}
	if got := states[1].State["inserted"]; got != float64(len(first)) {
		t.Errorf("inserted %v, want %d", got, len(first))
	}
	// With window=, the first packet of each key in each window.
	lines, _ = run(t, testRegistry(t, nil, 0, nil), fmt.Sprintf(
		`(pcap,file=%q) > (bloom,key=5tuple,bits=4M,window=20ms) > (counter,key=5tuple,window=20ms,report=65536) > (export,format=jsonl,file=OUT)`, path))
	ex := exactCounts(t, pkts, "5tuple", win, false)
	_, got := byWindow(t, parse(t, lines))
	for ws, keys := range ex {
		if len(got[ws]) != len(keys) {
			t.Errorf("window %d: %d keys passed, %d distinct", ws, len(got[ws]), len(keys))
		}
		for _, r := range got[ws] {
			if *r.Value != 1 || keys[string(r.Key)] == 0 {
				t.Errorf("window %d: key %s passed %d times (in the window: %d packets)", ws, r.Key, *r.Value, keys[string(r.Key)])
			}
		}
	}
}

// frame is a minimal Ethernet/IPv4/UDP frame from src.
func frame(src uint32) []byte {
	b := make([]byte, 42)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], 28)
	binary.BigEndian.PutUint32(ip[12:], src)
	binary.BigEndian.PutUint32(ip[16:], 0x0a000001)
	binary.BigEndian.PutUint16(b[34:], 1000)
	binary.BigEndian.PutUint16(b[36:], 53)
	binary.BigEndian.PutUint16(b[38:], 8)
	return b
}

// bloom's false-positive rate on a known set: n keys 10.x inserted, then
// q other keys 11.x queried, each inserted after its test. pass=member
// passes the 11.x keys the filter wrongly holds; their number is compared
// with Σ (1 − e^(−k·n_i/m))^k, n_i the keys inserted before query i.
func TestBloomFalsePositiveRate(t *testing.T) {
	const n, q, m, k = 8000, 8000, 1 << 16, 4
	rng := rand.New(rand.NewPCG(1, 2))
	var pkts []pkt
	ts := gen.DefaultStart.UnixNano()
	used := map[uint32]bool{}
	for i := range n + q {
		base := uint32(0x0a000000)
		if i >= n {
			base = 0x0b000000
		}
		var src uint32
		for src = base | rng.Uint32()&0xffffff; used[src]; src = base | rng.Uint32()&0xffffff {
		}
		used[src] = true
		pkts = append(pkts, pkt{frame(src), 60, ts + int64(i)})
	}
	want := 0.0
	for i := range q {
		want += math.Pow(1-math.Exp(-float64(k*(n+i))/m), k)
	}
	lines, _ := run(t, testRegistry(t, pkts, 0, nil), fmt.Sprintf(
		`(replay) > (bloom,key=srcip,bits=%d,hashes=%d,pass=member) > (counter,key=srcip/8,report=2) > (export,format=jsonl,file=OUT)`, m, k))
	fp, inSet := 0.0, 0.0
	for _, r := range parse(t, lines) {
		switch string(r.Key) {
		case `{"srcip":"11.0.0.0/8"}`:
			fp = float64(*r.Value)
		case `{"srcip":"10.0.0.0/8"}`:
			inSet = float64(*r.Value)
		}
	}
	t.Logf("false positives %v of %d queries, expected %.1f; among the set's own inserts %v", fp, q, want, inSet)
	if fp > 1.5*want || fp < want/1.5 {
		t.Errorf("%v false positives of %d, expected %.1f (within 1.5×)", fp, q, want)
	}
}

// The reports do not depend on the batch size: the pcap source, one
// packet per batch and batches of random sizes give the same JSON lines,
// in order and out of order.
func TestBatchSizeIndependence(t *testing.T) {
	_, pkts := trace(t)
	pkts = pkts[:60000]
	shuffled := slices.Clone(pkts)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range shuffled { // timestamps out of order: some packets late by up to 3 ms
		if rng.IntN(20) == 0 {
			shuffled[i].ts -= rng.Int64N(3e6)
		}
	}
	exprs := []string{
		`(cms,key=srcip/24,value=bytes,window=1ms,report=5) > (export,format=jsonl,file=OUT)`,
		`(counter,key=dstport,window=2ms,report=3) > (export,format=jsonl,file=OUT)`,
		`(bpf,"tcp") > (hll,key=5tuple,precision=10,window=5ms,report=1) > (export,format=jsonl,file=OUT)`,
		`(pcsa,key=dstip,window=5ms,report=1) > (export,format=jsonl,file=OUT)`,
		`(bloom,key=srcip,bits=1K,window=3ms,report=1) > (export,format=jsonl,file=OUT)`,
		`(bloom,key=5tuple,window=1ms) > (counter,key=proto,window=4ms,report=4) > (export,format=jsonl,file=OUT)`,
	}
	for name, tr := range map[string][]pkt{"ordered": pkts, "unordered": shuffled} {
		path := writePcap(t, name+".pcap", tr)
		for _, e := range exprs {
			ref, _ := run(t, testRegistry(t, nil, 0, nil), fmt.Sprintf(`(pcap,file=%q) > `, path)+e)
			if len(ref) == 0 {
				t.Fatalf("%s: no records", e)
			}
			for _, seed := range []uint64{0, 1, 99, 12345} {
				got, _ := run(t, testRegistry(t, tr, seed, nil), `(replay) > `+e)
				if d := diff(ref, got); d != "" {
					t.Errorf("%s %s: batches of seed %d differ from the pcap source: %s", name, e, seed, d)
				}
			}
		}
	}
}

func diff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("line %d:\n  %s\n  %s", i+1, a[i], b[i])
		}
	}
	if len(a) != len(b) {
		return fmt.Sprintf("%d lines vs %d", len(a), len(b))
	}
	return ""
}

// A join of two file sources into one cms gives the same reports on every
// run: those of one source replaying the two traces merged in time order.
func TestJoinDeterministic(t *testing.T) {
	pa := genTrace(gen.Config{Seed: 1, Packets: 50000, Flows: 2000})
	pb := genTrace(gen.Config{Seed: 2, Packets: 50000, Flows: 2000, Start: gen.DefaultStart.Add(333500 * time.Nanosecond)})
	a, b := writePcap(t, "a.pcap", pa), writePcap(t, "b.pcap", pb)
	tail := `(cms,key=srcip/24,window=1ms,report=3) > (export,format=jsonl,file=OUT)`
	expr := fmt.Sprintf(`[(pcap,file=%q)|(pcap,file=%q)] > `, a, b) + tail
	ref, _ := run(t, testRegistry(t, nil, 0, nil), expr)
	for i := range 5 {
		got, _ := run(t, testRegistry(t, nil, 0, nil), expr)
		if d := diff(ref, got); d != "" {
			t.Fatalf("the join of two file sources differs between runs: run %d: %s", i+2, d)
		}
	}
	merged := slices.SortedStableFunc(slices.Values(append(slices.Clone(pa), pb...)), func(x, y pkt) int { return cmp.Compare(x.ts, y.ts) })
	want, _ := run(t, testRegistry(t, merged, 77, nil), `(replay) > `+tail)
	if d := diff(want, ref); d != "" {
		t.Errorf("the join differs from the traces merged in time order: %s", d)
	}
}

// A label that names no function, or a group, is refused at populate with
// a sentence naming the reader.
func TestStateLabelErrors(t *testing.T) {
	reg := testRegistry(t, nil, 0, nil)
	for expr, want := range map[string]string{
		`(gen,packets=10) > x:(cms) > (probe,read=y.min)`:                     `no function of this request is labelled "y"`,
		`(gen,packets=10) > x:[(cms)|(hll)] > (probe,read=x.min)`:             `names a group`,
		`(gen,packets=10) > x:(pktcount) > (probe,read=x.min)`:                `probe`,
		`(gen,packets=10) > (bpf,"tcp") > x:(bpf,"udp") > (probe,read=x.min)`: `keeps none`,
	} {
		_, err := flowgraphPopulate(reg, expr)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "probe") {
			t.Errorf("%s: %v; want an error naming probe and %q", expr, err, want)
		}
	}
}

// A keyed counter with a small table counts the keys it cannot hold in
// dropped and nokey, and its report is still the largest of the keys held.
func TestCounterOverflow(t *testing.T) {
	path, pkts := trace(t)
	_, states := run(t, testRegistry(t, nil, 0, nil), fmt.Sprintf(`(pcap,file=%q) > (counter,key=5tuple,size=16)`, path))
	st := states[1].State
	sp := mustSpec(t, "5tuple")
	nokey := 0
	for _, p := range pkts {
		if keyOf(sp, p) == "" {
			nokey++
		}
	}
	dropped, _ := st["dropped"].(float64)
	keys, _ := st["keys"].(float64)
	if dropped == 0 || keys != 16 || st["nokey"] != float64(nokey) || st["packets"] != float64(len(pkts)) {
		t.Errorf("state %v; want keys 16, dropped > 0, nokey %d, packets %d", st, nokey, len(pkts))
	}
}

// A reader runs in the flowspace of the state it reads (placement rule 4):
// a cms that a board beneath userspace could hold, read by a function the
// board cannot run, goes up to the reader's flowspace (FFPF's rule for
// what does not fit: the state and its dependants of the request go up),
// rather than the request being refused.
func TestReaderWhereStateIsNot(t *testing.T) {
	reg := testRegistry(t, genTrace(gen.Config{Seed: 1, Packets: 100}), 0, nil)
	capc := &functions.Class{Name: "cap", Params: []functions.Param{{Name: "if", Type: functions.String, Required: true}},
		Interface: func(p functions.Params) string { return p.Str("if") },
		NewSource: func(*functions.Context) (functions.Source, error) { return nil, errors.New("no capture in tests") }}
	if err := reg.Register(capc); err != nil {
		t.Fatal(err)
	}
	replay, _ := reg.Lookup("replay")
	root := user.New(user.Options{Name: "user"})
	board := user.New(user.Options{Name: "board", Kind: flowspaces.KindTest, Classes: []string{"cms"},
		Interfaces: map[string]*user.Traffic{"eth0": {Term: "(replay)", Class: replay}}})
	if _, err := flowspaces.Attach(root, board, "test", flowspaces.CopyOnce); err != nil {
		t.Fatal(err)
	}
	rt := flowgraph.New(flowgraph.Config{Registry: reg, Hierarchy: root})
	defer rt.Close()
	_, err := rt.Populate(`(cap,if=eth0) > x:(cms,key=srcip) > (probe,read=x.min)`, flowgraph.RequestOptions{})
	if err == nil {
		err = rt.Instantiate()
	}
	if err != nil {
		t.Fatalf("a reader above its state: %v", err)
	}
	where := map[string]string{}
	for _, f := range rt.Functions() {
		where[f.ID] = f.Flowspace
	}
	if where["cms#1"] != "user" || where["probe#1"] != "user" {
		t.Errorf("placed %v; want cms#1 raised to the reader's flowspace, user", where)
	}
}

// Functions keyed alike take one hash per packet from the flowspace
// (flowkey.Keyed); the records, the states and what a reader sees are those
// of each function hashing its packets itself, whatever the batch sizes.
func TestSharedKeysEqualPerFunction(t *testing.T) {
	pkts := genTrace(gen.Config{Seed: 3, Packets: 40000, Flows: 3000, IPv6: 0.3})
	exprs := []string{
		`(bpf,"tcp") > (cms) > (hll) > (pcsa,report=1) > (export,format=jsonl,file=OUT)`,
		`(bpf,"tcp") > [(cms,report=5) | (hll,window=1ms,report=1)] > (export,format=jsonl,file=OUT)`,
		`(cms,key=srcip/24,window=1ms,report=4) > (export,format=jsonl,file=OUT)`,
		// keyed alike written in another order; keyed apart (srcip/32 keeps 32 bits of IPv6)
		`(cms,key="dstport,srcport,dstip,srcip,proto") > (pcsa,key=5tuple) > (bloom,key=srcip,pass=new) > (hll,key=srcip/32,report=1) > (export,format=jsonl,file=OUT)`,
		`(bloom,key=5tuple,pass=new) > (cms,key=5tuple,value=bytes) > [(counter,key=proto,report=3) | (cms,key=5tuple,report=3)] > (export,format=jsonl,file=OUT)`,
		`(bloom,key=srcmac,bits=4K,counting=true) > (cms,key=vlan,report=2) > (export,format=jsonl,file=OUT)`,
	}
	for _, e := range exprs {
		for _, seed := range []uint64{0, 7} {
			var refProbe, gotProbe []float64
			cfg := func(probed *[]float64, perFunction bool) flowgraph.Config {
				return flowgraph.Config{Registry: testRegistry(t, pkts, seed, probed),
					Hierarchy: user.New(user.Options{PerFunctionKeys: perFunction})}
			}
			ref, refStates := runIn(t, cfg(&refProbe, true), `(replay) > `+e)
			got, gotStates := runIn(t, cfg(&gotProbe, false), `(replay) > `+e)
			if len(ref) == 0 {
				t.Fatalf("%s: no records", e)
			}
			if d := diff(ref, got); d != "" {
				t.Errorf("%s (batches of seed %d): shared keys give other records: %s", e, seed, d)
			}
			for i := range refStates { // all but the export's file
				refStates[i].Params, gotStates[i].Params = nil, nil
			}
			if !reflect.DeepEqual(refStates, gotStates) {
				t.Errorf("%s (batches of seed %d): shared keys give other states:\n%+v\n%+v", e, seed, refStates, gotStates)
			}
		}
	}
	// A reader of a keyed function on the route (packets carried one at a time).
	var refProbe, gotProbe []float64
	e := `(replay) > nb:(cms,key=srcip,value=bytes) > (hll,key=srcip) > (probe,read=nb.min)`
	for _, c := range []struct {
		probed      *[]float64
		perFunction bool
	}{{&refProbe, true}, {&gotProbe, false}} {
		runIn(t, flowgraph.Config{Registry: testRegistry(t, pkts, 5, c.probed),
			Hierarchy: user.New(user.Options{PerFunctionKeys: c.perFunction})}, e)
	}
	if len(refProbe) != len(pkts) || !slices.Equal(refProbe, gotProbe) {
		t.Errorf("%s: the reader sees other values with shared keys (%d and %d values)", e, len(refProbe), len(gotProbe))
	}
}

// A cms adds with plain writes until a reader of its counters exists (its
// switch to atomic adds is checked under -race in functions/sketch). Two
// sources carried by two goroutines through a cms and a reader of it: the
// reader sees every packet counted, and the total is that of both.
func TestReaderOfConcurrentWriter(t *testing.T) {
	pkts := genTrace(gen.Config{Seed: 4, Packets: 20000, Flows: 500})
	var probed []float64
	reg := testRegistry(t, pkts, 3, &probed)
	err := reg.Register(&functions.Class{Name: "replay2", Summary: "the trace again, from another goroutine",
		Validate: func(ctx *functions.Context) error { ctx.LinkType = functions.LinkEthernet; return nil },
		NewSource: func(*functions.Context) (functions.Source, error) {
			return &replay{pkts: pkts, rng: 11}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	_, states := run(t, reg, `[(replay) | (replay2)] > (bpf,"ip or ip6") > nb:(cms,key=srcip) > (probe,read=nb.min)`)
	cms := states[3]
	if cms.Class != "cms" || cms.In < uint64(len(pkts)) || len(probed) != int(cms.In) {
		t.Fatalf("the reader saw %d packets, %s %d", len(probed), cms.ID, cms.In)
	}
	for _, v := range probed {
		if v < 1 {
			t.Fatalf("an estimate of %v after the packet was counted", v)
		}
	}
	if total := cms.State["total"]; total != float64(cms.In) {
		t.Errorf("cms total %v, want %d", total, cms.In)
	}
}
