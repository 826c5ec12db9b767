package server

import (
	"testing"
	"time"

	p4 "github.com/p4lang/p4runtime/go/p4/v1"

	"github.com/ffpf-go/ffpf/functions/p4gen/p4gentest"
)

// BenchmarkPush is the time to install (cms) > (hll) over P4Runtime on
// loopback: SetForwardingPipelineConfig VERIFY_AND_COMMIT with its JSON
// device config, decoded, checked against the P4Info, allocated to
// stages and compiled.
func BenchmarkPush(b *testing.B) {
	r := newRig(b)
	cl := r.connect(1)
	next(cl, arbitration)
	prog := p4gentest.CMSHLL(b)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if err := r.push(cl, prog, p4.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/push")
}
