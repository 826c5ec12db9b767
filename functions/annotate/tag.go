package annotate

import (
	"errors"
	"fmt"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
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
			{Name: "value", Type: functions.Int, Summary: "the tag of every packet"},
			{Name: "key", Type: functions.String,
				Summary: "tag each packet with a 53-bit hash of these key fields (srcip/24, dstport, 5tuple, …): one tag per flow",
				Check:   func(v functions.Value) error { _, err := flowkey.Parse(v.Str); return err }},
			{Name: "seed", Type: functions.Int, Default: "0", With: "key", Summary: "seed of the key's hash (key=)"},
			{Name: "field", Type: functions.String,
				Summary: "write value= into this header field of a copy of each packet (ipv4.tos, ipv4.dscp, ip.dscp, ipv6.hlim, vlan.id, …): the copies are the output"},
		},
		Produces:    func(p functions.Params) bool { return p.Has("field") },
		State:       tagState,
		Concurrency: functions.Mergeable,
		OrderedWhen: []functions.Ordering{{When: "field=", If: func(p functions.Params) bool { return p.Has("field") },
			Why: "its copies are records it writes into a PBuf of its own, in order"}},
		Targets:   []functions.Target{functions.TargetUser, functions.TargetP4},
		Runs:      tagRuns,
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
			return &TagCopy{Tag: t, cp: newCopier(ctx, t.m)}, nil
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
	t := &Tag{at: ctx.Ann, value: uint64(ctx.Params.Int("value")), seed: uint64(ctx.Params.Int("seed")), lt: ctx.LinkType,
		m: m, nokey: functions.FieldOf(m, "nokey").Offset, p4: ctx.Target == functions.TargetP4}
	if ctx.Params.Has("key") {
		t.sp = measure.Spec(ctx.Params)
	}
	return t, nil
}

// Process tags the batch and passes it on.
func (t *Tag) Process(b *buffers.Batch) {
	p := b.PBuf
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
