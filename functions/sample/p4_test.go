package sample_test

import (
	"bytes"
	"math"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/gen"
	"github.com/ffpf-go/ffpf/functions/internal/p4test"
	_ "github.com/ffpf-go/ffpf/functions/sample"
)

// sample every=N on a switch passes the packets userspace passes and
// counts what it counts; rate=P passes each packet with probability P
// (the switch's generator, not Go's seeded one); seed= stays above the
// switch.
func TestP4SampleEqualsGo(t *testing.T) {
	ps := p4test.Trace(gen.Config{Seed: 12, Packets: 5000, Malformed: 0.1})
	for _, expr := range []string{"(sample,every=7)", "(sample,every=1)", "(sample,rate=1)"} {
		r := p4test.Run(t, p4test.Parse(t, expr), ps)
		r.SamePasses(t, ps)
		if got, want := r.P4.(functions.Stateful).MBuf().Bytes(), r.User.(functions.Stateful).MBuf().Bytes(); !bytes.Equal(got, want) {
			t.Errorf("%s: the switch's state % x, userspace's % x", expr, got, want)
		}
	}
	r := p4test.Run(t, p4test.Parse(t, "(sample,rate=0.3)"), ps)
	st := r.P4.(functions.Stateful).MBuf().Snapshot()
	seen, sampled := float64(st["seen"].(uint64)), float64(st["sampled"].(uint64))
	passed := 0
	for _, p := range r.PassP4 {
		if p {
			passed++
		}
	}
	if seen != 5000 || float64(passed) != sampled || math.Abs(sampled-0.3*seen) > 4*math.Sqrt(0.3*0.7*seen) {
		t.Errorf("rate=0.3: %v of %v sampled, %d passed", sampled, seen, passed)
	}
	if _, err := p4test.Parse(t, "(sample,rate=0.3,seed=5)").P4("f#1"); err == nil {
		t.Error("rate= with seed= runs on a switch")
	}
}
