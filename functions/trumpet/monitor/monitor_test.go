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
	"github.com/ffpf-go/ffpf/functions/trumpet/event"
	"github.com/ffpf-go/ffpf/functions/trumpet/internal/oracle"
	"github.com/ffpf-go/ffpf/functions/trumpet/monitor"
)

// table2 is Table 2's six events as the paper writes them, thresholds
// scaled to the test trace (epoch 10ms; the last event's 1 s interval
// scaled to 50 ms), and events that read what Table 2 does not (rtt, ecn,
// rwnd, ttl, the other aggregates, flag products, state over several
// epochs, a port range, an OR of filters, IPv6).
var table2Lines = []string{
	"heavy: dstip=10.0.128.0/24; sum(volume) > 12KB; 5-tuple; 10ms",
	"burstloss: srcip=10.0.128.0/24; sum(is_lost & is_burst) > 10%; 5-tuple; 10ms",
	"congestion: proto=tcp; 1 - (ack - ack_lastepoch + dup) / (seq_lastepoch - ack_lastepoch) > 0.5; 5-tuple; 10ms",
	"spike: dstip=10.0.128.0/24, dstport=80; sum(volume) > 30KB; dstip/24; 10ms",
	"reach: srcip=10.0.128.0/24, dstip=10.20.93.0/24; sum(is_lost) > 0; srcip,dstip; 10ms",
	"deps: srcip=10.0.128.0/20; sum(volume) > 60KB; dstip/24,srcip/24; 50ms",
	"slow: proto=tcp; avg(rtt) > 150us or stddev(rtt) > 80us; srcip/24,proto; 20ms",
	"marks: dstip=10.0.128.0/24, proto=tcp | srcip=10.0.128.0/24, proto=tcp; sum(ecn) >= 1 and min(rwnd) < 200000 and max(ttl) > 60; 5-tuple; 20ms",
	"ports: proto=udp, dstport=80-85; count() > 8; dstport,proto; 10ms",
	"dups: proto=tcp; max(dup) >= 1460; srcip,dstip; 10ms",
	"v6: dstip=2001:db8::/32, proto=tcp; max(rwnd) > 0; srcip/48; 10ms",
	"flags: proto=tcp; avg(ecn & is_burst) > 0.2 or max(is_lost & ecn) == 1 or stddev(is_burst) > 0.45 or min(ecn) == 1; srcip/24; 20ms",
	"state: proto=tcp; seq - seq_lastepoch > 5000 and dup_lastepoch >= 0 and avg(seq) > 0; 5-tuple; 20ms",
}

func table2() []event.Event { return parseEvents(table2Lines...) }

