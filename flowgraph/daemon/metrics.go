package daemon

import (
	"log"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/functions"
)

// kinds are the four counters every function and bridge keeps
// (in = out + filtered + dropped).
var kinds = [4]string{"in", "out", "filtered", "dropped"}

// The daemon's metric families. Labels are ids, classes, flowspaces and
// state field names: bounded by the requests held, never by the traffic.
var (
	packetsDesc = prometheus.NewDesc("ffpf_packets_total",
		"Packets each function (per request that has it) and each bridge took in, passed on, filtered out and dropped (in = out + filtered + dropped).",
		[]string{"request", "function", "class", "flowspace", "kind"}, nil)
	recordsDesc = prometheus.NewDesc("ffpf_records_total", "Records each producer emitted.",
		[]string{"request", "function", "class", "flowspace"}, nil)
	stateTotalDesc = prometheus.NewDesc("ffpf_state_total",
		"Each function's scalar state fields that only grow (a sum over the whole run), by field.",
		[]string{"request", "function", "class", "flowspace", "field"}, nil)
	stateDesc = prometheus.NewDesc("ffpf_state",
		"Each function's other scalar state fields (of a window, a maximum, a level), by field.",
		[]string{"request", "function", "class", "flowspace", "field"}, nil)
	functionsDesc = prometheus.NewDesc("ffpf_functions", "Functions of the flowgraph, by the flowspace they run in (the placement).",
		[]string{"flowspace"}, nil)
	requestsDesc = prometheus.NewDesc("ffpf_requests", "Requests held, by state (active, ended, failed).", []string{"state"}, nil)
	readersDesc  = prometheus.NewDesc("ffpf_readers", "Rings open to applications reading requests.", nil, nil)
)

// newMetrics is the daemon's Prometheus registry: its flowgraph, read at
// each scrape (metricsCollector), and the process's and Go runtime's
// figures, by Prometheus's own collectors. The registry is the daemon's,
// not the client library's default one, which its importers share.
func newMetrics(d *Daemon) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(metricsCollector{d}, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	return reg
}

