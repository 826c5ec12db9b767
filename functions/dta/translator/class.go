package translator

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/dta/layout"
	"github.com/ffpf-go/ffpf/functions/dta/wire"
	"github.com/ffpf-go/ffpf/functions/record"
)

// The state of a dta-translator function: what the library's Stats
// count, and the frames it did not translate.
var stateFields = []struct{ name, unit, summary string }{
	{"keywrite", "reports", "Key-Write reports translated"},
	{"append", "reports", "Append reports translated"},
	{"keyincrement", "reports", "Key-Increment reports translated"},
	{"postcarding", "reports", "Postcarding reports translated"},
	{"writes", "writes", "RDMA writes (records)"},
	{"fetchadds", "writes", "RDMA Fetch&Adds (records)"},
	{"bytes", "bytes", "bytes the writes carry"},
	{"batches", "batches", "Append batches written"},
	{"complete", "flows", "postcard flows written with all their hops"},
	{"evicted", "flows", "postcard flows written early: another flow took their cache line"},
	{"flushed", "flows", "postcard flows written incomplete at the end of the input"},
	{"duplicates", "reports", "postcards of a hop their flow had already (the later one kept)"},
	{"notdta", "packets", "frames that are not IPv4/UDP to the DTA port (filtered)"},
	{"short", "packets", "reports shorter than their headers (dropped)"},
	{"opcode", "packets", "reports of an unknown opcode (dropped)"},
	{"trailing", "packets", "UDP payloads longer than their report (dropped)"},
	{"redundancy", "packets", "Key-Write or Key-Increment reports of redundancy 0 or above 8, which a collector refuses (dropped)"},
	{"list", "packets", "Append reports to a list beyond lists= (dropped)"},
	{"hop", "packets", "postcards of a hop offset at or past hops= (dropped; hops count from 0)"},
	{"lost", "records", "write records that did not fit their slot"},
}

var state = func() *functions.State {
	s := &functions.State{}
	for _, f := range stateFields {
		s.Fields = append(s.Fields, functions.StateField{Name: f.name, Type: buffers.U64, Unit: f.unit,
			Merge: functions.MergeSum, Summary: f.summary})
	}
	return s
}()

func intParam(name, def, unit, summary string, lo, hi int64) functions.Param {
	return functions.Param{Name: name, Type: functions.Int, Default: def, Unit: unit, Summary: summary,
		Check: func(v functions.Value) error {
			if v.Int < lo || v.Int > hi {
				return fmt.Errorf("%s is %d to %d", name, lo, hi)
			}
			return nil
		}}
}

// hashedParam is the size of a structure the collector hashes keys into,
// which layout.CheckHashed bounds as the collector does.
func hashedParam(name, def, unit, summary string) functions.Param {
	return functions.Param{Name: name, Type: functions.Int, Default: def, Unit: unit, Summary: summary,
		Check: func(v functions.Value) error { return layout.CheckHashed(name, uint64(max(v.Int, 0))) }}
}

// Class is the dta-translator class.
var Class = &functions.Class{
	Name:      "dta-translator",
	Summary:   "DTA translator: reports (frames to UDP port 40040) become the collector memory writes of RDMA, as records",
	MinInputs: 1, MaxInputs: -1,
	Params: []functions.Param{
		hashedParam("slots", "1M", "slots", "Key-Write slots (M) of the collector, not a power of two"),
		hashedParam("counters", "1M", "counters", "Key-Increment counters of the collector, not a power of two"),
		hashedParam("chunks", "64K", "chunks", "postcard chunks (C) of the collector, not a power of two"),
		intParam("copies", "1", "chunks", "chunks written per postcard flow (the paper's N)", 1, layout.MaxRedundancy),
		intParam("hops", "5", "postcards", "postcards per flow (B): a flow is written when all are in", 1, layout.MaxHops),
		intParam("lists", "16", "lists", "Append lists of the collector", 1, layout.MaxLists),
		intParam("listsize", "64K", "entries", "entries per Append list", 1, layout.MaxSlots),
		{Name: "batch", Type: functions.Int, Default: "4", Unit: "entries", Summary: "Append entries per write (B): 1, 2, 4, 8 or 16",
			Check: func(v functions.Value) error {
				if v.Int < 1 || v.Int > MaxBatch || v.Int&(v.Int-1) != 0 {
					return errors.New("batch is 1, 2, 4, 8 or 16")
				}
				return nil
			}},
		intParam("port", "40040", "", "the UDP port of reports", 1, 65535),
	},
	State:    state,
	Produces: func(functions.Params) bool { return true },
	Validate: func(ctx *functions.Context) error {
		switch ctx.LinkType {
		case functions.LinkEthernet, functions.LinkRaw, functions.LinkIPv4:
			return nil
		}
		return fmt.Errorf("reads DTA reports from Ethernet or raw IPv4 frames, not %v", ctx.LinkType)
	},
	New: func(ctx *functions.Context) (functions.Function, error) { return NewFunction(ctx) },
}

func init() { functions.Register(Class) }

// ConfigOf returns the memory a function's parameters describe.
func ConfigOf(p functions.Params) Config {
	return Config{Slots: uint64(p.Int("slots")), Counters: uint64(p.Int("counters")), Chunks: uint64(p.Int("chunks")),
		Copies: int(p.Int("copies")), Hops: int(p.Int("hops")), Lists: int(p.Int("lists")),
		ListSize: uint64(p.Int("listsize")), Batch: int(p.Int("batch"))}
}

