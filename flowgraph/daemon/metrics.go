package daemon

import (
	"bytes"
	"maps"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/internal/promtext"
)

// kinds are the four counters every function and bridge keeps
// (in = out + filtered + dropped).
var kinds = [4]string{"in", "out", "filtered", "dropped"}

// Metrics writes the daemon's Prometheus exposition: per request and
// function (a function shared by several requests appears under each),
// and per bridge, ffpf_packets_total by kind; each function's scalar state
// fields as counters (a sum that only grows: no window) or gauges; the
// placement (functions per flowspace), the requests by state, the readers;
// and the process's own figures under the names Prometheus's client
// library gives them. Labels are ids, classes and flowspaces: bounded by
// the requests held, never by the traffic.
func (d *Daemon) Metrics() []byte {
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

	w := &promtext.Writer{B: make([]byte, 0, 64<<10+len(states)*1024)}
	w.Family("ffpf_packets_total", "counter", "Packets each function (per request that has it) and each bridge took in, passed on, filtered out and dropped (in = out + filtered + dropped).")
	for _, r := range reqs {
		for _, id := range r.fids {
			f, ok := states[id]
			if !ok {
				continue
			}
			for i, v := range [4]uint64{f.In, f.Out, f.Filtered, f.Dropped} {
				w.Uint("ffpf_packets_total", v, "request", r.id, "function", f.ID, "class", f.Class, "flowspace", f.Flowspace, "kind", kinds[i])
			}
		}
	}
	for _, b := range d.rt.Bridges() {
		name := b.From + ">" + b.To
		for i, v := range [4]uint64{b.In, b.Out, 0, b.Dropped} {
			w.Uint("ffpf_packets_total", v, "request", "", "function", name, "class", "bridge", "flowspace", b.From, "kind", kinds[i])
		}
	}
	for _, rd := range rds {
		s := rd.stats()
		name := "reader:" + strconv.FormatUint(s.Reader, 10)
		for i, v := range [4]uint64{s.In, s.Out, 0, s.Dropped} {
			w.Uint("ffpf_packets_total", v, "request", rd.req.id, "function", name, "class", "shm", "flowspace", "user", "kind", kinds[i])
		}
	}

	w.Family("ffpf_records_total", "counter", "Records each producer emitted.")
	for _, r := range reqs {
		for _, id := range r.fids {
			if f, ok := states[id]; ok && f.Records > 0 {
				w.Uint("ffpf_records_total", f.Records, "request", r.id, "function", f.ID, "class", f.Class, "flowspace", f.Flowspace)
			}
		}
	}
	for _, typ := range []string{"counter", "gauge"} {
		name, help := "ffpf_state_total", "Each function's scalar state fields that only grow (a sum over the whole run), by field."
		if typ == "gauge" {
			name, help = "ffpf_state", "Each function's other scalar state fields (of a window, a maximum, a level), by field."
		}
		w.Family(name, typ, help)
		for _, r := range reqs {
			for _, id := range r.fids {
				f, ok := states[id]
				if !ok {
					continue
				}
				d.stateSamples(w, name, typ == "counter", r.id, f)
			}
		}
	}

	w.Family("ffpf_functions", "gauge", "Functions of the flowgraph, by the flowspace they run in (the placement).")
	per := map[string]uint64{}
	var fss []string
	for _, f := range states {
		if per[f.Flowspace] == 0 {
			fss = append(fss, f.Flowspace)
		}
		per[f.Flowspace]++
	}
	slices.Sort(fss)
	for _, fs := range fss {
		w.Uint("ffpf_functions", per[fs], "flowspace", fs)
	}
	w.Family("ffpf_requests", "gauge", "Requests held, by state (active, ended, failed).")
	byState := map[string]uint64{"active": 0, "ended": 0, "failed": 0}
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
		w.Uint("ffpf_requests", byState[s], "state", s)
	}
	w.Family("ffpf_readers", "gauge", "Rings open to applications reading requests.")
	w.Uint("ffpf_readers", uint64(len(rds)))
	d.processMetrics(w)
	return w.B
}

// stateSamples appends f's scalar numeric state fields of the kind asked
// (counters: summed and unwindowed; gauges: the rest).
func (d *Daemon) stateSamples(w *promtext.Writer, name string, counters bool, req string, f flowgraph.FunctionState) {
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
		counter := sf.Merge == functions.MergeSum && !windowed
		if counter != counters {
			continue
		}
		w.Float(name, v, "request", req, "function", f.ID, "class", f.Class, "flowspace", f.Flowspace, "field", sf.Name)
	}
	if counters {
		return
	}
	// What a class computes from its state when read (hll's estimate): a
	// figure of the moment, a gauge.
	for _, k := range slices.Sorted(maps.Keys(f.State)) {
		if v, ok := number(f.State[k]); ok && !declared[k] {
			w.Float(name, v, "request", req, "function", f.ID, "class", f.Class, "flowspace", f.Flowspace, "field", k)
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

// processMetrics appends the process's figures as Prometheus's client
// library names them (its process and Go collectors).
func (d *Daemon) processMetrics(w *promtext.Writer) {
	if stat, err := os.ReadFile("/proc/self/stat"); err == nil {
		// Fields after the command (which may hold spaces) in its parentheses.
		if i := bytes.LastIndexByte(stat, ')'); i > 0 {
			f := strings.Fields(string(stat[i+1:]))
			if len(f) > 22 {
				ut, _ := strconv.ParseFloat(f[11], 64)
				st, _ := strconv.ParseFloat(f[12], 64)
				vsize, _ := strconv.ParseUint(f[20], 10, 64)
				rss, _ := strconv.ParseUint(f[21], 10, 64)
				w.Family("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.")
				w.Float("process_cpu_seconds_total", (ut+st)/100)
				w.Family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.")
				w.Uint("process_resident_memory_bytes", rss*uint64(os.Getpagesize()))
				w.Family("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.")
				w.Uint("process_virtual_memory_bytes", vsize)
			}
		}
	}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		w.Family("process_open_fds", "gauge", "Number of open file descriptors.")
		w.Uint("process_open_fds", uint64(len(ents)))
	}
	w.Family("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.")
	w.Float("process_start_time_seconds", float64(d.start.UnixNano())/1e9)
	w.Family("go_goroutines", "gauge", "Number of goroutines that currently exist.")
	w.Uint("go_goroutines", uint64(runtime.NumGoroutine()))
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	w.Family("go_memstats_heap_inuse_bytes", "gauge", "Number of heap bytes that are in use.")
	w.Uint("go_memstats_heap_inuse_bytes", ms.HeapInuse)
}

func (d *Daemon) serveMetrics(rw http.ResponseWriter, _ *http.Request) {
	rw.Header().Set("Content-Type", promtext.ContentType)
	rw.Write(d.Metrics())
}
