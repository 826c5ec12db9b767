package kernel

import (
	"fmt"
	"math"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
)

// TestSampleRateInEBPF: sample with rate=P in eBPF (bpf_get_prandom_u32)
// passes each packet with probability P, as the Go function does with its
// seeded generator: on the same frames the sampled counts of both lie
// within 5 standard deviations of N·P (a chance of 6e-7 each of failing a
// correct implementation), and so close to each other; seen counts every
// packet, sampled those that passed; rate=0 and rate=1 are exact.
func TestSampleRateInEBPF(t *testing.T) {
	needRoot(t)
	frames := measureFrames(20000)
	n := float64(len(frames))
	c, _ := functions.Default.Lookup("sample")
	for _, rate := range []string{"0", "0.001", "0.01", "0.1", "0.5", "0.9", "1"} {
		t.Run(rate, func(t *testing.T) {
			params := bindArgs(t, c, "rate="+rate)
			ctx := &functions.Context{ID: "sample", Params: params, LinkType: functions.LinkEthernet, Snaplen: 262144}
			p := params.Float("rate")
			goState, goPassed := runGo(t, c, ctx, frames)
			bpfState, bpfPassed := runEBPF(t, c, ctx, frames)
			count := func(passed []bool) (k float64) {
				for _, x := range passed {
					if x {
						k++
					}
				}
				return k
			}
			sd := math.Sqrt(n * p * (1 - p))
			for _, x := range []struct {
				name   string
				passed []bool
				seen   uint64
				sample uint64
			}{
				{"Go", goPassed, goState.Load64(0), goState.Load64(8)},
				{"eBPF", bpfPassed, bpfState.Load64(0), bpfState.Load64(8)},
			} {
				k := count(x.passed)
				if math.Abs(k-n*p) > 5*sd {
					t.Errorf("%s passes %.0f of %.0f packets at rate %v: expected %.0f ± %.0f", x.name, k, n, p, n*p, 5*sd)
				}
				if x.seen != uint64(n) || x.sample != uint64(k) {
					t.Errorf("%s state: seen %d sampled %d, for %.0f packets of which %.0f passed", x.name, x.seen, x.sample, n, k)
				}
			}
			if p > 0 && p < 1 {
				same := 0
				for i := range frames {
					if goPassed[i] && bpfPassed[i] {
						same++
					}
				}
				// Independent samples: the packets both pass are about N·P².
				if math.Abs(float64(same)-n*p*p) > 5*math.Sqrt(n*p*p*(1-p*p))+1 {
					t.Errorf("Go and eBPF both pass %d packets: %s", same, fmt.Sprintf("expected about %.0f for independent samples", n*p*p))
				}
			}
		})
	}
	if err := c.CanRun(functions.TargetXDP, bindArgs(t, c, "rate=0.5 seed=7")); err == nil {
		t.Error("rate= with seed= can run in eBPF, whose generator is not the seeded one")
	}
}
