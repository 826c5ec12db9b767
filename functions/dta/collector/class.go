package collector

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/dta/wire"
)

// classState is the class's MBuf: its counters, all u64, in this order.
// The memory itself stays out of it (gigabytes, read by queries).
var classFields = []struct{ name, unit, summary string }{
	{"frames", "packets", "frames that reached the function"},
	{"other", "packets", "frames that are no report: not UDP to the port, a fragment, a UDP header that lies"},
	{"keywrite", "reports", "Key-Write reports ingested"},
	{"append", "reports", "Append reports ingested (entries)"},
	{"keyincrement", "reports", "Key-Increment reports ingested"},
	{"postcarding", "reports", "postcards ingested"},
	{"immediate", "reports", "reports ingested that asked for an ACK (none is sent)"},
	{"short", "reports", "reports shorter than their headers (or cut by the capture's snap length)"},
	{"opcode", "reports", "reports of an opcode no primitive has"},
	{"trailing", "reports", "reports longer than their primitive's"},
	{"list", "reports", "Append reports to a list the collector does not host"},
	{"redundancy", "reports", "Key-Write or Key-Increment reports with N = 0 or N > 8"},
	{"hop", "reports", "postcards of a hop at or past B"},
	{"value", "reports", "postcards of a value outside V"},
	{"disabled", "reports", "reports of a primitive the collector does not host"},
}

var classState = func() *functions.State {
	s := &functions.State{}
	for _, f := range classFields {
		s.Fields = append(s.Fields, functions.StateField{Name: f.name, Type: buffers.U64, Unit: f.unit,
			Merge: functions.MergeShared, Summary: f.summary})
	}
	return s
}()

// classLimit bounds the class's memory, as the flowgraph bounds a
// function's state.
const classLimit = 1 << 30

func specParam(name, syntax string, parse func(string) error) functions.Param {
	return functions.Param{Name: name, Type: functions.String, Summary: "host " + name + ": " + syntax,
		Check: func(v functions.Value) error { return parse(v.Str) }}
}