// Function is a dta-translator function: a Translator whose Memory is its
// record output.
type Function struct {
	t    *Translator
	rec  recorder
	lt   functions.LinkType
	port uint16
	m    *buffers.MBuf
	offs []int // of stateFields
	// frames not translated, by state field index
	notdta, short, opcode, trailing uint64
}

// NewFunction instantiates a dta-translator.
func NewFunction(ctx *functions.Context) (*Function, error) {
	m, err := state.NewMBuf(functions.TargetUser, ctx.Params)
	if err != nil {
		return nil, err
	}
	f := &Function{lt: ctx.LinkType, port: uint16(ctx.Params.Int("port")), m: m}
	f.rec = recorder{out: record.NewOut(512), id: ctx.ID}
	if f.t, err = New(ConfigOf(ctx.Params), &f.rec); err != nil {
		return nil, err
	}
	for _, sf := range stateFields {
		f.offs = append(f.offs, functions.FieldOf(m, sf.name).Offset)
	}
	return f, nil
}

// Translator returns the function's translator.
func (f *Function) Translator() *Translator { return f.t }

// SetEmit implements functions.Producer.
func (f *Function) SetEmit(emit func(*buffers.Batch)) { f.rec.out.SetEmit(emit) }

// Records implements functions.Producer.
func (f *Function) Records() uint64 { return f.rec.out.Records() }

// MBuf implements functions.Stateful.
func (f *Function) MBuf() *buffers.MBuf { return f.m }

// Payload returns the UDP payload of a frame of link type lt sent to port,
// IPv4 unfragmented; ok is false for any other frame. A payload cut short
// by the capture is returned cut: the report's decoder refuses it.
func Payload(lt functions.LinkType, pkt []byte, port uint16) (payload []byte, ok bool) {
	off := 0
	if lt == functions.LinkEthernet {
		if len(pkt) < 14 {
			return nil, false
		}
		et, o := binary.BigEndian.Uint16(pkt[12:]), 14
		for i := 0; i < 2 && (et == 0x8100 || et == 0x88a8); i++ { // VLAN tags
			if len(pkt) < o+4 {
				return nil, false
			}
			et, o = binary.BigEndian.Uint16(pkt[o+2:]), o+4
		}
		if et != 0x0800 {
			return nil, false
		}
		off = o
	}
	ip := pkt[off:]
	if len(ip) < 20 || ip[0]>>4 != 4 || ip[9] != 17 {
		return nil, false
	}
	ihl := int(ip[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(ip[2:]))
	if ihl < 20 || total < ihl+8 || binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 || len(ip) < ihl+8 {
		return nil, false // options cut, a lying length, a fragment
	}
	udp := ip[ihl:]
	if binary.BigEndian.Uint16(udp[2:]) != port {
		return nil, false
	}
	end := int(binary.BigEndian.Uint16(udp[4:]))
	if end < 8 || end > total-ihl {
		return nil, false // a UDP length that lies
	}
	end = min(end, len(udp))
	return udp[8:end], true
}

// Process translates the reports of b, emitting the writes as records; it
// passes nothing on. Malformed and refused reports are dropped and
// counted; frames that are no reports are filtered and counted.
func (f *Function) Process(b *buffers.Batch) {
	p := b.PBuf
	var rep wire.Report
	dropped := 0
	for _, e := range b.E[:b.N] {
		pl, ok := Payload(f.lt, p.Data(e.Slot), f.port)
		if !ok {
			f.notdta++
			continue
		}
		if err := wire.Decode(pl, &rep); err != nil {
			dropped++
			switch err.(*wire.Error).Reason {
			case wire.ReasonShort:
				f.short++
			case wire.ReasonOpcode:
				f.opcode++
			default:
				f.trailing++
			}
			continue
		}
		f.rec.ts = p.Meta(e.Slot).Timestamp
		if f.t.Translate(&rep) != nil {
			dropped++
		}
	}
	f.rec.out.Flush()
	f.publish()
	b.N, b.Dropped = 0, dropped
}

// Flush implements functions.Flusher: the partial Append batches and the
// cached postcard flows are written.
func (f *Function) Flush(now int64) {
	f.rec.ts = now
	f.t.Flush()
	f.rec.out.Flush()
	f.publish()
}

func (f *Function) publish() {
	s := &f.t.stats
	for i, v := range [...]uint64{s.Reports[wire.KeyWrite], s.Reports[wire.Append], s.Reports[wire.KeyIncrement],
		s.Reports[wire.Postcarding], s.Writes, s.FetchAdds, s.Bytes, s.Batches, s.Complete, s.Evicted, s.Flushed,
		s.Duplicates, f.notdta, f.short, f.opcode, f.trailing, s.Refused[BadRedundancy], s.Refused[BadList],
		s.Refused[BadHop], f.rec.out.Lost()} {
		f.m.Store64(f.offs[i], v)
	}
}

var (
	_ functions.Producer = (*Function)(nil)
	_ functions.Stateful = (*Function)(nil)
	_ functions.Flusher  = (*Function)(nil)
)
