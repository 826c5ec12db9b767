// Package reporter is the DTA reporter, the function class dta: it turns
// each packet or record that reaches it into one DTA report (Key-Write,
// Append, Key-Increment or Postcarding) whose key, data, counter and hop
// come from packet fields, record fields or numbers. It is a producer: its
// output is the reports as real Ethernet/IPv4/UDP frames to port 40040
// (link type EN10MB, so export writes a pcap that tcpdump and Wireshark
// read), and with to= it also sends each report as a UDP datagram, a batch
// per sendmmsg call.
//
// The sharp edge: a report has 32-bit keys and data. A wider key (a MAC,
// an IPv6 address, a report's flow-key object) folds into its CRC-32; a
// datum above 2^32−1 saturates and is counted. A packet or record without
// a field the report needs makes no report and is counted, not dropped
// silently. What a collector could never take (a redundancy past 8, a
// list past 2^20−1, a hop past 7: layout's limits) is refused when the
// request is checked, or for a hop read from a field, not reported and
// counted.
package reporter

import (
	"fmt"
	"math"
	"net/netip"
	"strings"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/dta/layout"
	"github.com/ffpf-go/ffpf/functions/dta/wire"
	"github.com/ffpf-go/ffpf/functions/match"
	"github.com/ffpf-go/ffpf/functions/record"
	"github.com/ffpf-go/ffpf/internal/udpsend"
)

var state = &functions.State{Fields: []functions.StateField{
	{Name: "reports", Type: buffers.U64, Unit: "reports", Merge: functions.MergeSum, Summary: "reports made (frames emitted)"},
	{Name: "nofield", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum, Summary: "packets or records without a field the report needs, or with a hop past 7 that no collector keeps: no report"},
	{Name: "saturated", Type: buffers.U64, Unit: "reports", Merge: functions.MergeSum, Summary: "reports whose 32-bit data was above 2^32−1 and was sent as 2^32−1"},
	{Name: "sent", Type: buffers.U64, Unit: "reports", Merge: functions.MergeSum, Summary: "datagrams the kernel took (to=)"},
	{Name: "unsent", Type: buffers.U64, Unit: "reports", Merge: functions.MergeSum, Summary: "datagrams the kernel refused: a full send buffer or an error (to=)"},
	{Name: "refused", Type: buffers.U64, Unit: "notices", Merge: functions.MergeSum, Summary: "ICMP unreachable notices read from the socket's error queue: each is a sent report that reached no receiver (to=)"},
	{Name: "sendcalls", Type: buffers.U64, Merge: functions.MergeSum, Summary: "sendmmsg calls (to=)"},
}}

var ops = map[string]wire.Opcode{"keywrite": wire.KeyWrite, "append": wire.Append,
	"keyincrement": wire.KeyIncrement, "postcarding": wire.Postcarding}