func classConfig(p functions.Params) (Config, error) {
	var c Config
	var err error
	if p.Has("keywrite") {
		if c.KeyWrite, err = ParseKeyWrite(p.Str("keywrite")); err != nil {
			return c, err
		}
	}
	if p.Has("append") {
		if c.Append, err = ParseAppend(p.Str("append")); err != nil {
			return c, err
		}
	}
	if p.Has("keyincrement") {
		if c.KeyIncrement, err = ParseKeyIncrement(p.Str("keyincrement")); err != nil {
			return c, err
		}
	}
	if p.Has("postcarding") {
		if c.Postcarding, err = ParsePostcarding(p.Str("postcarding")); err != nil {
			return c, err
		}
	}
	if !c.KeyWrite.Enabled() && !c.KeyIncrement.Enabled() && !c.Append.Enabled() && !c.Postcarding.Enabled() {
		return c, errors.New("dta-collector needs at least one of keywrite=, append=, keyincrement=, postcarding=")
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	if b := c.Bytes(); b > classLimit {
		return c, fmt.Errorf("the collector's memory would be %d MiB, more than a function's 1024 MiB (ffpf dta collect has no such bound)", b>>20)
	}
	return c, nil
}

func init() {
	functions.Register(&functions.Class{
		Name:      "dta-collector",
		Summary:   "a DTA collector: ingest the DTA reports among the frames (UDP to port 40040) into Key-Write, Append, Key-Increment and Postcarding memory, and answer queries (handlers)",
		MinInputs: 1, MaxInputs: -1,
		Params: []functions.Param{
			specParam("keywrite", "slots=M[,redundancy=N]", func(s string) error { _, err := ParseKeyWrite(s); return err }),
			specParam("append", "lists=L,size=S", func(s string) error { _, err := ParseAppend(s); return err }),
			specParam("keyincrement", "slots=M[,redundancy=N]", func(s string) error { _, err := ParseKeyIncrement(s); return err }),
			specParam("postcarding", "chunks=C[,hops=B][,redundancy=N][,values=V]", func(s string) error { _, err := ParsePostcarding(s); return err }),
			{Name: "port", Type: functions.Int, Default: "40040", Summary: "the UDP destination port of the reports",
				Check: func(v functions.Value) error {
					if v.Int < 1 || v.Int > 65535 {
						return errors.New("port is 1 to 65535")
					}
					return nil
				}},
		},
		State: classState,
		Validate: func(ctx *functions.Context) error {
			if _, err := classConfig(ctx.Params); err != nil {
				return err
			}
			switch ctx.LinkType {
			case functions.LinkEthernet, functions.LinkLinuxSLL, functions.LinkSLL2, functions.LinkRaw,
				functions.LinkIPv4, functions.LinkIPv6, functions.LinkNull, functions.LinkLoop:
				return nil
			}
			return fmt.Errorf("dta-collector reads IPv4 and IPv6 frames, not link type %v", ctx.LinkType)
		},
		New: func(ctx *functions.Context) (functions.Function, error) { return newClassFunction(ctx) },
	})
}

// Function is a dta-collector in a flowgraph: it finds the DTA reports
// among the frames it receives and ingests them; the frames pass on
// unchanged.
type Function struct {
	c    *Collector
	in   *Ingester
	m    *buffers.MBuf
	lt   functions.LinkType
	port uint16

	frames, other uint64 // only Process writes them, under the function's lock
}

func newClassFunction(ctx *functions.Context) (*Function, error) {
	cfg, err := classConfig(ctx.Params)
	if err != nil {
		return nil, err
	}
	c, err := New(cfg)
	if err != nil {
		return nil, err
	}
	m, err := classState.NewMBuf(functions.TargetUser, ctx.Params)
	if err != nil {
		return nil, err
	}
	return &Function{c: c, in: c.NewIngester(), m: m, lt: ctx.LinkType, port: uint16(ctx.Params.Int("port"))}, nil
}

// Collector is the function's collector, for queries.
func (f *Function) Collector() *Collector { return f.c }

// Process ingests the batch's reports and passes every frame on.
func (f *Function) Process(b *buffers.Batch) {
	p := b.PBuf
	for _, e := range b.E[:b.N] {
		f.frames++
		pl, ok := udpPayload(f.lt, p.Data(e.Slot), f.port)
		switch {
		case ok:
			f.in.IngestPayload(pl)
		case pl != nil: // a report the capture cut short
			f.in.n.dropped[ReasonShort]++
		default:
			f.other++
		}
	}
	f.in.Flush()
	f.store()
}

// store copies the counters into the MBuf, in classFields' order.
func (f *Function) store() {
	n := &f.c.n
	v := [...]uint64{f.frames, f.other,
		atomic.LoadUint64(&n.reports[wire.KeyWrite]), atomic.LoadUint64(&n.reports[wire.Append]),
		atomic.LoadUint64(&n.reports[wire.KeyIncrement]), atomic.LoadUint64(&n.reports[wire.Postcarding]),
		atomic.LoadUint64(&n.immediate)}
	for i, x := range v {
		f.m.Store64(8*i, x)
	}
	for i, r := range Reasons {
		f.m.Store64(8*(len(v)+i), atomic.LoadUint64(&n.dropped[r]))
	}
}

// MBuf implements functions.Stateful.
func (f *Function) MBuf() *buffers.MBuf { return f.m }

// Summary implements functions.Summarizer: the counters, and reports,
// the reports ingested in all.
func (f *Function) Summary() map[string]any {
	s := map[string]any{}
	var total uint64
	for i, fd := range classFields {
		v := f.m.Load64(8 * i)
		s[fd.name] = v
		if i >= 2 && i <= 5 { // keywrite, append, keyincrement, postcarding
			total += v
		}
	}
	s["reports"] = total
	return s
}

// Handlers implements functions.Handlers: the queries, as ffpf dta query
// asks them ("keywrite KEY", "append LIST [N]", "keyincrement KEY",
// "postcarding KEY").
func (f *Function) Handlers() []functions.Handler {
	h := []functions.Handler{{Name: "summary", Summary: "the state as --json shows it", Call: func(string) (any, error) { return f.Summary(), nil }}}
	for _, p := range []string{"keywrite", "keyincrement", "postcarding"} {
		h = append(h, functions.Handler{Name: p, Summary: p + " KEY: query " + p, Call: func(arg string) (any, error) {
			return f.c.Query(p, url.Values{"key": {strings.TrimSpace(arg)}})
		}})
	}
	h = append(h, functions.Handler{Name: "append", Summary: "append LIST [N]: the list's last N (10) entries", Call: func(arg string) (any, error) {
		w := strings.Fields(arg)
		if len(w) < 1 || len(w) > 2 {
			return nil, errors.New("append takes a LIST and optionally N")
		}
		q := url.Values{"list": {w[0]}}
		if len(w) == 2 {
			q.Set("n", w[1])
		}
		return f.c.Query("append", q)
	}})
	return h
}

var (
	_ functions.Stateful   = (*Function)(nil)
	_ functions.Summarizer = (*Function)(nil)
	_ functions.Handlers   = (*Function)(nil)
)

func be16(b []byte, off int) uint16 { return binary.BigEndian.Uint16(b[off:]) }

// udpPayload finds the payload of a UDP datagram to port in a frame of
// link type lt. ok is false for a frame that is none (pl nil), or whose
// datagram the capture cut (pl not nil: a short report).
func udpPayload(lt functions.LinkType, b []byte, port uint16) (pl []byte, ok bool) {
	off, ver := 0, 0
	switch lt {
	case functions.LinkEthernet:
		if len(b) < 14 {
			return nil, false
		}
		t, o := be16(b, 12), 14
		for i := 0; i < 4 && (t == 0x8100 || t == 0x88a8 || t == 0x9100); i++ {
			if len(b) < o+4 {
				return nil, false
			}
			t, o = be16(b, o+2), o+4
		}
		off, ver = o, etherVersion(t)
	case functions.LinkLinuxSLL:
		if len(b) < 16 {
			return nil, false
		}
		off, ver = 16, etherVersion(be16(b, 14))
	case functions.LinkSLL2:
		if len(b) < 20 {
			return nil, false
		}
		off, ver = 20, etherVersion(be16(b, 0))
	case functions.LinkRaw:
		if len(b) < 1 {
			return nil, false
		}
		ver = int(b[0] >> 4)
	case functions.LinkIPv4:
		ver = 4
	case functions.LinkIPv6:
		ver = 6
	case functions.LinkNull, functions.LinkLoop:
		if len(b) < 4 {
			return nil, false
		}
		af := binary.BigEndian.Uint32(b)
		if lt == functions.LinkNull && af > 0xffff {
			af = binary.LittleEndian.Uint32(b)
		}
		switch af {
		case 2:
			ver = 4
		case 10, 24, 28, 30:
			ver = 6
		}
		off = 4
	}
	b = b[off:]
	var udp []byte
	switch ver {
	case 4:
		if len(b) < 20 || b[0]>>4 != 4 || b[9] != 17 {
			return nil, false
		}
		ihl := int(b[0]&0x0f) * 4
		if ihl < 20 || len(b) < ihl || be16(b, 6)&0x3fff != 0 { // options past the capture; a fragment
			return nil, false
		}
		end := min(len(b), max(int(be16(b, 2)), ihl)) // Ethernet padding is not the datagram's
		udp = b[ihl:end]
	case 6:
		if len(b) < 40 || b[0]>>4 != 6 || b[6] != 17 { // extension headers: not a report as a reporter sends it
			return nil, false
		}
		udp = b[40:min(len(b), 40+int(be16(b, 4)))]
	default:
		return nil, false
	}
	if len(udp) < 8 || be16(udp, 2) != port {
		return nil, false
	}
	ulen := int(be16(udp, 4))
	switch {
	case ulen < 8:
		return nil, false
	case ulen > len(udp):
		return udp[8:], false
	}
	return udp[8:ulen], true
}

func etherVersion(t uint16) int {
	switch t {
	case 0x0800:
		return 4
	case 0x86dd:
		return 6
	}
	return 0
}