// parseEvents parses events written one a line.
func parseEvents(lines ...string) []event.Event {
	var evs []event.Event
	for _, l := range lines {
		ev, err := event.ParseLine(l)
		if err != nil {
			panic(err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// oracleReports is what a brute-force evaluation of the trace reports for
// the events; an event it never reports is an error (a test would not see
// it wrong). It returns the reports per event too.
func oracleReports(t *testing.T, events []event.Event, trace []oracle.Packet) (map[string]float64, map[string]int) {
	t.Helper()
	want := oracle.Evaluate(ocfg, events, trace)
	per := map[string]int{}
	for k := range want {
		per[strings.SplitN(k, "|", 2)[0]]++
	}
	for _, e := range events {
		if per[e.Name] == 0 {
			t.Errorf("event %s is never reported on the trace: the test would not see it wrong", e.Name)
		}
	}
	return want, per
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
		return oracle.AddrString(a, bits)
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
			v = oracle.ProtoString(int(k.Proto()))
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

var ocfg = oracle.Config{Epoch: epoch, BurstGap: burstGap, BurstLen: burstLen}

// run feeds the trace to a monitor; sliced runs the sweep between every
// few packets in steps of a few flows (a clock that moves one tick per
// read and a budget of one tick).
func run(t *testing.T, events []event.Event, trace []oracle.Packet, sliced bool) (map[string]float64, *monitor.Monitor) {
	return runMode(t, events, trace, sliced, false)
}

// recorded returns a monitor of cfg with events installed, and the map
// its reports go to, by "event|start|key"; a bucket reported twice is an
// error.
func recorded(t *testing.T, cfg monitor.Config, events []event.Event) (*monitor.Monitor, map[string]float64) {
	t.Helper()
	out := map[string]float64{}
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
	return m, out
}

// runMode is run, with batch feeding the packets through ProcessBatch in
// batches of up to 150 packets that end at the epoch's end (the sweep
// slices between batches).
func runMode(t *testing.T, events []event.Event, trace []oracle.Packet, sliced, batch bool) (map[string]float64, *monitor.Monitor) {
	t.Helper()
	var clock int64
	cfg := monitor.Config{LinkType: functions.LinkEthernet, Epoch: epoch, Flows: 4096, Buckets: 4096, Words: 32,
		BurstGap: burstGap, BurstLen: burstLen}
	if sliced {
		cfg.Clock = func() int64 { clock++; return clock }
	}
	m, out := recorded(t, cfg, events)
	var last int64
	if batch {
		for i := 0; i < len(trace); {
			for trace[i].TS >= m.Deadline() {
				m.Tick(trace[i].TS)
			}
			j := i + 1
			for j < len(trace) && j-i < 150 && trace[j].TS < m.Deadline() {
				j++
			}
			b := trace[i:j]
			m.ProcessBatch(len(b), func(k int) ([]byte, int64, uint32) {
				return b[k].Data, b[k].TS, uint32(len(b[k].Data))
			})
			last, i = b[len(b)-1].TS, j
			if sliced && m.Pending() {
				m.Sweep(1)
			}
		}
		m.End(last)
		return out, m
	}
	for i, p := range trace {
		for p.TS >= m.Deadline() {
			m.Tick(p.TS)
		}
		m.Process(p.Data, p.TS, uint32(len(p.Data)))
		last = p.TS
		if sliced && i%5 == 0 && m.Pending() {
			m.Sweep(1)
		}
	}
	m.End(last)
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
	trace := oracle.Trace(1)
	events := table2()
	want, per := oracleReports(t, events, trace)
	t.Logf("%d packets, oracle reports per event: %v", len(trace), per)
	for _, c := range []struct{ sliced, batch bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		sliced := c.sliced
		got, m := runMode(t, events, trace, sliced, c.batch)
		compare(t, fmt.Sprintf("sliced=%v batch=%v", sliced, c.batch), got, want)
		st := m.Stats
		if st.Overflow != 0 || st.Unmatched != 0 || st.BucketFull != 0 || st.NoKey != 0 {
			t.Errorf("stats %+v: something was lost", st)
		}
		if sliced && st.Slices == 0 {
			t.Errorf("no sweep ran in slices")
		}
		t.Logf("sliced=%v batch=%v: %+v", sliced, c.batch, st)
	}
}

// TestGateAgainstOracle: flows whose triggers are all fast tests of one
// unit ("count() > 3", ">= 3", ">= 5": thresholds that counts meet
// exactly) are skipped by the sweep when their value is below the lowest
// threshold; flows that also match a test of another unit, or another
// operator, have no gate. Either way each report is the oracle's, in the
// plain sweep (every pair tested) as in the gated one, and the gated one
// reads fewer flows' triggers: removing a trigger leaves gates lower,
// never wrong.
func TestGateAgainstOracle(t *testing.T) {
	trace := oracle.Trace(3)
	events := parseEvents(
		"gt3: dstip=10.0.128.0/24; count() > 3; 5-tuple; 10ms",
		"ge3: dstip=10.0.128.0/24; count() >= 3; 5-tuple; 10ms",
		"ge5: dstip=10.0.128.0/24; count() >= 5; 5-tuple; 10ms",
		"vol: srcip=10.0.128.0/24; sum(volume) > 4KB; 5-tuple; 10ms",
		"few: srcip=10.0.128.0/24; count() < 2; 5-tuple; 10ms",
		"gone: dstip=10.0.128.0/24; count() > 0; 5-tuple; 10ms",
	)
	want, _ := oracleReports(t, events[:len(events)-1], trace)
	if t.Failed() {
		return
	}
	for _, plain := range []bool{false, true} {
		cfg := monitor.Config{LinkType: functions.LinkEthernet, Epoch: epoch, Flows: 4096, Buckets: 4096, Words: 32,
			BurstGap: burstGap, BurstLen: burstLen, Plain: plain}
		m, got := recorded(t, cfg, events)
		// gone joins the flows and leaves before the first epoch ends: its
		// count() > 0 would hold for every flow, and the gates it lowered
		// stay lower.
		removed := false
		for _, p := range trace {
			for p.TS >= m.Deadline() {
				m.Tick(p.TS)
			}
			m.Process(p.Data, p.TS, uint32(len(p.Data)))
			if !removed && m.Stats.Packets == 50 {
				if err := m.Remove("gone"); err != nil {
					t.Fatal(err)
				}
				removed = true
			}
		}
		m.End(trace[len(trace)-1].TS)
		compare(t, fmt.Sprintf("plain=%v", plain), got, want)
	}
}