// Class is the dta class.
var Class = &functions.Class{
	Name:      "dta",
	Summary:   "DTA reporter: a Key-Write, Append, Key-Increment or Postcarding report per packet or record, as Ethernet/IPv4/UDP frames and, with to=, UDP datagrams",
	MinInputs: 1, MaxInputs: -1,
	Params: []functions.Param{
		{Name: "op", Type: functions.String, Required: true, Enum: []string{"keywrite", "append", "keyincrement", "postcarding"},
			Summary: "the primitive"},
		{Name: "key", Type: functions.String, Summary: "the key (keywrite, keyincrement, postcarding): a packet field, a record field or a number; wider than 32 bits folds into its CRC-32"},
		{Name: "data", Type: functions.String, Summary: "the data (keywrite, append, postcarding; keyincrement: the counter, default 1): a packet field, a record field or a number"},
		{Name: "redundancy", Type: functions.Int, Summary: "N: slots written per key (keywrite, keyincrement; default 2), 1 to 8",
			Check: func(v functions.Value) error {
				return layout.CheckRedundancy("redundancy", int(max(min(v.Int, math.MaxInt32), math.MinInt32)))
			}},
		{Name: "list", Type: functions.Int, Summary: "the Append list's id (append), 0 to 2^20-1",
			Check: func(v functions.Value) error {
				if v.Int < 0 || v.Int >= layout.MaxLists {
					return fmt.Errorf("list=%d: a collector hosts lists 0 to %d", v.Int, layout.MaxLists-1)
				}
				return nil
			}},
		{Name: "hop", Type: functions.String, Summary: "the hop offset, 0 (the first hop) to 7 (postcarding): a packet field, a record field or a number"},
		{Name: "immediate", Type: functions.Bool, Default: "false", Summary: "set the immediate flag (the collector is to be told at once)"},
		{Name: "to", Type: functions.String, Summary: "also send each report as a UDP datagram to HOST:PORT (IPv4)",
			Check: func(v functions.Value) error {
				host, _, err := splitHostPort(v.Str)
				if err != nil {
					return err
				}
				if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil && !a.Unmap().Is4() {
					return fmt.Errorf("to=%s: the reports go over IPv4, not to an IPv6 address", v.Str)
				}
				return nil
			}},
	},
	State:        state,
	TakesRecords: true,
	Produces:     func(functions.Params) bool { return true },
	Validate:     validate,
	New:          func(ctx *functions.Context) (functions.Function, error) { return New(ctx) },
}

func init() { functions.Register(Class) }

// DefaultRedundancy is N when redundancy= is not given: the paper's
// compromise (§4) and the reference reporter's.
const DefaultRedundancy = 2

func splitHostPort(s string) (string, uint16, error) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 {
		return "", 0, fmt.Errorf("to=%s is not HOST:PORT", s)
	}
	var port uint64
	if _, err := fmt.Sscanf(s[i+1:], "%d", &port); err != nil || port == 0 || port > 65535 || fmt.Sprint(port) != s[i+1:] {
		return "", 0, fmt.Errorf("to=%s: the port is 1 to 65535", s)
	}
	return s[:i], uint16(port), nil
}

// needs lists what each primitive reads, for validation.
func needs(op wire.Opcode) (key, data, list, hop bool) {
	switch op {
	case wire.KeyWrite:
		return true, true, false, false
	case wire.Append:
		return false, true, true, false
	case wire.KeyIncrement:
		return true, false, false, false
	case wire.Postcarding:
		return true, true, false, true
	}
	return
}

func validate(ctx *functions.Context) error {
	p := ctx.Params
	op := ops[p.Str("op")]
	key, data, list, hop := needs(op)
	for _, c := range []struct {
		name string
		need bool
	}{{"key", key}, {"data", data}, {"list", list}, {"hop", hop}} {
		switch {
		case c.need && !p.Has(c.name):
			return fmt.Errorf("op=%v needs %s=", op, c.name)
		case !c.need && p.Has(c.name) && !(op == wire.KeyIncrement && c.name == "data"):
			return fmt.Errorf("op=%v takes no %s=", op, c.name)
		}
	}
	if p.Has("redundancy") && (op == wire.Append || op == wire.Postcarding) {
		return fmt.Errorf("op=%v takes no redundancy=", op)
	}
	if hop && p.Has("hop") { // a chunk holds layout.MaxHops hops: a collector drops a postcard past them
		if v := parseValue(p.Str("hop")); v.lit && v.n >= layout.MaxHops {
			return fmt.Errorf("hop=%s is past %d, the last hop offset a collector keeps (a chunk holds %d hops)", p.Str("hop"), layout.MaxHops-1, layout.MaxHops)
		}
	}
	if ctx.LinkType != functions.LinkRecord {
		for _, name := range []string{"key", "data", "hop"} {
			if !p.Has(name) {
				continue
			}
			if v := parseValue(p.Str(name)); !v.lit {
				if err := match.IsIntField(v.name); err != nil {
					return fmt.Errorf("%s=: %v", name, err)
				}
			}
		}
	}
	ctx.Output = functions.LinkEthernet
	return nil
}

