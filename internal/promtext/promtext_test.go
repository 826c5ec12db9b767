package promtext

import (
	"bytes"
	"math"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestParsedBack: what the writer writes, Prometheus's own parser reads
// back as written: escapes in help and label values, integers, floats and
// the special values.
func TestParsedBack(t *testing.T) {
	var w Writer
	odd := "a\\b \"quoted\"\nnext line ünï"
	w.Family("x_total", "counter", "Help with a \\ and a\nnewline.")
	w.Uint("x_total", 18446744073709551615, "k", odd, "other", "")
	w.Uint("x_total", 0, "k", "plain", "other", "1")
	w.Family("y", "gauge", "Y.")
	w.Float("y", math.Inf(1), "v", "inf")
	w.Float("y", math.Inf(-1), "v", "-inf")
	w.Float("y", 1.5e-7, "v", "small")
	w.Float("y", math.NaN(), "v", "nan")
	w.Family("z", "untyped", "No labels.")
	w.Uint("z", 42)
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(w.B))
	if err != nil {
		t.Fatalf("%v\n%s", err, w.B)
	}
	x := mfs["x_total"]
	if x.GetHelp() != "Help with a \\ and a\nnewline." || len(x.Metric) != 2 {
		t.Fatalf("x_total: %v", x)
	}
	if l := x.Metric[0].Label; l[0].GetValue() != odd || x.Metric[0].GetCounter().GetValue() != 18446744073709551615 {
		t.Errorf("label %q, value %v", l[0].GetValue(), x.Metric[0].GetCounter().GetValue())
	}
	want := map[string]float64{"inf": math.Inf(1), "-inf": math.Inf(-1), "small": 1.5e-7}
	for _, m := range mfs["y"].Metric {
		v := m.GetGauge().GetValue()
		k := m.Label[0].GetValue()
		if k == "nan" {
			if !math.IsNaN(v) {
				t.Errorf("nan: %v", v)
			}
		} else if v != want[k] {
			t.Errorf("%s: %v", k, v)
		}
	}
	if mfs["z"].Metric[0].GetUntyped().GetValue() != 42 {
		t.Errorf("z: %v", mfs["z"])
	}
}
