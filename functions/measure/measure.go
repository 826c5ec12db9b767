// Package measure is what MAFIA's measurement primitives share (DESIGN.md
// §11): the common parameters (key, value, window, report), the
// measurement interval on the packet clock, and the report a keyed
// structure emits at a window's end as ffpf records. It registers no
// class; the counter, sketch and sample classes stand on it.
//
// A window is aligned to multiples of itself on the packet clock (the
// capture time of the packets, for a file), so a file gives the same
// reports on every run, whatever the batch size or the number of threads.
// The structures are reset at a window's end under the function's lock,
// after the report: in Go the reset is atomic for the datapath, and a
// reader sees the window that is filling.
package measure

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/ebpfgen"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/record"
)

// KeyParam is the key= parameter: the fields that make a flow.
func KeyParam(def string) functions.Param {
	return functions.Param{Name: "key", Type: functions.String, Default: def,
		Summary: "comma-separated key fields: srcip, dstip (with /prefix), srcport, dstport, proto, vlan, srcmac, dstmac, 5tuple",
		Check: func(v functions.Value) error {
			_, err := flowkey.Parse(v.Str)
			return err
		}}
}

// ValueParam is value=: what a packet adds.
var ValueParam = functions.Param{Name: "value", Type: functions.String, Default: "packets",
	Enum: []string{"packets", "bytes"}, Summary: "what a packet adds: 1 (packets) or its wire length (bytes)"}

// WindowParam is window=: the measurement interval.
var WindowParam = functions.Param{Name: "window", Type: functions.Duration,
	Summary: "measurement interval on the packet clock (aligned to multiples of itself); unset: the whole run",
	Check: func(v functions.Value) error {
		if v.Dur < time.Microsecond {
			return errors.New("a window is at least 1us")
		}
		return nil
	}}

// ReportParam is report=: how many keys a report lists.
func ReportParam(summary string) functions.Param {
	return functions.Param{Name: "report", Type: functions.Int, Summary: summary,
		Check: func(v functions.Value) error {
			if v.Int < 1 || v.Int > 1<<16 {
				return errors.New("report lists 1 to 65536 keys")
			}
			return nil
		}}
}

// ReportOrdering is the setting report=, under which a mergeable class
// runs ordered: its reports are records made in time order (why says
// from what).
func ReportOrdering(why string) functions.Ordering {
	return functions.Ordering{When: "report=", If: Reports, Why: why}
}

// Reports says whether a function with parameters p emits reports: its
// class's Produces.
func Reports(p functions.Params) bool { return p.Has("report") }

// EBPFWindow says why a function with parameters p cannot keep its
// window= in eBPF, or nil when it can: the flowspace's Go half closes each
// window, and sweeps its half of the double-buffered state, within the
// next one, so a window is at least ebpfgen.MinWindow there.
func EBPFWindow(p functions.Params) error {
	if p.Has("window") && p.Duration("window") < ebpfgen.MinWindow {
		return fmt.Errorf("a window shorter than %v runs in userspace: in eBPF the Go half closes each window and sweeps its state within the next", ebpfgen.MinWindow)
	}
	return nil
}

// Spec parses a function's key= (validated at populate).
func Spec(p functions.Params) *flowkey.Spec {
	sp, err := flowkey.Parse(p.Str("key"))
	if err != nil {
		panic(fmt.Sprintf("measure: key %q passed its check but does not parse: %v", p.Str("key"), err))
	}
	return sp
}

// CheckLinkType refuses packets whose headers keys cannot be read from.
func CheckLinkType(ctx *functions.Context) error {
	if !flowkey.Supported(ctx.LinkType) {
		return fmt.Errorf("cannot read flow keys from %v packets", ctx.LinkType)
	}
	return nil
}

// CheckKeyedLinkType is CheckLinkType for a class whose key= is optional:
// without a key it reads no flow key.
func CheckKeyedLinkType(ctx *functions.Context) error {
	if ctx.Params.Has("key") {
		return CheckLinkType(ctx)
	}
	return nil
}

// Bytes says whether value=bytes.
func Bytes(p functions.Params) bool { return p.Str("value") == "bytes" }

// ValueOf is what a packet adds: 1, or its wire length.
func ValueOf(m *buffers.Meta, bytes bool) uint64 {
	if bytes {
		return uint64(m.WireLen)
	}
	return 1
}

// Window is a measurement interval on the packet clock. Its zero value is
// a window that is the whole run. Until the first packet it is due at
// once, so that the flowspace ticks it with the first packet's time, and
// the window starts there (aligned) before the packet is counted.
type Window struct {
	Interval int64 // ns; 0: the whole run
	Start    int64 // of the window filling (the first packet's time, for the whole run)
	started  bool
}

// NewWindow returns the window of a function's window= parameter.
func NewWindow(p functions.Params) Window { return Window{Interval: int64(p.Duration("window"))} }

// Deadline implements the deadline of functions.Clocked.
func (w *Window) Deadline() int64 {
	switch {
	case !w.started:
		return math.MinInt64
	case w.Interval == 0:
		return functions.NoDeadline
	}
	return w.Start + w.Interval
}

// Advance moves the window to the one that contains now, returning the
// start of the window that closed (closed is false at the first tick,
// when no window was open).
func (w *Window) Advance(now int64) (start int64, closed bool) {
	if !w.started {
		w.started = true
		w.Start = now
		if w.Interval > 0 {
			w.Start = floor(now, w.Interval)
		}
		return 0, false
	}
	start = w.Start
	if w.Interval > 0 {
		w.Start = floor(now, w.Interval)
	}
	return start, true
}

// Started says whether a packet (or time) has reached the window.
func (w *Window) Started() bool { return w.started }

func floor(t, i int64) int64 {
	f := t / i * i
	if f > t { // negative times round down too
		f -= i
	}
	return f
}

// Out is a producer's record output with the accounting a producer shows:
// what it emitted (functions.Producer) and what did not fit.
type Out struct {
	*record.Out
	ID string // the producer's id, written in each record
}

// NewOut returns the output of the producer ctx describes.
func NewOut(ctx *functions.Context) Out { return Out{Out: record.NewOut(2048), ID: ctx.ID} }

// Key writes k as the record object "key".
func (o Out) Key(sp *flowkey.Spec, k *flowkey.Key) {
	o.Begin("key")
	sp.Record(&o.Builder, k)
	o.End()
}