// serveMetrics answers a scrape in the format the scraper asks for (the
// text format 0.0.4 by default). A series that cannot be written (a
// label not UTF-8) is left out and logged; the rest are served.
func (d *Daemon) serveMetrics() http.Handler {
	return promhttp.HandlerFor(d.metrics, promhttp.HandlerOpts{
		ErrorLog:      log.New(d.cfg.Log, "ffpf: /metrics: ", 0),
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// metricsCollector is the daemon's flowgraph as Prometheus metrics, made
// at each scrape from what the functions and bridges hold then: per
// request and function (a function shared by several requests appears
// under each), and per bridge and reader, ffpf_packets_total by kind; the
// records producers emitted; each function's scalar state fields as
// counters (a sum that only grows: no window) or gauges; the placement
// (functions per flowspace), the requests by state and the readers.
type metricsCollector struct{ d *Daemon }

func (metricsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{packetsDesc, recordsDesc, stateTotalDesc, stateDesc, functionsDesc, requestsDesc, readersDesc} {
		ch <- d
	}
}

// emit sends a sample, or why it cannot be one (a label value not UTF-8).
func emit(ch chan<- prometheus.Metric, desc *prometheus.Desc, typ prometheus.ValueType, v float64, labels ...string) {
	m, err := prometheus.NewConstMetric(desc, typ, v, labels...)
	if err != nil {
		m = prometheus.NewInvalidMetric(desc, err)
	}
	ch <- m
}

func (c metricsCollector) Collect(ch chan<- prometheus.Metric) {
	d := c.d
	d.ctl.Lock() // no function is released while its state is read
	defer d.ctl.Unlock()
	states := map[string]flowgraph.FunctionState{}
	for _, f := range d.rt.Functions() {
		states[f.ID] = f
	}
	d.mu.Lock()
	reqs := append([]*request(nil), d.order...)
	rds := make([]*reader, 0, len(d.readers))
	for _, rd := range d.readers {
		rds = append(rds, rd)
	}
	d.mu.Unlock()

	for _, r := range reqs {
		for _, id := range r.fids {
			f, ok := states[id]
			if !ok {
				continue
			}
			for i, v := range [4]uint64{f.In, f.Out, f.Filtered, f.Dropped} {
				emit(ch, packetsDesc, prometheus.CounterValue, float64(v), r.id, f.ID, f.Class, f.Flowspace, kinds[i])
			}
			if f.Records > 0 {
				emit(ch, recordsDesc, prometheus.CounterValue, float64(f.Records), r.id, f.ID, f.Class, f.Flowspace)
			}
			d.collectState(ch, r.id, f)
		}
	}
	for _, b := range d.rt.Bridges() {
		name := b.From + ">" + b.To
		for i, v := range [4]uint64{b.In, b.Out, 0, b.Dropped} {
			emit(ch, packetsDesc, prometheus.CounterValue, float64(v), "", name, "bridge", b.From, kinds[i])
		}
	}
	for _, rd := range rds {
		s := rd.stats()
		name := "reader:" + strconv.FormatUint(s.Reader, 10)
		for i, v := range [4]uint64{s.In, s.Out, 0, s.Dropped} {
			emit(ch, packetsDesc, prometheus.CounterValue, float64(v), rd.req.id, name, "shm", "user", kinds[i])
		}
	}

	per := map[string]int{}
	for _, f := range states {
		per[f.Flowspace]++
	}
	for fs, n := range per {
		emit(ch, functionsDesc, prometheus.GaugeValue, float64(n), fs)
	}
	byState := map[string]int{"active": 0, "ended": 0, "failed": 0}
	for _, r := range reqs {
		state := "active"
		if ended, err := r.req.Ended(); ended {
			state = "ended"
			if err != nil {
				state = "failed"
			}
		}
		byState[state]++
	}
	for s, n := range byState {
		emit(ch, requestsDesc, prometheus.GaugeValue, float64(n), s)
	}
	emit(ch, readersDesc, prometheus.GaugeValue, float64(len(rds)))
}

// collectState sends f's scalar numeric state fields: those summed and
// unwindowed as ffpf_state_total (counters), the rest as ffpf_state
// (gauges). Arrays and structures are left out: a series per element
// would grow with the traffic.
func (d *Daemon) collectState(ch chan<- prometheus.Metric, req string, f flowgraph.FunctionState) {
	c, ok := d.reg.Lookup(f.Class)
	if !ok {
		return
	}
	st := c.State
	if st == nil {
		st = &functions.State{}
	}
	windowed := false
	if v, ok := f.Params["window"]; ok && v != nil && v != "" && v != "0s" {
		windowed = true
	}
	declared := map[string]bool{}
	for i := range st.Fields {
		sf := &st.Fields[i]
		declared[sf.Name] = true
		if sf.Len > 0 || sf.LenOf != nil || sf.Parity {
			continue // a structure, not a figure
		}
		v, ok := number(f.State[sf.Name])
		if !ok {
			continue
		}
		if sf.Merge == functions.MergeSum && !windowed {
			emit(ch, stateTotalDesc, prometheus.CounterValue, v, req, f.ID, f.Class, f.Flowspace, sf.Name)
		} else {
			emit(ch, stateDesc, prometheus.GaugeValue, v, req, f.ID, f.Class, f.Flowspace, sf.Name)
		}
	}
	// What a class computes from its state when read (hll's estimate): a
	// figure of the moment, a gauge.
	for _, k := range slices.Sorted(maps.Keys(f.State)) {
		if v, ok := number(f.State[k]); ok && !declared[k] {
			emit(ch, stateDesc, prometheus.GaugeValue, v, req, f.ID, f.Class, f.Flowspace, k)
		}
	}
}

// number converts a decoded state value to a float.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case uint64:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint8:
		return float64(x), true
	case int64:
		return float64(x), true
	case int:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}
