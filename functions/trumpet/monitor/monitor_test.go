package monitor_test

import (
	"fmt"
	"math"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/trumpet/event"
	"github.com/ffpf-go/ffpf/functions/trumpet/monitor"
)

func agg(f, v string) event.Expr                { return event.Agg{Func: f, Var: v} }
func num(x float64) event.Expr                  { return event.Num(x) }
func bin(op string, l, r event.Expr) event.Expr { return event.Binary{Op: op, L: l, R: r} }

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func filter(src, dst string, proto int, dport event.PortRange) event.Filter {
	f := event.Filter{SrcPort: event.AnyPort, DstPort: dport, Proto: proto}
	if src != "" {
		f.SrcIP = pfx(src)
	}
	if dst != "" {
		f.DstIP = pfx(dst)
	}
	return f
}

var any = event.AnyPort

// table2 is Table 2's six events with thresholds scaled to the test trace
// (epoch 10ms; the last event's 1 s interval scaled to 50 ms), and events
// that read the variables Table 2 does not (rtt, ecn, rwnd, ttl, a port
// range, IPv6).
func table2() []event.Event {
	const ms = time.Millisecond
	return []event.Event{
		{Name: "heavy", Filters: []event.Filter{filter("", "10.0.128.0/24", -1, any)},
			Predicate: bin(">", agg("sum", "volume"), num(12000)), Interval: 10 * ms},
		{Name: "burstloss", Filters: []event.Filter{filter("10.0.128.0/24", "", -1, any)},
			Predicate: bin("and", bin(">", agg("avg", "is_lost"), num(0.02)), bin(">", agg("sum", "is_burst"), num(2))), Interval: 10 * ms},
		{Name: "congestion", Filters: []event.Filter{filter("", "", 6, any)},
			Predicate: bin(">", bin("-", num(1), bin("/", bin("+", bin("-", agg("max", "ack"), agg("min", "ack")), agg("max", "dup")),
				bin("+", bin("-", agg("max", "seq"), agg("min", "seq")), num(1)))), num(0.5)), Interval: 10 * ms},
		{Name: "spike", Filters: []event.Filter{filter("", "10.0.128.0/24", -1, event.PortRange{Lo: 80, Hi: 80})},
			Predicate: bin(">", agg("sum", "volume"), num(30000)), Granularity: []event.Field{{Name: "dstip", Bits: 24}}, Interval: 10 * ms},
		{Name: "reach", Filters: []event.Filter{filter("10.0.128.0/24", "10.20.93.0/24", -1, any)},
			Predicate: bin(">", agg("sum", "is_lost"), num(0)), Granularity: []event.Field{{Name: "srcip", Bits: 128}, {Name: "dstip", Bits: 128}}, Interval: 10 * ms},
		{Name: "deps", Filters: []event.Filter{filter("10.0.128.0/20", "", -1, any)},
			Predicate: bin(">", agg("sum", "volume"), num(60000)), Granularity: []event.Field{{Name: "dstip", Bits: 24}, {Name: "srcip", Bits: 24}}, Interval: 50 * ms},
		{Name: "slow", Filters: []event.Filter{filter("", "", 6, any)},
			Predicate:   bin("or", bin(">", agg("avg", "rtt"), num(150_000)), bin(">", agg("stddev", "rtt"), num(80_000))),
			Granularity: []event.Field{{Name: "srcip", Bits: 24}, {Name: "proto"}}, Interval: 20 * ms},
		{Name: "marks", Filters: []event.Filter{filter("", "10.0.128.0/24", 6, any), filter("10.0.128.0/24", "", 6, any)},
			Predicate: bin("and", bin(">=", agg("sum", "ecn"), num(1)), bin("and", bin("<", agg("min", "rwnd"), num(200_000)), bin(">", agg("max", "ttl"), num(60)))),
			Interval:  20 * ms},
		{Name: "ports", Filters: []event.Filter{filter("", "", 17, event.PortRange{Lo: 80, Hi: 85})},
			Predicate: bin(">", agg("count", ""), num(8)), Granularity: []event.Field{{Name: "dstport"}, {Name: "proto"}}, Interval: 10 * ms},
		{Name: "dups", Filters: []event.Filter{filter("", "", 6, any)},
			Predicate: bin(">=", agg("max", "dup"), num(1460)), Granularity: []event.Field{{Name: "srcip", Bits: 128}, {Name: "dstip", Bits: 128}}, Interval: 10 * ms},
		{Name: "v6", Filters: []event.Filter{filter("", "2001:db8::/32", 6, any)},
			Predicate: bin(">", agg("max", "rwnd"), num(0)), Granularity: []event.Field{{Name: "srcip", Bits: 48}}, Interval: 10 * ms},
	}
}

