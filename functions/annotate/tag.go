package annotate

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/match"
	"github.com/ffpf-go/ffpf/functions/measure"
)

var tagState = &functions.State{Fields: []functions.StateField{
	{Name: "nokey", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum,
		Summary: "packets without the layers the key needs, tagged 0 (key=)"},
	{Name: "nofield", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum,
		Summary: "packets without the header field, copied unchanged (field=)"},
}}

func init() {
	functions.Register(&functions.Class{
		Name:      "tag",
		Summary:   "annotate each packet with a value, a constant or its flow's hash, or write the value into a header field of a copy of each packet (MAFIA's Tag)",
		MinInputs: 1, MaxInputs: -1,
		Params: []functions.Param{
			{Name: "value", Type: functions.String,
				Summary: "the tag of every packet: a number, or an expression of match's language over its fields, annotations and named state (ipv4.tos | 1, q.value, pkt.outport)",
				Check:   func(v functions.Value) error { return match.CheckExpr(v.Str, false) }},
			{Name: "key", Type: functions.String,
				Summary: "tag each packet with a 53-bit hash of these key fields (srcip/24, dstport, 5tuple, …): one tag per flow",
				Check:   func(v functions.Value) error { _, err := flowkey.Parse(v.Str); return err }},
			{Name: "seed", Type: functions.Int, Default: "0", With: "key", Summary: "seed of the key's hash (key=)"},
			{Name: "field", Type: functions.String,
				Summary: "write value= into this header field of a copy of each packet (ipv4.tos, ipv4.dscp, ip.dscp, ipv4.id, ipv4.csum, ipv6.hlim, vlan.id, …): the copies are the output"},
			{Name: "checksum", Type: functions.String, Default: "update", Enum: []string{"update", "keep"}, With: "field",
				Summary: "update: the IPv4 header checksum follows the field written (RFC 1624); keep: it is left as it was (MAFIA's tags, which may carry data in it)"},
		},
		Reads: func(p functions.Params) ([]string, error) {
			if !p.Has("value") {
				return nil, nil
			}
			return match.Refs(p.Str("value"))
		},
		Produces:    func(p functions.Params) bool { return p.Has("field") },
		State:       tagState,
		Concurrency: functions.Mergeable,
		OrderedWhen: []functions.Ordering{{When: "field=", If: func(p functions.Params) bool { return p.Has("field") },
			Why: "its copies are records it writes into a PBuf of its own, in order"}},
		Targets: []functions.Target{functions.TargetUser, functions.TargetP4},
		Runs: func(t functions.Target, p functions.Params) error {
			if err := match.UserRuns(t, p, nil, "value"); err != nil {
				return err
			}
			return tagRuns(t, p)
		},
		Code:      functions.P4Code(p4TagCode),
		Annotates: 1,
		Readable:  func(functions.Params) []string { return []string{"value"} },
		Validate: func(ctx *functions.Context) error {
			v, k := ctx.Params.Has("value"), ctx.Params.Has("key")
			switch {
			case ctx.Params.Has("field"):
				return checkField(ctx)
			case v == k:
				return errors.New("tag takes one of value=N (a constant) and key=FIELDS (the flow's hash)")
			case k:
				return measure.CheckLinkType(ctx)
			}
			return nil
		},
		New: func(ctx *functions.Context) (functions.Function, error) {
			t, err := NewTag(ctx)
			if err != nil || !ctx.Params.Has("field") {
				return t, err
			}
			cp := newCopier(ctx, t.m)
			cp.t = t
			return &TagCopy{Tag: t, cp: cp}, nil
		},
	})
}

// Tag writes its value, or the hash of the packet's flow key, in its
// annotation word of every packet. A flow's tag is the top 53 bits of
// flowkey's hash: a number from 0 to 2^53−1, exact as a float64 too, so
// "t.value % 100 < 10" selects a tenth of the flows, always the same.
type Tag struct {
	at    int
	value uint64
	expr  *match.Expr // value= that is not a constant
	sp    *flowkey.Spec
	seed  uint64
	lt    functions.LinkType
	key   flowkey.Key
	m     *buffers.MBuf
	nokey int
	p4    bool // on a switch: a flow's tag is crc32 of its key
}

