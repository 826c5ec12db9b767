package daemon

import (
	"cmp"
	"log"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

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

// series is one function's (or bridge's, or reader's) series of a family,
// under one request, with its labels.
type series struct {
	class, flowspace, function, request string
	field                               string // the state field, in ffpf_state(_total)
	counter                             bool   // ffpf_state_total, not ffpf_state
	packets                             [4]uint64
	v                                   float64
	lp                                  []*dto.LabelPair // its label pairs but kind, by name (pairs)
}

// The label names, for the pairs.
var (
	labelClass, labelField, labelFlowspace = "class", "field", "flowspace"
	labelFunction, labelKind, labelRequest = "function", "kind", "request"
	kindPairs                              [4]*dto.LabelPair
)

func init() {
	for i := range kinds {
		kindPairs[i] = &dto.LabelPair{Name: &labelKind, Value: &kinds[i]}
	}
}

// pairs makes s's label pairs, sorted by name as the registry wants them
// (class, field, flowspace, function, kind, request), but kind, which
// sample inserts.
func (s *series) pairs() {
	s.lp = []*dto.LabelPair{{Name: &labelClass, Value: &s.class}}
	if s.field != "" {
		s.lp = append(s.lp, &dto.LabelPair{Name: &labelField, Value: &s.field})
	}
	s.lp = append(s.lp, &dto.LabelPair{Name: &labelFlowspace, Value: &s.flowspace},
		&dto.LabelPair{Name: &labelFunction, Value: &s.function}, &dto.LabelPair{Name: &labelRequest, Value: &s.request})
}

// sample is one series' value at a scrape: a const metric, as
// prometheus.NewConstMetric makes them, but with the label pairs of the
// series (s.lp) shared between the four kinds of ffpf_packets_total, not
// made again for each: a scrape of 1,001 functions makes some 10,000
// samples, and their pairs of their own were two thirds of the
// collector's time. The registry checks them as it checks any metric's
// (names, UTF-8, each series once).
type sample struct {
	desc   *prometheus.Desc
	labels [6]*dto.LabelPair
	n      int
	v      float64
	gauge  bool
	c      dto.Counter
	g      dto.Gauge
}

// sample makes s's sample of desc, with kind's pair when kind is not nil.
func (s *series) sample(desc *prometheus.Desc, gauge bool, v float64, kind *dto.LabelPair) *sample {
	m := &sample{desc: desc, v: v, gauge: gauge}
	m.n = copy(m.labels[:], s.lp)
	if kind != nil { // before request, the last
		m.labels[m.n-1], m.labels[m.n] = kind, m.labels[m.n-1]
		m.n++
	}
	return m
}

func (m *sample) Desc() *prometheus.Desc { return m.desc }

func (m *sample) Write(out *dto.Metric) error {
	out.Label = m.labels[:m.n]
	if m.gauge {
		m.g.Value = &m.v
		out.Gauge = &m.g
	} else {
		m.c.Value = &m.v
		out.Counter = &m.c
	}
	return nil
}

// seriesOrder orders series by their label values in the order of the
// labels' names, as the registry sorts each family: sent in that order,
// a family of thousands of series costs the registry one pass, not a
// sort.
func seriesOrder(a, b series) int {
	return cmp.Or(cmp.Compare(a.class, b.class), cmp.Compare(a.field, b.field), cmp.Compare(a.flowspace, b.flowspace),
		cmp.Compare(a.function, b.function), cmp.Compare(a.request, b.request))
}

// kindOrder is the kinds' indexes in their order as label values.
var kindOrder = [4]int{3, 2, 0, 1} // dropped, filtered, in, out

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

	var packets, records, state []series
	for _, r := range reqs {
		for _, id := range r.fids {
			f, ok := states[id]
			if !ok {
				continue
			}
			s := series{class: f.Class, flowspace: f.Flowspace, function: f.ID, request: r.id,
				packets: [4]uint64{f.In, f.Out, f.Filtered, f.Dropped}}
			packets = append(packets, s)
			if f.Records > 0 {
				s.v = float64(f.Records)
				records = append(records, s)
			}
			state = d.appendState(state, s, f)
		}
	}
	for _, b := range d.rt.Bridges() {
		packets = append(packets, series{class: "bridge", flowspace: b.From, function: b.From + ">" + b.To,
			packets: [4]uint64{b.In, b.Out, 0, b.Dropped}})
	}
	for _, rd := range rds {
		st := rd.stats()
		packets = append(packets, series{class: "shm", flowspace: "user", function: "reader:" + strconv.FormatUint(st.Reader, 10),
			request: rd.req.id, packets: [4]uint64{st.In, st.Out, 0, st.Dropped}})
	}
	slices.SortFunc(packets, seriesOrder)
	slices.SortFunc(records, seriesOrder)
	slices.SortFunc(state, seriesOrder)

	// kind comes between function and request: each function's series
	// (one per request that has it) kind by kind.
	for i := 0; i < len(packets); {
		j := i + 1
		for j < len(packets) && packets[j].class == packets[i].class && packets[j].flowspace == packets[i].flowspace && packets[j].function == packets[i].function {
			j++
		}
		for k := range packets[i:j] {
			packets[i+k].pairs()
		}
		for _, k := range kindOrder {
			for _, s := range packets[i:j] {
				ch <- s.sample(packetsDesc, false, float64(s.packets[k]), kindPairs[k])
			}
		}
		i = j
	}
	for i := range records {
		s := &records[i]
		s.pairs()
		ch <- s.sample(recordsDesc, false, s.v, nil)
	}
	for i := range state {
		s := &state[i]
		s.pairs()
		if s.counter {
			ch <- s.sample(stateTotalDesc, false, s.v, nil)
		} else {
			ch <- s.sample(stateDesc, true, s.v, nil)
		}
	}

	per := map[string]int{}
	for _, f := range states {
		per[f.Flowspace]++
	}
	for _, fs := range slices.Sorted(maps.Keys(per)) {
		emit(ch, functionsDesc, prometheus.GaugeValue, float64(per[fs]), fs)
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
	for _, s := range []string{"active", "ended", "failed"} {
		emit(ch, requestsDesc, prometheus.GaugeValue, float64(byState[s]), s)
	}
	emit(ch, readersDesc, prometheus.GaugeValue, float64(len(rds)))
}

// appendState appends f's scalar numeric state fields, as the series of
// fn: those summed and unwindowed as ffpf_state_total (counters), the
// rest as ffpf_state (gauges). Arrays and structures are left out: a
// series per element would grow with the traffic.
func (d *Daemon) appendState(out []series, fn series, f flowgraph.FunctionState) []series {
	c, ok := d.reg.Lookup(f.Class)
	if !ok {
		return out
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
		fn.field, fn.v, fn.counter = sf.Name, v, sf.Merge == functions.MergeSum && !windowed
		out = append(out, fn)
	}
	// What a class computes from its state when read (hll's estimate): a
	// figure of the moment, a gauge.
	for k, x := range f.State {
		if v, ok := number(x); ok && !declared[k] {
			fn.field, fn.v, fn.counter = k, v, false
			out = append(out, fn)
		}
	}
	return out
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