// Reporter is a dta function.
type Reporter struct {
	op         wire.Opcode
	redundancy uint8
	list       uint32
	immediate  bool
	key, data  value
	hop        value
	hasKey     bool
	hasData    bool
	hasHop     bool

	records bool          // the input is ffpf records, not packets
	fields  *match.Fields // packet fields, in value.index order

	m                                *buffers.MBuf
	reports, nofield, saturated      int // offsets in m
	sent, unsent, refused, sendcalls int
	fr                               *framer
	snd                              *udpsend.Sender
	out                              *buffers.Batch
	emit                             func(*buffers.Batch)
	nReports, nNofield, nSaturated   uint64
}

// New instantiates a dta function.
func New(ctx *functions.Context) (*Reporter, error) {
	p := ctx.Params
	m, err := state.NewMBuf(functions.TargetUser, p)
	if err != nil {
		return nil, err
	}
	r := &Reporter{op: ops[p.Str("op")], redundancy: DefaultRedundancy, list: uint32(p.Int("list")),
		immediate: p.Bool("immediate"), records: ctx.LinkType == functions.LinkRecord, m: m}
	if p.Has("redundancy") {
		r.redundancy = uint8(p.Int("redundancy"))
	}
	if r.op == wire.Append || r.op == wire.Postcarding {
		r.redundancy = 0 // not in these reports
	}
	for _, f := range []struct {
		off  *int
		name string
	}{{&r.reports, "reports"}, {&r.nofield, "nofield"}, {&r.saturated, "saturated"}, {&r.sent, "sent"},
		{&r.unsent, "unsent"}, {&r.refused, "refused"}, {&r.sendcalls, "sendcalls"}} {
		*f.off = functions.FieldOf(m, f.name).Offset
	}
	var names []string
	use := func(param string, v *value, has *bool) {
		if !p.Has(param) {
			return
		}
		*v, *has = parseValue(p.Str(param)), true
		if !v.lit && !r.records {
			v.index = len(names)
			names = append(names, v.name)
		}
	}
	use("key", &r.key, &r.hasKey)
	use("data", &r.data, &r.hasData)
	use("hop", &r.hop, &r.hasHop)
	if r.op == wire.KeyIncrement && !r.hasData {
		r.data, r.hasData = value{lit: true, n: 1}, true
	}
	if !r.records {
		if r.fields, err = match.NewFields(ctx.LinkType, names...); err != nil {
			return nil, err
		}
	}
	src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), SrcPort)
	dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), wire.Port)
	if p.Has("to") {
		if r.snd, err = udpsend.Dial(p.Str("to")); err != nil {
			return nil, err
		}
		src = r.snd.Local
		dst = r.snd.Remote()
		if !src.Addr().Is4() || !dst.Addr().Is4() {
			src = netip.AddrPortFrom(netip.AddrFrom4(src.Addr().As4()), src.Port())
			dst = netip.AddrPortFrom(netip.AddrFrom4(dst.Addr().As4()), dst.Port())
		}
	}
	r.fr = newFramer(src, dst)
	pb := buffers.NewPBuf(buffers.MaxBatch, MaxFrame)
	r.out = buffers.NewBatch(pb, 0, buffers.MaxBatch, 0)
	return r, nil
}

// SetEmit implements functions.Producer.
func (r *Reporter) SetEmit(emit func(*buffers.Batch)) { r.emit = emit }

// Records implements functions.Producer.
func (r *Reporter) Records() uint64 { return r.m.Load64(r.reports) }

// MBuf implements functions.Stateful.
func (r *Reporter) MBuf() *buffers.MBuf { return r.m }

