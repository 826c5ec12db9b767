package collector

import (
	"testing"

	"github.com/ffpf-go/ffpf/functions/dta/translator"
	"github.com/ffpf-go/ffpf/functions/dta/wire"
)

// BenchmarkTranslateInto: a translator in the same process writing into
// the collector's memory (Apply), per report: the path `dta-translator`
// and a collector share, against the collector's own ingest of the same
// reports (BenchmarkIngest).
func BenchmarkTranslateInto(b *testing.B) {
	cfg := Config{KeyWrite: KeyWriteConfig{Slots: 1000003, Redundancy: 2}, KeyIncrement: KeyIncrementConfig{Slots: 1000003, Redundancy: 2},
		Append: AppendConfig{Lists: 8, Size: 1 << 16}, Postcarding: PostcardingConfig{Chunks: 100003, Hops: 5, Redundancy: 1}}
	c := newTest(b, cfg)
	for _, k := range []struct {
		name  string
		batch int
		rep   func(i int) wire.Report
	}{
		{"keywrite-N2", 16, func(i int) wire.Report {
			return wire.Report{Op: wire.KeyWrite, Redundancy: 2, Key: uint32(i) * 2654435761, Data: uint32(i)}
		}},
		{"keyincrement-N2", 16, func(i int) wire.Report {
			return wire.Report{Op: wire.KeyIncrement, Redundancy: 2, Key: uint32(i) * 2654435761, Counter: 1}
		}},
		{"append-B16", 16, func(i int) wire.Report { return wire.Report{Op: wire.Append, List: uint32(i & 7), Data: uint32(i)} }},
		{"postcarding-B5", 16, func(i int) wire.Report {
			return wire.Report{Op: wire.Postcarding, Key: uint32(i/5) * 2654435761, Hop: uint8(i % 5), Data: uint32(i % 1000)}
		}},
	} {
		b.Run(k.name, func(b *testing.B) {
			tr, err := translator.New(c.TranslatorConfig(k.batch), c)
			if err != nil {
				b.Fatal(err)
			}
			reps := make([]wire.Report, 1<<16)
			for i := range reps {
				reps[i] = k.rep(i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				_ = tr.Translate(&reps[i&(len(reps)-1)])
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mreports/s")
		})
	}
}
