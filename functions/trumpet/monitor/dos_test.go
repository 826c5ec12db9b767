package monitor_test

import (
	"strconv"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/trumpet/event"
	"github.com/ffpf-go/ffpf/functions/trumpet/internal/oracle"
	"github.com/ffpf-go/ffpf/functions/trumpet/monitor"
)

func runCfg(t *testing.T, cfg monitor.Config, events []event.Event, trace []oracle.Packet) (map[string]float64, *monitor.Monitor) {
	t.Helper()
	out := map[string]float64{}
	var clock int64
	cfg.Clock = func() int64 { clock++; return clock }
	m, err := monitor.New(cfg, func(tr *monitor.Trigger, start int64, k *monitor.Key, v float64) {
		out[tr.Event.Name+"|"+strconv.FormatInt(start, 10)+"|"+keyString(tr, k)] = v
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if err := m.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	peak := 0
	for i, p := range trace {
		for p.TS >= m.Deadline() {
			m.Tick(p.TS)
		}
		m.Process(p.Data, p.TS, uint32(len(p.Data)))
		peak = max(peak, m.Flows())
		if i%5 == 0 && m.Pending() {
			m.Sweep(1)
		}
	}
	m.End(trace[len(trace)-1].TS)
	t.Logf("peak flows %d, %+v", peak, m.Stats)
	return out, m
}

// TestDoSFlood: a flood of new 5-tuples fills a small flow table and
// the volume events miss flows (counted as overflow); with the filter
// table on, the flood is held back (counted), the flow table holds the
// real flows, and the volume events report what the oracle reports on the
// trace without the flood; no sweep is late.
func TestDoSFlood(t *testing.T) {
	trace := oracle.Trace(2)
	var events []event.Event
	for _, e := range table2() {
		switch e.Name {
		case "heavy", "spike", "deps", "ports": // volumes, and counts of UDP packets larger than the threshold
			events = append(events, e)
		}
	}
	want := oracle.Evaluate(ocfg, events, trace)
	flooded := oracle.Flood(trace, 60000, 3)
	cfg := monitor.Config{LinkType: functions.LinkEthernet, Epoch: epoch, Flows: 2048, Buckets: 4096, Words: 32,
		BurstGap: burstGap, BurstLen: burstLen}

	got, m := runCfg(t, cfg, events, flooded)
	if m.Stats.Overflow == 0 {
		t.Fatalf("the flood did not fill the flow table: the test shows nothing")
	}
	if len(got) >= len(want) {
		t.Errorf("without the filter table the flood cost no report (%d, oracle %d): the test shows nothing", len(got), len(want))
	}

	cfg.DoS = 200
	got, m = runCfg(t, cfg, events, flooded)
	compare(t, "dos=200", got, want)
	st := m.Stats
	if st.Overflow != 0 {
		t.Errorf("flow table overflow %d with the filter table on", st.Overflow)
	}
	if st.DoSFiltered < 60000*9/10 {
		t.Errorf("filtered %d packets of a 60,000-packet flood", st.DoSFiltered)
	}
	if st.Packets != uint64(len(flooded)) {
		t.Errorf("read %d of %d packets", st.Packets, len(flooded))
	}
	if st.Late != 0 {
		t.Errorf("%d sweeps late under the flood", st.Late)
	}
}