// get reads v for the current packet or record.
func (r *Reporter) get(v *value, rec []byte) (n uint64, wide, ok bool) {
	switch {
	case v.lit:
		return v.n, false, true
	case r.records:
		f, found := record.Find(rec, v.name)
		if !found {
			return 0, false, false
		}
		return fromRecord(f)
	}
	x, ok := r.fields.Int(v.index)
	return uint64(x), false, ok
}

// report fills rep from the packet or record in slot; ok is false when a
// field is missing.
func (r *Reporter) report(p *buffers.PBuf, slot uint32, rep *wire.Report) bool {
	var rec []byte
	if r.records {
		rec = p.Data(slot)
	} else {
		r.fields.Set(p, slot)
	}
	*rep = wire.Report{Op: r.op, Immediate: r.immediate, Redundancy: r.redundancy, List: r.list}
	if r.hasKey {
		k, wide, ok := r.get(&r.key, rec)
		if !ok {
			return false
		}
		if wide {
			rep.Key = uint32(k)
		} else {
			rep.Key = key32(k)
		}
	}
	if r.hasData {
		d, _, ok := r.get(&r.data, rec)
		if !ok {
			return false
		}
		if r.op == wire.KeyIncrement {
			rep.Counter = d
		} else if d > math.MaxUint32 {
			rep.Data = math.MaxUint32
			r.nSaturated++
		} else {
			rep.Data = uint32(d)
		}
	}
	if r.hasHop {
		h, _, ok := r.get(&r.hop, rec)
		if !ok || h >= layout.MaxHops { // a postcard no collector keeps
			return false
		}
		rep.Hop = uint8(h)
	}
	return true
}

// Process makes a report of each packet or record of b and emits them; it
// passes nothing on (its output is its reports).
func (r *Reporter) Process(b *buffers.Batch) {
	p := b.PBuf
	var rep wire.Report
	for _, e := range b.E[:b.N] {
		if !r.report(p, e.Slot, &rep) {
			r.nNofield++
			continue
		}
		frame := r.out.NextSlot()
		frame, _ = rep.Append(frame[:PayloadOff])
		n := r.fr.finish(frame)
		r.out.Commit(uint32(n), uint32(n), p.Meta(e.Slot).Timestamp)
		r.out.Now = max(r.out.Now, b.Now)
		r.nReports++
		if r.out.Room() == 0 {
			r.flush()
		}
	}
	r.flush()
	b.N = 0
}

// flush sends and emits the reports made so far and publishes the counts.
func (r *Reporter) flush() {
	if r.out.N > 0 {
		if r.snd != nil {
			r.snd.Send(r.out, payload)
		}
		if r.emit != nil {
			r.emit(r.out)
		}
		r.out.Reset()
	}
	r.publish()
}

// publish adds the counts gathered since the last call to the state.
func (r *Reporter) publish() {
	add := func(off int, n *uint64) {
		if *n != 0 {
			r.m.Add64(off, *n)
			*n = 0
		}
	}
	add(r.reports, &r.nReports)
	add(r.nofield, &r.nNofield)
	add(r.saturated, &r.nSaturated)
	if s := r.snd; s != nil {
		add(r.sent, &s.Sent)
		add(r.unsent, &s.Unsent)
		add(r.refused, &s.Refused)
		add(r.sendcalls, &s.Calls)
	}
}

// Flush implements functions.Flusher: the notices that came back since the
// last batch are counted.
func (r *Reporter) Flush(int64) {
	if r.snd != nil {
		r.snd.Drain()
	}
	r.publish()
}

// Close implements functions.Closer: it closes the socket.
func (r *Reporter) Close() error {
	if r.snd == nil {
		return nil
	}
	return r.snd.Close()
}

var (
	_ functions.Producer = (*Reporter)(nil)
	_ functions.Stateful = (*Reporter)(nil)
	_ functions.Closer   = (*Reporter)(nil)
	_ functions.Flusher  = (*Reporter)(nil)
)
