package counters

import (
	"slices"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/gen"
	"github.com/ffpf-go/ffpf/internal/windowtest"
)

// A keyed counter's window close walks and clears the entries the window
// inserted (measure.Touched), not the table: its reports are, window for
// window, those of walking and clearing the whole table (as in an eBPF
// flowspace, untracked), with windows of a few packets and of more keys
// than the list keeps, and ties among the K largest broken alike.
func TestWindowCloseTracked(t *testing.T) {
	c, _ := functions.Default.Lookup("counter")
	for _, window := range []string{"2", "200"} {
		p, err := c.Bind([]functions.Arg{
			{Key: "key", Value: functions.Raw{Kind: functions.RawWord, Text: "dstport"}},
			{Key: "window", Value: functions.Raw{Kind: functions.RawNumber, Text: window, Unit: "us"}},
			{Key: "report", Value: functions.Raw{Kind: functions.RawNumber, Text: "3"}},
			{Key: "size", Value: functions.Raw{Kind: functions.RawNumber, Text: "300"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		var got [2][]string
		for i, target := range []functions.Target{functions.TargetUser, functions.TargetXDP} {
			fn, err := NewCounter(&functions.Context{ID: "counter#1", Params: p, LinkType: functions.LinkEthernet, Target: target})
			if err != nil {
				t.Fatal(err)
			}
			tr := fn.tab.(*probeTable).touched
			if on := tr != nil && !tr.All(); on != (target == functions.TargetUser) {
				t.Fatalf("%s: tracked %v", target, on)
			}
			got[i] = windowtest.Feed(t, fn, gen.New(gen.Config{Seed: 5, Packets: 6000, Flows: 3000}))
		}
		if len(got[0]) < 20 || !slices.Equal(got[0], got[1]) {
			t.Errorf("window=%sus: %d records tracked, %d untracked, or different records", window, len(got[0]), len(got[1]))
		}
	}
}
