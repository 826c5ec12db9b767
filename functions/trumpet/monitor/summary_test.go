package monitor_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/trumpet/event"
	"github.com/ffpf-go/ffpf/functions/trumpet/internal/oracle"
	"github.com/ffpf-go/ffpf/functions/trumpet/monitor"
)

// summaryEvents read only what summaries give: count(), and every
// aggregate of volume, ttl and ecn, at 5-tuple and coarser granularities,
// over one and several epochs.
var summaryEvents = []string{
	"heavy: dstip=10.0.128.0/24; sum(volume) > 12KB; 5-tuple; 10ms",
	"spike: dstip=10.0.128.0/24, dstport=80; sum(volume) > 30KB; dstip/24; 10ms",
	"deps: srcip=10.0.128.0/20; sum(volume) > 60KB; dstip/24,srcip/24; 50ms",
	"avgvol: *; avg(volume) > 600; 5-tuple; 20ms",
	"sdvol: proto=udp; stddev(volume) > 300; srcip,dstip; 30ms",
	"minmax: *; min(volume) == 0 or max(volume) > 1400; srcip/24,proto; 10ms",
	"ttl: *; max(ttl) > 60 and min(ttl) < 70 and avg(ttl) >= 1; 5-tuple; 10ms",
	"sdttl: *; stddev(ttl) >= 0 and count() > 3; dstip/16; 20ms",
	"marks: dstip=10.0.128.0/24, proto=tcp | srcip=10.0.128.0/24, proto=tcp; sum(ecn) >= 1 and max(ttl) > 60; 5-tuple; 20ms",
	"ecn: proto=tcp; avg(ecn) > 0.01 or max(ecn) == 1 or min(ecn) == 1 or stddev(ecn) > 0.1; srcip/24; 20ms",
	"ports: proto=udp, dstport=80-85; count() > 8; dstport,proto; 10ms",
	"count: *; count() >= 1; 5-tuple; 10ms",
	"v6: dstip=2001:db8::/32; sum(volume) + count() > 0; srcip/48; 10ms",
}

// summarised feeds the trace to a monitor as the eBPF flowspace's Go half
// does: per epoch, each flow's summary (computed here from the packets as
// Parse reads them), in the order of the flows' first packets in the
// epoch, then the epoch's end; epochs without packets are passed over as
// Process passes them. The last epoch is not ended: the input did not see
// its end.
func summarised(t *testing.T, events []event.Event, trace []oracle.Packet) (map[string]float64, *monitor.Monitor) {
	t.Helper()
	m, out := recorded(t, monitor.Config{LinkType: functions.LinkEthernet, Epoch: epoch, Flows: 4096, Buckets: 4096, Words: 32,
		BurstGap: burstGap, BurstLen: burstLen}, events)
	type flowSum struct {
		key   monitor.Key
		first int64
		s     monitor.Summary
	}
	var flows []*flowSum
	byKey := map[monitor.Key]*flowSum{}
	cur := int64(-1)
	end := func(e int64) {
		if m.Deadline() <= e*epoch {
			m.Tick(e * epoch)
		}
		m.Flush(e * epoch)
		slices.SortFunc(flows, func(a, b *flowSum) int { return int(a.first - b.first) })
		for _, f := range flows {
			m.Summarise(&f.key, &f.s)
		}
		m.Flush((e + 1) * epoch)
		flows, byKey = flows[:0], map[monitor.Key]*flowSum{}
	}
	var p monitor.Packet
	for _, pk := range trace {
		e := pk.TS / epoch
		if e != cur && cur >= 0 && len(flows) > 0 {
			end(cur)
		}
		cur = e
		if !monitor.Parse(functions.LinkEthernet, pk.Data, pk.TS, uint32(len(pk.Data)), &p) {
			continue
		}
		f := byKey[p.Key]
		if f == nil {
			f = &flowSum{key: p.Key, first: pk.TS}
			byKey[p.Key] = f
			flows = append(flows, f)
		}
		f.s.Add(&p)
	}
	// The last epoch drained and ended, as the eBPF flowspace drains it at
	// the end of a run: End reports the intervals it did not end.
	end(cur)
	m.End(trace[len(trace)-1].TS)
	return out, m
}

// TestSummariesReportAsPackets: summaries fed through Summarise give
// report for report what the packets fed through Process give, for every
// summarisable aggregate, and the oracle agrees.
func TestSummariesReportAsPackets(t *testing.T) {
	var events []event.Event
	for _, l := range summaryEvents {
		ev, err := event.ParseLine(l)
		if err != nil {
			t.Fatal(err)
		}
		if err := monitor.Summarisable(&ev); err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
	}
	trace := oracle.Trace(1)
	want, _ := run(t, events, trace, false)
	per := map[string]int{}
	for k := range want {
		per[strings.SplitN(k, "|", 2)[0]]++
	}
	for _, e := range events {
		if per[e.Name] == 0 {
			t.Errorf("event %s is never reported on the trace: the test would not see it wrong", e.Name)
		}
	}
	t.Logf("reports per event: %v", per)
	compare(t, "oracle", want, oracle.Evaluate(ocfg, events, trace))
	got, m := summarised(t, events, trace)
	compare(t, "summaries", got, want)
	if st := m.Stats; st.Overflow != 0 || st.Unmatched != 0 || st.BucketFull != 0 || st.Packets == 0 {
		t.Errorf("stats %+v", st)
	}
	// A summary of no packet adds nothing.
	var k monitor.Key
	st, n := m.Stats, m.Flows()
	m.Summarise(&k, &monitor.Summary{})
	if m.Stats != st || m.Flows() != n {
		t.Errorf("a summary of no packet changed the monitor: %+v, %d flows; before %+v, %d", m.Stats, m.Flows(), st, n)
	}
}

// TestSummarisable: events that read per-packet order, timing or TCP
// state are refused, naming the event and the variable.
func TestSummarisable(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"a: *; sum(volume) > 1 and count() > 2 and max(ttl) > 3 and avg(ecn) > 0; 5-tuple; 10ms", ""},
		{"b: *; sum(is_lost) > 0; 5-tuple; 10ms", "event b reads is_lost"},
		{"c: *; avg(rtt) > 1ms; 5-tuple; 10ms", "event c reads rtt"},
		{"d: *; max(rwnd) > 0; 5-tuple; 10ms", "event d reads rwnd"},
		{"e: *; sum(is_burst) > 0; 5-tuple; 10ms", "event e reads is_burst"},
		{"f: *; sum(ecn & is_burst) > 0; 5-tuple; 10ms", "event f reads ecn & is_burst"},
		{"g: proto=tcp; seq - seq_lastepoch > 5; 5-tuple; 10ms", "event g reads seq"},
		{"h: proto=tcp; ack_lastepoch > 5; 5-tuple; 10ms", "event h reads ack_lastepoch"},
		{"i: proto=tcp; max(dup) > 5; 5-tuple; 10ms", "event i reads dup"},
	} {
		ev, err := event.ParseLine(tc.line)
		if err != nil {
			t.Fatal(err)
		}
		err = monitor.Summarisable(&ev)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.line, err, tc.want)
		}
	}
}
