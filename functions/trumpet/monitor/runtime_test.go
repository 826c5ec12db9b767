package monitor_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/trumpet/internal/oracle"
	"github.com/ffpf-go/ffpf/functions/trumpet/monitor"
)

// TestAddRemoveWhileRunning: half way through the trace an event is
// added and another removed. The events left alone report exactly what
// they report without the change; the removed one reports nothing after
// its removal; the added one reports, from its first whole interval,
// exactly what the oracle reports.
func TestAddRemoveWhileRunning(t *testing.T) {
	trace := oracle.Trace(1)
	all := table2()
	want := oracle.Evaluate(ocfg, all, trace)
	byName := map[string]int{}
	for i, e := range all {
		byName[e.Name] = i
	}
	initial := all[:0:0]
	for _, e := range all {
		if e.Name != "slow" {
			initial = append(initial, e)
		}
	}
	got := map[string]float64{}
	var clock int64
	m, err := monitor.New(monitor.Config{LinkType: functions.LinkEthernet, Epoch: epoch, Flows: 4096, Buckets: 4096, Words: 32,
		BurstGap: burstGap, BurstLen: burstLen, Clock: func() int64 { clock++; return clock }},
		func(tr *monitor.Trigger, start int64, k *monitor.Key, v float64) {
			got[fmt.Sprintf("%s|%d|%s", tr.Event.Name, start, keyString(tr, k))] = v
		})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range initial {
		if err := m.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	var slowFrom, removedAt int64
	for i, p := range trace {
		for p.TS >= m.Deadline() {
			m.Tick(p.TS)
		}
		if i == len(trace)/2 {
			if err := m.Add(all[byName["slow"]]); err != nil {
				t.Fatal(err)
			}
			if err := m.Add(all[byName["heavy"]]); err == nil {
				t.Error("an event installed twice")
			}
			if err := m.Remove("congestion"); err != nil {
				t.Fatal(err)
			}
			if err := m.Remove("congestion"); err == nil {
				t.Error("an event removed twice")
			}
			ival := int64(all[byName["slow"]].Interval)
			slowFrom = (m.Epoch()*epoch/ival + 1) * ival
			removedAt = m.Epoch() * epoch
		}
		m.Process(p.Data, p.TS, uint32(len(p.Data)))
		if i%7 == 0 && m.Pending() {
			m.Sweep(1)
		}
	}
	m.End(trace[len(trace)-1].TS)

	expect := map[string]float64{}
	for k, v := range want {
		name, rest, _ := strings.Cut(k, "|")
		var start int64
		fmt.Sscan(strings.SplitN(rest, "|", 2)[0], &start)
		switch {
		case name == "slow" && start < slowFrom:
		case name == "congestion" && start >= removedAt-epoch:
			// the interval being swept when it was removed may or may not
			// have been reported; later ones are not
			if _, ok := got[k]; ok && start >= removedAt {
				t.Errorf("removed event reported %s", k)
			}
			delete(got, k)
		default:
			expect[k] = v
		}
	}
	compare(t, "add/remove", got, expect)
	n := 0
	for k := range got {
		if strings.HasPrefix(k, "slow|") {
			n++
		}
	}
	if n == 0 {
		t.Error("the event added at run time never reported")
	}
	if names := len(m.Events()); names != len(all)-1 {
		t.Errorf("%d events installed at the end", names)
	}
}