// keyString formats a report's key as the oracle does.
func keyString(t *monitor.Trigger, k *monitor.Key) string {
	var parts []string
	addr := func(hi, lo uint64, bits int) string {
		var a netip.Addr
		if k.Family() == 4 {
			a = netip.AddrFrom4([4]byte{byte(hi >> 56), byte(hi >> 48), byte(hi >> 40), byte(hi >> 32)})
		} else {
			var b [16]byte
			for i := range 8 {
				b[i], b[8+i] = byte(hi>>(56-8*i)), byte(lo>>(56-8*i))
			}
			a = netip.AddrFrom16(b)
		}
		return addrString(a, bits)
	}
	sp, dp, ok := k.Ports()
	for _, f := range t.Fields() {
		var v string
		switch f.Name {
		case "srcip":
			v = addr(k[1], k[2], f.Bits)
		case "dstip":
			v = addr(k[3], k[4], f.Bits)
		case "srcport", "dstport":
			v = "null"
			if ok {
				v = fmt.Sprint(sp)
				if f.Name == "dstport" {
					v = fmt.Sprint(dp)
				}
			}
		case "proto":
			v = protoString(int(k.Proto()))
		}
		parts = append(parts, f.Name+"="+v)
	}
	return strings.Join(parts, ",")
}

const (
	epoch    = int64(10 * time.Millisecond)
	burstGap = int64(5 * time.Microsecond)
	burstLen = 3
)

// run feeds the trace to a monitor; sliced runs the sweep between every
// few packets in steps of a few flows (a clock that moves one tick per
// read and a budget of one tick).
func run(t *testing.T, events []event.Event, trace []tpkt, sliced bool) (map[string]float64, *monitor.Monitor) {
	t.Helper()
	out := map[string]float64{}
	var clock int64
	cfg := monitor.Config{LinkType: functions.LinkEthernet, Epoch: epoch, Flows: 4096, Buckets: 4096, Words: 32,
		BurstGap: burstGap, BurstLen: burstLen}
	if sliced {
		cfg.Clock = func() int64 { clock++; return clock }
	}
	m, err := monitor.New(cfg, func(tr *monitor.Trigger, start int64, k *monitor.Key, v float64) {
		key := fmt.Sprintf("%s|%d|%s", tr.Event.Name, start, keyString(tr, k))
		if _, dup := out[key]; dup {
			t.Errorf("reported twice: %s", key)
		}
		out[key] = v
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if err := m.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	var last int64
	for i, p := range trace {
		for p.ts >= m.Deadline() {
			m.Tick(p.ts)
		}
		m.Process(p.data, p.ts, uint32(len(p.data)))
		last = p.ts
		if sliced && i%5 == 0 && m.Pending() {
			m.Sweep(1)
		}
	}
	m.Flush(last)
	return out, m
}

func compare(t *testing.T, name string, got, want map[string]float64) {
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
		same := gok && wok && (g == w || math.IsNaN(g) && math.IsNaN(w) || math.Abs(g-w) <= 1e-9*math.Max(math.Abs(g), math.Abs(w)))
		if !same {
			if bad++; bad <= 20 {
				t.Errorf("%s: %s: monitor %v (%v), oracle %v (%v)", name, k, g, gok, w, wok)
			}
		}
	}
	if bad > 20 {
		t.Errorf("%s: %d reports differ", name, bad)
	}
}

// TestTable2AgainstOracle: the six Table 2 events (and events reading the
// other variables) report, report for report, what a brute-force
// evaluation of the trace reports, whether the sweep runs at the epoch's
// end or in slices between packets.
func TestTable2AgainstOracle(t *testing.T) {
	trace := buildTrace(1)
	events := table2()
	want := oracle(oracleConfig{epoch: epoch, burstGap: burstGap, burstLen: burstLen}, events, trace)
	per := map[string]int{}
	for k := range want {
		per[strings.SplitN(k, "|", 2)[0]]++
	}
	for _, e := range events {
		if per[e.Name] == 0 {
			t.Errorf("event %s is never reported on the trace: the test would not see it wrong", e.Name)
		}
	}
	t.Logf("%d packets, oracle reports per event: %v", len(trace), per)
	for _, sliced := range []bool{false, true} {
		got, m := run(t, events, trace, sliced)
		compare(t, fmt.Sprintf("sliced=%v", sliced), got, want)
		st := m.Stats
		if st.Overflow != 0 || st.Unmatched != 0 || st.BucketFull != 0 || st.NoKey != 0 {
			t.Errorf("stats %+v: something was lost", st)
		}
		if sliced && st.Slices == 0 {
			t.Errorf("no sweep ran in slices")
		}
		t.Logf("sliced=%v: %+v", sliced, st)
	}
	_ = flowkey.MaxWords
}
