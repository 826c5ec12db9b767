package trumpet_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/ffpf-go/ffpf/flowgraph"
	_ "github.com/ffpf-go/ffpf/functions/builtin"
	"github.com/ffpf-go/ffpf/functions/trumpet/event"
	"github.com/ffpf-go/ffpf/functions/trumpet/internal/oracle"
	"github.com/ffpf-go/ffpf/internal/graphtest"
)

func writePcap(t *testing.T, path string, trace []oracle.Packet) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriterNanos(f)
	if err := w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	for _, p := range trace {
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, p.TS), CaptureLength: len(p.Data), Length: len(p.Data)}
		if err := w.WritePacket(ci, p.Data); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// readReports reads export's JSON lines as the oracle writes reports:
// "event|start|field=value,..." with the key's fields in the event's
// granularity order.
func readReports(t *testing.T, path string, events []event.Event) map[string]float64 {
	t.Helper()
	order := map[string][]string{}
	for _, e := range events {
		var names []string
		for _, g := range e.Granularity {
			names = append(names, g.Name)
		}
		if len(names) == 0 {
			names = []string{"srcip", "dstip", "srcport", "dstport", "proto"}
		}
		order[e.Name] = names
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct {
			Function string                     `json:"function"`
			TS       int64                      `json:"ts"`
			Kind     string                     `json:"kind"`
			Event    string                     `json:"event"`
			Key      map[string]json.RawMessage `json:"key"`
			Value    *float64                   `json:"value"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", sc.Text(), err)
		}
		if !strings.HasPrefix(r.Function, "trumpet#") || r.Kind != "event" {
			t.Fatalf("record %s", sc.Text())
		}
		var parts []string
		for _, n := range order[r.Event] {
			raw, ok := r.Key[n]
			if !ok {
				t.Fatalf("record %s lacks key field %s", sc.Text(), n)
			}
			var v any
			json.Unmarshal(raw, &v)
			s := fmt.Sprint(v)
			if v == nil {
				s = "null"
			}
			parts = append(parts, n+"="+s)
		}
		if len(r.Key) != len(order[r.Event]) {
			t.Fatalf("record %s: key has other fields", sc.Text())
		}
		v := math.NaN()
		if r.Value != nil {
			v = *r.Value
		}
		out[fmt.Sprintf("%s|%d|%s", r.Event, r.TS, strings.Join(parts, ","))] = v
	}
	return out
}

func same(a, b float64) bool {
	return a == b || math.IsNaN(a) && math.IsNaN(b) || math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}

func compare(t *testing.T, got, want map[string]float64) {
	t.Helper()
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	bad := 0
	for _, k := range keys {
		g, gok := got[k]
		w, wok := want[k]
		if !gok || !wok || !same(g, w) {
			if bad++; bad <= 10 {
				t.Errorf("%s: function %v (%v), oracle %v (%v)", k, g, gok, w, wok)
			}
		}
	}
	if len(want) == 0 {
		t.Error("the oracle reports nothing")
	}
}

var lines = []string{
	"heavy: dstip=10.0.128.0/24; sum(volume) > 12KB; 5-tuple; 10ms",
	"burstloss: srcip=10.0.128.0/24; sum(is_lost & is_burst) > 10%; 5-tuple; 10ms",
	"congestion: proto=tcp; 1 - (ack - ack_lastepoch + dup) / (seq_lastepoch - ack_lastepoch) > 0.5; 5-tuple; 10ms",
	"spike: dstip=10.0.128.0/24, dstport=80; sum(volume) > 30KB; dstip/24; 10ms",
	"reach: srcip=10.0.128.0/24, dstip=10.20.93.0/24; sum(is_lost) > 0; srcip,dstip; 10ms",
	"deps: srcip=10.0.128.0/20; sum(volume) > 60KB; dstip/24,srcip/24; 50ms",
	"v6: dstip=2001:db8::/32, proto=tcp; max(rtt) > 0 or max(rwnd) > 0; srcip/48,proto; 10ms",
}

// TestRecords runs the class on a capture file of the test trace with
// export,format=jsonl: every record is one of the oracle's reports, with
// its key written as the contract says (addresses, prefixes with their
// length, ports, proto by name), and none is missing.
func TestRecords(t *testing.T) {
	dir := t.TempDir()
	trace := oracle.Trace(4)
	pcapPath, evPath, out := filepath.Join(dir, "t.pcap"), filepath.Join(dir, "events.txt"), filepath.Join(dir, "events.jsonl")
	writePcap(t, pcapPath, trace)
	if err := os.WriteFile(evPath, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	events, err := event.ParseFile(evPath)
	if err != nil {
		t.Fatal(err)
	}
	want := oracle.Evaluate(oracle.Config{Epoch: int64(10 * time.Millisecond), BurstGap: 5000, BurstLen: 3}, events, trace)
	rt := flowgraph.New(flowgraph.Config{})
	defer rt.Close()
	_, err = rt.Populate(fmt.Sprintf(`(pcap,file=%q) > t:(trumpet,events=%q,burstlen=3,words=32,flows=8K) > (export,format=jsonl,file=%q)`,
		pcapPath, evPath, out), flowgraph.RequestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Activate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	rt.Close()
	got := readReports(t, out, events)
	compare(t, got, want)
	t.Logf("%d records", len(got))
}

// TestHandlers adds, lists and removes events through the request: a
// bad event is refused with its reason, and the records are those of the
// events installed.
func TestHandlers(t *testing.T) {
	dir := t.TempDir()
	trace := oracle.Trace(5)
	pcapPath, out := filepath.Join(dir, "t.pcap"), filepath.Join(dir, "events.jsonl")
	writePcap(t, pcapPath, trace)
	rt := flowgraph.New(flowgraph.Config{})
	defer rt.Close()
	req, err := rt.Populate(fmt.Sprintf(`(pcap,file=%q) > t:(trumpet,burstlen=3) > (export,format=jsonl,file=%q)`, pcapPath, out),
		flowgraph.RequestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	for _, l := range lines[:2] {
		r, err := req.Call("t", "add", l)
		if err != nil {
			t.Fatalf("add %q: %v", l, err)
		}
		if s, _ := r.(string); !strings.HasPrefix(s, strings.SplitN(l, ":", 2)[0]+":") {
			t.Errorf("add returned %v", r)
		}
	}
	if _, err := req.Call("t", "add", "bad: *; sum(volume) > 1; 5-tuple; 15ms"); err == nil || !strings.Contains(err.Error(), "multiple") {
		t.Errorf("an interval that is not a multiple of the epoch: %v", err)
	}
	if _, err := req.Call("t", "add", lines[0]); err == nil {
		t.Error("an event added twice")
	}
	if _, err := req.Call("t", "remove", "heavy"); err != nil {
		t.Fatal(err)
	}
	if _, err := req.Call("t", "remove", "heavy"); err == nil {
		t.Error("an event removed twice")
	}
	l, err := req.Call("t", "list", "")
	if err != nil {
		t.Fatal(err)
	}
	if ls, _ := l.([]string); len(ls) != 1 || !strings.HasPrefix(ls[0], "burstloss:") {
		t.Fatalf("list = %v", l)
	}
	if err := rt.Activate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	rt.Close()
	ev, _ := event.ParseLine(lines[1])
	want := oracle.Evaluate(oracle.Config{Epoch: int64(10 * time.Millisecond), BurstGap: 5000, BurstLen: 3}, []event.Event{ev}, trace)
	compare(t, readReports(t, out, []event.Event{ev}), want)
}

// TestBadEvents: a bad events file fails populate with file:line and one
// sentence.
func TestBadEvents(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ src, want string }{
		{"ok: *; sum(volume) > 1; 5-tuple; 10ms\nbad: *; sum(volum) > 1; 5-tuple; 10ms\n", "events.txt:2:"},
		{"odd: *; sum(volume) > 1; 5-tuple; 15ms\n", "events.txt:1:"},
		{"wide: *; stddev(volume) + stddev(rwnd) + stddev(ttl) + stddev(rtt) + stddev(seq) + stddev(ack) > 1; 5-tuple; 10ms\n", "events.txt:1: event wide needs 18 summary words"},
	} {
		p := filepath.Join(dir, "events.txt")
		os.WriteFile(p, []byte(c.src), 0o644)
		rt := flowgraph.New(flowgraph.Config{})
		_, err := rt.Populate(fmt.Sprintf(`(gen) > (trumpet,events=%q)`, p), flowgraph.RequestOptions{})
		rt.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.src, err, c.want)
		}
	}
}

// TestTable2File: examples/trumpet/table2.yaml, Table 2 as the paper
// writes it, is a valid events file.
func TestTable2File(t *testing.T) {
	evs, err := event.ParseFile("../../examples/trumpet/table2.yaml")
	if err != nil || len(evs) != 6 {
		t.Fatalf("%d events, %v", len(evs), err)
	}
	rt := flowgraph.New(flowgraph.Config{Limit: 1000})
	defer rt.Close()
	if _, err := rt.Populate(`(gen) > (trumpet,events="../../examples/trumpet/table2.yaml")`, flowgraph.RequestOptions{}); err != nil {
		t.Fatal(err)
	}
}

// readPcap reads a capture file as the oracle's trace.
func readPcap(t *testing.T, path string) []oracle.Packet {
	data, ts := graphtest.ReadPcap(t, path)
	trace := make([]oracle.Packet, len(data))
	for i := range data {
		trace[i] = oracle.Packet{Data: data[i], TS: ts[i]}
	}
	return trace
}

// TestLastInterval: at the end of a capture the last interval of each
// event, which the capture ends before its end, is swept and reported on
// the packets it saw, as the brute force reports it: the heavy hitters
// of the last 10 ms of a 100 ms trace, and a 1 s event on the whole of
// it. Every epoch is swept, the last one too.
func TestLastInterval(t *testing.T) {
	dir := t.TempDir()
	pcapPath, out := filepath.Join(dir, "t.pcap"), filepath.Join(dir, "events.jsonl")
	graphtest.Run(t, fmt.Sprintf(`(gen,packets=100K,flows=1000,seed=3) > (export,file=%q)`, pcapPath))
	trace := readPcap(t, pcapPath)
	first, last := trace[0].TS, trace[len(trace)-1].TS
	const ms = int64(time.Millisecond)
	if first%(10*ms) != 0 || last-first < 99*ms || last-first >= 100*ms {
		t.Fatalf("the trace runs from %d to %d: the test wants 10 intervals of 10 ms, the last cut short", first, last)
	}
	var events []event.Event
	var lines []string
	for _, l := range []string{
		"heavy: dstip=10.0.0.0/8; sum(volume) > 20KB; 5-tuple; 10ms",
		"all: *; count() > 0; proto; 1s",
		"wide: *; sum(volume) > 100KB; dstip/8; 30ms",
	} {
		ev, err := event.ParseLine(l)
		if err != nil {
			t.Fatal(err)
		}
		events, lines = append(events, ev), append(lines, l)
	}
	evPath := filepath.Join(dir, "events.txt")
	if err := os.WriteFile(evPath, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rt := graphtest.Run(t, fmt.Sprintf(`(pcap,file=%q) > t:(trumpet,events=%q) > (export,format=jsonl,file=%q)`, pcapPath, evPath, out))
	want := oracle.Evaluate(oracle.Config{Epoch: 10 * ms, BurstGap: 5000, BurstLen: 5}, events, trace)
	got := readReports(t, out, events)
	compare(t, got, want)
	// The last intervals, named: the test cannot pass on a brute force
	// that leaves them out too.
	lastStart := func(iv int64) int64 { return last / iv * iv }
	per := map[string]int{}
	for k := range got {
		name, rest, _ := strings.Cut(k, "|")
		var start int64
		fmt.Sscan(strings.SplitN(rest, "|", 2)[0], &start)
		if start == lastStart(map[string]int64{"heavy": 10 * ms, "all": 1000 * ms, "wide": 30 * ms}[name]) {
			per[name]++
		}
	}
	if per["heavy"] == 0 || per["all"] == 0 || per["wide"] == 0 {
		t.Errorf("reports of the last intervals %v: want heavy hitters of [90, 100) ms, the protocols of the 1 s event, the /8s of [90, 120) ms", per)
	}
	sweeps := any(nil)
	for _, f := range rt.Functions() {
		if f.Class == "trumpet" {
			sweeps = f.State["sweeps"]
		}
	}
	if sweeps != uint64(10) {
		t.Errorf("%v sweeps for 10 epochs", sweeps)
	}
	t.Logf("%d reports, of the last intervals %v", len(got), per)
}
