package metrics

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ffpf-go/ffpf/functions/dta/collector"
	"github.com/ffpf-go/ffpf/functions/dta/wire"
)

// TestMetrics: reports of every primitive and datagrams refused for each
// reason, over loopback UDP, then a scrape: Prometheus's parser and linter
// accept it, each family has its type and help, and every sample is what
// the server counts (Stats) and the memory its configuration takes.
func TestMetrics(t *testing.T) {
	s, err := collector.NewServer(collector.ServerConfig{Config: collector.Config{
		KeyWrite:     collector.KeyWriteConfig{Slots: 100003, Redundancy: 2},
		Append:       collector.AppendConfig{Lists: 4, Size: 1000},
		KeyIncrement: collector.KeyIncrementConfig{Slots: 100003},
		Postcarding:  collector.PostcardingConfig{Chunks: 10007, Hops: 3},
	}, Listen: "127.0.0.1:0", Sockets: 1, HTTP: "127.0.0.1:0", Metrics: Handler})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn, err := net.DialUDP("udp", nil, s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	send := func(b []byte) {
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	report := func(r wire.Report) []byte {
		b, err := r.Append(nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	send(report(wire.Report{Op: wire.KeyWrite, Redundancy: 2, Key: 0x0a000105, Data: 1234}))
	for i := range 20 {
		send(report(wire.Report{Op: wire.Append, List: 3, Data: uint32(i)}))
	}
	send(report(wire.Report{Op: wire.KeyIncrement, Redundancy: 2, Key: 9, Counter: 5}))
	send(report(wire.Report{Op: wire.Postcarding, Key: 77, Hop: 1, Data: 100}))
	send([]byte{0x01})                                    // short
	send(append(report(wire.Report{Op: wire.Append}), 1)) // trailing
	send(report(wire.Report{Op: wire.Append, List: 4}))   // list
	const sent = 1 + 20 + 2 + 3
	deadline := time.Now().Add(60 * time.Second)
	for s.Stats().Datagrams != sent {
		if time.Now().After(deadline) {
			t.Fatalf("%d datagrams of %d received", s.Stats().Datagrams, sent)
		}
		time.Sleep(5 * time.Millisecond)
	}

	resp, err := http.Get("http://" + s.HTTPAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4; charset=utf-8") {
		t.Errorf("Content-Type %q", ct)
	}
	for _, want := range []string{
		`dta_collector_reports_total{primitive="append"} 20`,
		`dta_collector_dropped_total{reason="trailing"} 1`,
		`dta_collector_dropped_total{reason="socket"} 0`,
		`dta_collector_datagrams_total 26`,
		`dta_collector_memory_bytes{primitive="keywrite"} 800024`,
	} {
		if !strings.Contains(string(body), want+"\n") {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	problems, err := promlint.New(strings.NewReader(string(body))).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("Prometheus cannot parse /metrics: %v\n%s", err, body)
	}
	st := s.Stats()
	for name, want := range map[string]struct {
		typ    dto.MetricType
		label  string
		values map[string]uint64
	}{
		"dta_collector_reports_total":   {dto.MetricType_COUNTER, "primitive", st.Reports},
		"dta_collector_dropped_total":   {dto.MetricType_COUNTER, "reason", st.Dropped},
		"dta_collector_datagrams_total": {dto.MetricType_COUNTER, "", map[string]uint64{"": st.Datagrams}},
		"dta_collector_immediate_total": {dto.MetricType_COUNTER, "", map[string]uint64{"": st.Immediate}},
		"dta_collector_memory_bytes": {dto.MetricType_GAUGE, "primitive",
			map[string]uint64{"keywrite": 100003 * 8, "keyincrement": 100003 * 8, "append": 4 * 1000 * 4, "postcarding": 10007 * 32}},
	} {
		f := fams[name]
		if f == nil || f.GetType() != want.typ || f.GetHelp() == "" {
			t.Errorf("family %s is %v, want a %v with its help", name, f, want.typ)
			continue
		}
		got := map[string]uint64{}
		for _, m := range f.Metric {
			k := ""
			for _, l := range m.Label {
				if l.GetName() == want.label {
					k = l.GetValue()
				}
			}
			v := m.GetCounter().GetValue()
			if want.typ == dto.MetricType_GAUGE {
				v = m.GetGauge().GetValue()
			}
			got[k] = uint64(v)
		}
		if len(got) != len(want.values) || len(got) == 0 {
			t.Errorf("%s: %v, the server counts %v", name, got, want.values)
		}
		for k, v := range want.values {
			if got[k] != v {
				t.Errorf("%s{%s=%q}: %d, the server counts %d", name, want.label, k, got[k], v)
			}
		}
	}
}