// NewTag instantiates a tag function.
func NewTag(ctx *functions.Context) (*Tag, error) {
	m, err := tagState.NewMBuf(functions.TargetUser, ctx.Params)
	if err != nil {
		return nil, err
	}
	t := &Tag{at: ctx.Ann, seed: uint64(ctx.Params.Int("seed")), lt: ctx.LinkType,
		m: m, nokey: functions.FieldOf(m, "nokey").Offset, p4: ctx.Target == functions.TargetP4}
	if ctx.Params.Has("value") {
		if c, ok := constValue(ctx.Params.Str("value")); ok {
			t.value = c
		} else if t.expr, err = match.NewExpr(ctx, ctx.Params.Str("value"), false); err != nil {
			return nil, err
		}
	}
	if ctx.Params.Has("key") {
		t.sp = measure.Spec(ctx.Params)
	}
	return t, nil
}

// Process tags the batch and passes it on.
func (t *Tag) Process(b *buffers.Batch) {
	p := b.PBuf
	if t.expr != nil {
		for _, e := range b.E[:b.N] {
			p.Ann(e.Slot)[t.at] = t.valueOf(p, e.Slot)
		}
		return
	}
	if t.sp == nil {
		for _, e := range b.E[:b.N] {
			p.Ann(e.Slot)[t.at] = t.value
		}
		return
	}
	var none uint64
	for _, e := range b.E[:b.N] {
		v := uint64(0)
		if t.sp.Extract(t.lt, p.Data(e.Slot), &t.key) {
			v = t.sp.Hash(&t.key, t.seed) >> 11
			if t.p4 {
				h1, _ := t.sp.P4Hashes(&t.key)
				v = uint64(h1)
			}
		} else {
			none++
		}
		p.Ann(e.Slot)[t.at] = v
	}
	if none > 0 {
		t.m.Add64(t.nokey, none)
	}
}

// valueOf is value= of the packet at slot: the constant, or the
// expression's value (0 when the packet lacks a field it reads).
func (t *Tag) valueOf(p *buffers.PBuf, slot uint32) uint64 {
	v, _ := t.valueOk(p, slot)
	return v
}

// valueOk is valueOf, and whether the packet had the fields value=
// reads (0 and false when it had not).
func (t *Tag) valueOk(p *buffers.PBuf, slot uint32) (uint64, bool) {
	if t.expr == nil {
		return t.value, true
	}
	v, ok := t.expr.Int(p, slot)
	if !ok {
		return 0, false
	}
	return uint64(v), true
}

// constValue parses value= when it is a whole number (the common case:
// no expression to evaluate per packet).
func constValue(s string) (uint64, bool) {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 0, 64)
	return uint64(v), err == nil
}

// MBuf implements functions.Stateful.
func (t *Tag) MBuf() *buffers.MBuf { return t.m }

// ReadNames implements functions.Readable.
func (t *Tag) ReadNames() []string { return []string{"value"} }

// ReadInt implements functions.IntReadable: value, the packet's tag.
func (t *Tag) ReadInt(name string) (functions.IntReader, error) {
	if name != "value" {
		return nil, fmt.Errorf("tag has no %q to read (it has value)", name)
	}
	at := t.at
	return func(p *buffers.PBuf, slot uint32) int64 { return int64(p.Ann(slot)[at]) }, nil
}

// Read implements functions.Readable: the tag as a float64 (exact for a
// flow's tag and for constants below 2^53).
func (t *Tag) Read(name string) (functions.Reader, error) {
	r, err := t.ReadInt(name)
	if err != nil {
		return nil, err
	}
	return func(p *buffers.PBuf, slot uint32) float64 { return float64(r(p, slot)) }, nil
}

// TagCopy is a tag with field=: a producer whose output is a copy of each
// packet it receives with the header field set (see copy.go). Every packet
// it receives counts as filtered; its copies are its records.
type TagCopy struct {
	*Tag
	cp *copier
}

// Process copies the batch's packets and hands the copies on.
func (t *TagCopy) Process(b *buffers.Batch) {
	t.cp.process(b, t.at, t.m)
	b.N = 0
}

// SetEmit implements functions.Producer.
func (t *TagCopy) SetEmit(emit func(*buffers.Batch)) { t.cp.emit = emit }

// Records implements functions.Producer: the copies handed on.
func (t *TagCopy) Records() uint64 { return t.cp.records.Load() }

var (
	_ functions.Producer = (*TagCopy)(nil)
	_ functions.Stateful = (*TagCopy)(nil)

	_ functions.Readable    = (*Tag)(nil)
	_ functions.IntReadable = (*Tag)(nil)
	_ functions.Stateful    = (*Tag)(nil)
)
