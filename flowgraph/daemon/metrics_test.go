package daemon

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ffpf-go/ffpf/flowgraph/daemon/client"
)

// scrape gets /metrics and parses it with Prometheus's own text parser.
func scrape(t testing.TB, d *Daemon) (map[string]*dto.MetricFamily, []byte) {
	t.Helper()
	resp, err := http.Get("http://" + d.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type %q", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("Prometheus's parser refuses the scrape: %v\n%s", err, body)
	}
	return mfs, body
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.Label {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// TestMetricsAgreeWithStat: a scrape parses with Prometheus's parser,
// passes its linter, has each series once, and counts what stat counts:
// every function's four counters per request, and its scalar state by
// declared type (a windowed count is a gauge).
func TestMetricsAgreeWithStat(t *testing.T) {
	d := startDaemon(t, Config{HTTP: "127.0.0.1:0"})
	c := dial(t, d)
	ids := map[string]bool{}
	for _, e := range []string{`(bpf,"tcp") > [(pktcount)|(bytecount)]`, `(bpf,"tcp") > (counter,window=1ms)`, `(bpf,"udp") > (hll)`} {
		// A file each: requests that shared one source would see what is
		// left of it when they join.
		r, err := c.Submit(client.SubmitArgs{Expr: e, File: trace(t, 5000)})
		if err != nil {
			t.Fatal(err)
		}
		ids[r.ID] = true
	}
	stats := map[string]*client.Stat{}
	for id := range ids {
		stats[id] = waitEnded(t, c, id)
	}
	rd, err := c.Read(firstKey(ids))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	mfs, body := scrape(t, d)
	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	for name, mf := range mfs {
		seen := map[string]bool{}
		for _, m := range mf.Metric {
			k := fmt.Sprint(labels(m))
			if seen[k] {
				t.Errorf("%s%s twice", name, k)
			}
			seen[k] = true
		}
	}
	want := map[string]dto.MetricType{"ffpf_packets_total": dto.MetricType_COUNTER, "ffpf_state_total": dto.MetricType_COUNTER,
		"ffpf_state": dto.MetricType_GAUGE, "ffpf_functions": dto.MetricType_GAUGE, "ffpf_requests": dto.MetricType_GAUGE,
		"process_open_fds": dto.MetricType_GAUGE, "process_cpu_seconds_total": dto.MetricType_COUNTER, "go_goroutines": dto.MetricType_GAUGE}
	for name, typ := range want {
		if mf := mfs[name]; mf == nil || mf.GetType() != typ {
			t.Errorf("family %s: %v, want a %v", name, mf, typ)
		}
	}
	// ffpf_packets_total against stat, series by series.
	got := map[string]float64{}
	for _, m := range mfs["ffpf_packets_total"].Metric {
		l := labels(m)
		got[l["request"]+"/"+l["function"]+"/"+l["kind"]] = m.GetCounter().GetValue()
	}
	checked := 0
	for id, st := range stats {
		for _, f := range st.Functions {
			for kind, v := range map[string]uint64{"in": f.In, "out": f.Out, "filtered": f.Filtered, "dropped": f.Dropped} {
				k := id + "/" + f.ID + "/" + kind
				if g, ok := got[k]; !ok || g != float64(v) {
					t.Errorf("ffpf_packets_total %s: %v (present %v), stat says %d", k, g, ok, v)
				}
				checked++
			}
		}
	}
	if checked < 40 {
		t.Fatalf("only %d series checked", checked)
	}
	// State: pktcount's packets a counter, the windowed counter's a gauge.
	state := func(family, class, field string) (float64, bool) {
		for _, m := range mfs[family].Metric {
			if l := labels(m); l["class"] == class && l["field"] == field {
				if m.Counter != nil {
					return m.GetCounter().GetValue(), true
				}
				return m.GetGauge().GetValue(), true
			}
		}
		return 0, false
	}
	var pkt *client.Function
	for _, st := range stats {
		for _, f := range fnByClass(st.Functions, "pktcount") {
			pkt = &f
		}
	}
	if v, ok := state("ffpf_state_total", "pktcount", "packets"); !ok || v != float64(pkt.State["packets"].(float64)) {
		t.Errorf("pktcount's packets: %v (%v), stat %v", v, ok, pkt.State["packets"])
	}
	if _, ok := state("ffpf_state", "counter", "packets"); !ok {
		t.Error("the windowed counter's packets are not a gauge")
	}
	if _, ok := state("ffpf_state_total", "counter", "packets"); ok {
		t.Error("the windowed counter's packets are a counter: they fall at each window")
	}
	if v, ok := state("ffpf_state", "hll", "estimate"); !ok || v < 1 {
		t.Errorf("hll's estimate: %v (%v), want a gauge", v, ok)
	}
	if _, ok := state("ffpf_state", "hll", "registers"); ok {
		t.Error("an array (hll's registers) is exported: labels or series per element are unbounded")
	}
	var readers int
	for k := range got {
		if strings.Contains(k, "/reader:") {
			readers++
		}
	}
	if readers != 4 {
		t.Errorf("%d reader series, want the 4 kinds of the one reader", readers)
	}
}

func firstKey(m map[string]bool) string {
	for k := range m {
		return k
	}
	return ""
}

// TestHTTPLoopbackByDefault: an address without a host listens on
// loopback; a request naming another host is refused there; writes need
// the token.
func TestHTTPLoopbackByDefault(t *testing.T) {
	d := startDaemon(t, Config{HTTP: ":0", Token: "tok"})
	if !strings.HasPrefix(d.HTTPAddr(), "127.0.0.1:") {
		t.Fatalf("listens on %s", d.HTTPAddr())
	}
	req, _ := http.NewRequest("GET", "http://"+d.HTTPAddr()+"/api/v1/ls", nil)
	req.Host = "evil.example:80"
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("a request for another host: %v %v", resp, err)
	}
	post := func(tok string) int {
		req, _ := http.NewRequest("POST", "http://"+d.HTTPAddr()+"/api/v1/submit", strings.NewReader(`{"expr":"(gen,packets=10) > (pktcount)"}`))
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c1, c2, c3 := post(""), post("wrong"), post("tok"); c1 != 403 || c2 != 403 || c3 != 200 {
		t.Errorf("submit without a token %d, with a wrong one %d, with the token %d", c1, c2, c3)
	}
}

// TestMetricsProcessAndGo: a scrape has the process's figures and the Go
// runtime's as Prometheus's own collectors give them (the names every
// dashboard knows), with values of this process: its start, its
// descriptors, its memory, the Go version it runs.
func TestMetricsProcessAndGo(t *testing.T) {
	before := time.Now()
	d := startDaemon(t, Config{HTTP: "127.0.0.1:0"})
	mfs, _ := scrape(t, d)
	value := func(name string, typ dto.MetricType) float64 {
		t.Helper()
		mf := mfs[name]
		if mf == nil || mf.GetType() != typ || len(mf.Metric) != 1 {
			t.Errorf("family %s: %v, want one %v", name, mf, typ)
			return 0
		}
		m := mf.Metric[0]
		switch typ {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue()
		case dto.MetricType_SUMMARY:
			return float64(m.GetSummary().GetSampleCount())
		}
		return 0
	}
	// The process started before the daemon (a test binary) and within
	// the hour; its clock counts in hundredths of a second.
	if v := value("process_start_time_seconds", dto.MetricType_GAUGE); v > float64(before.Unix())+1 || v < float64(before.Unix()-3600) {
		t.Errorf("process_start_time_seconds %v, the daemon started at %v", v, before.Unix())
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	// The descriptors open when the collector counted them: the daemon's
	// sockets, the scrape's connection; give or take the runtime's own.
	if v := value("process_open_fds", dto.MetricType_GAUGE); v < 3 || v > float64(len(fds))+8 {
		t.Errorf("process_open_fds %v, /proc/self/fd lists %d", v, len(fds))
	}
	if v := value("process_max_fds", dto.MetricType_GAUGE); v < 64 {
		t.Errorf("process_max_fds %v", v)
	}
	if v := value("process_resident_memory_bytes", dto.MetricType_GAUGE); v < 1<<20 {
		t.Errorf("process_resident_memory_bytes %v, under 1 MiB", v)
	}
	if rss, vsize := value("process_resident_memory_bytes", dto.MetricType_GAUGE), value("process_virtual_memory_bytes", dto.MetricType_GAUGE); vsize < rss {
		t.Errorf("process_virtual_memory_bytes %v under the resident %v", vsize, rss)
	}
	value("process_cpu_seconds_total", dto.MetricType_COUNTER)
	if v := value("go_goroutines", dto.MetricType_GAUGE); v < 2 {
		t.Errorf("go_goroutines %v: the daemon's accept loops alone are more", v)
	}
	if v := value("go_threads", dto.MetricType_GAUGE); v < 1 {
		t.Errorf("go_threads %v", v)
	}
	if v := value("go_memstats_heap_inuse_bytes", dto.MetricType_GAUGE); v <= 0 {
		t.Errorf("go_memstats_heap_inuse_bytes %v", v)
	}
	value("go_gc_duration_seconds", dto.MetricType_SUMMARY)
	value("go_info", dto.MetricType_GAUGE)
	if mf := mfs["go_info"]; mf != nil && len(mf.Metric) == 1 {
		if v := labels(mf.Metric[0])["version"]; v != runtime.Version() {
			t.Errorf("go_info's version %q, this binary's %q", v, runtime.Version())
		}
	}
}

// TestMetricsSentInOrder: the collector sends each family's series in
// the order the registry sorts them to (by label values, the labels in
// the order of their names), so that a scrape of thousands of series
// costs the registry a pass, not a sort (BenchmarkScrape).
func TestMetricsSentInOrder(t *testing.T) {
	d := startDaemon(t, Config{})
	c := dial(t, d)
	path := trace(t, 100)
	var id string
	for _, e := range []string{`(bpf,"tcp") > [(pktcount)|(bytecount)]`, `(bpf,"tcp") > (pktcount)`, `(bpf,"udp") > [(hll)|(counter,window=1ms)]`} {
		r, err := c.Submit(client.SubmitArgs{Expr: e, File: path})
		if err != nil {
			t.Fatal(err)
		}
		id = r.ID
	}
	rd, err := c.Read(id)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	ch := make(chan prometheus.Metric)
	go func() {
		metricsCollector{d}.Collect(ch)
		close(ch)
	}()
	last := map[string][]string{} // by family: the previous series' label values
	n := map[string]int{}
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		name := m.Desc().String()
		var vals []string
		for _, l := range pb.Label { // Write sorts them by name
			vals = append(vals, l.GetValue())
		}
		if prev, ok := last[name]; ok && slices.Compare(prev, vals) >= 0 {
			t.Errorf("%s: %q sent after %q", name, vals, prev)
		}
		last[name] = vals
		n[name]++
	}
	if len(n) < 6 || n[packetsDesc.String()] < 4*12 || n[stateTotalDesc.String()] < 3 || n[stateDesc.String()] < 2 {
		t.Errorf("series per family: %v", n)
	}
}
