// Package metrics answers Prometheus's scrapes of a DTA collector
// (collector.Server) with Prometheus's client library: the server's
// counters, read at each scrape (the datapath keeps its own counters), and
// the memory of each primitive's structure. Give Handler as the server's
// ServerConfig.Metrics.
//
// It is a package of its own so that package collector, which every ffpf
// process links (the class dta-collector), does not link the client
// library, whose packages (and protobuf's) every process linking them
// initialises: only ffpf's whole build (ffpf dta collect --http) links
// this one.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ffpf-go/ffpf/functions/dta/collector"
)

var (
	datagramsDesc = prometheus.NewDesc("dta_collector_datagrams_total", "UDP datagrams received.", nil, nil)
	droppedDesc   = prometheus.NewDesc("dta_collector_dropped_total",
		"Reports not ingested, by reason (socket: dropped by the kernel, the socket's queue full).", []string{"reason"}, nil)
	immediateDesc = prometheus.NewDesc("dta_collector_immediate_total", "Reports ingested that asked for an ACK (none is sent).", nil, nil)
	memoryDesc    = prometheus.NewDesc("dta_collector_memory_bytes", "Memory of each primitive's structure.", []string{"primitive"}, nil)
	reportsDesc   = prometheus.NewDesc("dta_collector_reports_total",
		"Reports ingested (Append: entries, Postcarding: postcards), by primitive.", []string{"primitive"}, nil)
)

// Handler serves s's metrics from a registry of its own.
func Handler(s *collector.Server) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(statsCollector{s})
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// statsCollector makes s's metrics at each scrape: its labels are the
// primitives and the reasons of a drop, a bounded set.
type statsCollector struct{ s *collector.Server }

func (statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{datagramsDesc, droppedDesc, immediateDesc, memoryDesc, reportsDesc} {
		ch <- d
	}
}

func (c statsCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	cfg := c.s.Collector().Config()
	ch <- prometheus.MustNewConstMetric(datagramsDesc, prometheus.CounterValue, float64(st.Datagrams))
	ch <- prometheus.MustNewConstMetric(immediateDesc, prometheus.CounterValue, float64(st.Immediate))
	for reason, n := range st.Dropped {
		ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(n), reason)
	}
	for primitive, n := range st.Reports {
		ch <- prometheus.MustNewConstMetric(reportsDesc, prometheus.CounterValue, float64(n), primitive)
	}
	for primitive, n := range map[string]uint64{"keywrite": cfg.KeyWrite.Slots * 8, "keyincrement": cfg.KeyIncrement.Slots * 8,
		"append": uint64(cfg.Append.Lists) * cfg.Append.Size * 4, "postcarding": cfg.Postcarding.Chunks * 32} {
		ch <- prometheus.MustNewConstMetric(memoryDesc, prometheus.GaugeValue, float64(n), primitive)
	}
}
