package annotate

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/match"
	"github.com/ffpf-go/ffpf/functions/measure"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// timestamp and tag on a switch. Each computes its word for the packet
// and exports it to the functions after it on the switch, which read it
// as LABEL.ts or LABEL.value. The word stays on the switch: the link up
// carries the packet's bytes, not its annotation area, so a reader above
// the switch sees it only when the P4 flowspace carries it up.

// p4Timestamp exports the switch's time of the packet, in ns: its clock
// (ingress_global_timestamp, µs: the capture time for a port replaying a
// capture file, the switch's own otherwise) times 1000, by shifts (a
// switch has no multiplier).
type p4Timestamp struct{}

func (p4Timestamp) Lower(b *p4gen.Builder) error {
	ts := b.Meta("ts", 64)
	t := p4gen.Cast{Bits: 64, X: b.Time}
	shl := func(n uint64) p4gen.Expr { return p4gen.B(p4gen.Shl, t, p4gen.C(n, 64)) }
	// t·1000 = t·1024 − t·16 − t·8
	b.Add(p4gen.Assign{Dst: ts, X: p4gen.B(p4gen.Sub, p4gen.B(p4gen.Sub, shl(10), shl(4)), shl(3))})
	b.Export("ts", ts)
	return nil
}

// p4Tag exports the tag: value=, or with key= crc32 of the key's words
// (flowkey.P4Hashes: one tag per flow, as on the host, but other numbers
// than flowkey's hash), 0 for a packet without the key, which counts in
// nokey.
type p4Tag struct {
	value uint64
	sp    *flowkey.Spec
}

func (t p4Tag) Lower(b *p4gen.Builder) error {
	v := b.Meta("value", 64)
	if t.sp == nil {
		b.Add(p4gen.Assign{Dst: v, X: p4gen.C(t.value, 64)})
		b.Export("value", v)
		return nil
	}
	k := t.sp.LowerP4(b)
	nokey := b.Counter("nokey", 1, p4gen.Packets, "nokey", "", 0)
	h1, _ := k.Hashes(b)
	b.Add(p4gen.If{Cond: k.HasKey(),
		Then: []p4gen.Stmt{p4gen.Assign{Dst: v, X: p4gen.Cast{Bits: 64, X: h1}}},
		Else: []p4gen.Stmt{p4gen.Assign{Dst: v, X: p4gen.C(0, 64)}, p4gen.Count{Counter: nokey, Index: p4gen.C(0, 32)}}})
	b.Export("value", v)
	return nil
}

func p4TagCode(ctx *functions.Context) (p4gen.Function, error) {
	if ctx.Params.Has("field") {
		return newFieldTag(ctx)
	}
	if err := tagRuns(functions.TargetP4, ctx.Params); err != nil {
		return nil, err
	}
	if !ctx.Params.Has("key") {
		v, ok := constValue(ctx.Params.Str("value"))
		if !ok {
			if err := match.P4Check(ctx.Params.Str("value"), false); err != nil {
				return nil, err
			}
			return p4ValueTag{expr: ctx.Params.Str("value")}, nil
		}
		return p4Tag{value: v}, nil
	}
	if ctx.LinkType != functions.LinkEthernet {
		return nil, errors.New("a switch reads Ethernet frames")
	}
	return p4Tag{sp: measure.Spec(ctx.Params)}, nil
}

// p4ValueTag is tag with value= an expression on a switch: the value
// computed for the packet (0 when it lacks a field it reads), exported.
type p4ValueTag struct{ expr string }

func (t p4ValueTag) Lower(b *p4gen.Builder) error {
	x, present, err := match.P4Value(b, t.expr, nil)
	if err != nil {
		return err
	}
	v := b.Meta("value", 64)
	b.Add(p4gen.Assign{Dst: v, X: p4gen.Mux{Cond: present, Then: x, Else: p4gen.C(0, 64)}})
	b.Export("value", v)
	return nil
}

// FieldTag is tag with field= on a switch, where the copy a host makes is
// the packet itself: the field is written in place, and the switch
// forwards the packet so (MAFIA's tags of the packets a switch on a path
// forwards). On a switch below a host the function stays above (tagRuns:
// there its output is records, which a switch sends up otherwise). A
// path's program may Defer the write to a copy of the packet instead (the
// stream a duplicate starts, which leaves for a collector): Lower then
// computes the value and whether the packet has its fields, and Write
// gives the statements that write it, for the copy's pass.
type FieldTag struct {
	field, value string
	keep         bool
	// Deferred, set before Lower, keeps the packet as it is.
	Deferred bool
	// Value and Present hold, after Lower, the value for the packet and
	// whether it had the fields the value reads.
	Value, Present p4gen.Ref
}

// tagHeaders are the fields a switch writes: the standard headers'
// values (p4gen.Hdr) and the IPv4 header word each lies in (its offset
// in the header; -1: the checksum itself).
var tagHeaders = map[string]struct {
	hdr  string
	bits int
	word int
}{
	"ipv4.tos": {"ipv4.tos", 8, 0}, "ipv4.ttl": {"ipv4.ttl", 8, 8}, "ipv4.id": {"ipv4.id", 16, 4},
	"ipv4.csum": {"ipv4.checksum", 16, -1},
}

func newFieldTag(ctx *functions.Context) (*FieldTag, error) {
	f := ctx.Params.Str("field")
	_, ok := tagHeaders[f]
	switch {
	case f == "segway.ts" || f == "segway.time":
		if ctx.Params.Str("checksum") != "keep" {
			return nil, fmt.Errorf("on a switch tag writes %s with checksum=keep (the UDP checksum left as it was), as MAFIA's tags are", f)
		}
	case !ok:
		return nil, fmt.Errorf("on a switch tag writes ipv4.tos, ipv4.ttl, ipv4.id, ipv4.csum, segway.ts and segway.time, not %s", f)
	}
	if ctx.LinkType != functions.LinkEthernet {
		return nil, errors.New("a switch reads Ethernet frames")
	}
	if err := match.P4Check(ctx.Params.Str("value"), false); err != nil {
		return nil, err
	}
	return &FieldTag{field: f, value: ctx.Params.Str("value"), keep: ctx.Params.Str("checksum") == "keep"}, nil
}

func (t *FieldTag) Lower(b *p4gen.Builder) error {
	x, present, err := match.P4Value(b, t.value, nil)
	if err != nil {
		return err
	}
	t.Value, t.Present = b.Meta("value", 64), b.Meta("present", 1)
	b.Add(p4gen.Assign{Dst: t.Value, X: p4gen.Mux{Cond: present, Then: x, Else: p4gen.C(0, 64)}},
		p4gen.Assign{Dst: t.Present, X: p4gen.Cast{Bits: 1, X: present}})
	b.Export("value", t.Value)
	if t.Deferred {
		return nil
	}
	nofield := b.Counter("nofield", 1, p4gen.Packets, "nofield", "", 0)
	b.Add(p4gen.If{Cond: p4gen.B(p4gen.Eq, t.Present, p4gen.C(1, 1)), Then: t.Write(b.Prog, t.Value),
		Else: []p4gen.Stmt{p4gen.Count{Counter: nofield, Index: p4gen.C(0, 32)}}})
	return nil
}

// Write returns the statements that write value (bit<64>, cut to the
// field) into the field of a packet whose IPv4 header prog's parser
// extracted, keeping the header checksum right (RFC 1624) unless
// checksum=keep; a packet without the header is left as it is.
func (t *FieldTag) Write(prog *p4gen.Program, value p4gen.Expr) []p4gen.Stmt {
	if name, ok := strings.CutPrefix(t.field, "segway."); ok {
		// ez-Segway's header, which the parser extracts once a program
		// writes it: a datagram without it is left as it is.
		p4gen.UseSegway(prog)
		f, valid := p4gen.SegwayField(name)
		return []p4gen.Stmt{p4gen.If{Cond: valid, Then: []p4gen.Stmt{p4gen.Assign{Dst: f, X: p4gen.Cast{Bits: f.Bits, X: value}}}}}
	}
	h := tagHeaders[t.field]
	cur, valid := p4gen.Hdr(h.hdr)
	parts := p4gen.HdrParts(h.hdr)
	nv := p4gen.Expr(p4gen.Cast{Bits: h.bits, X: value})
	var ss []p4gen.Stmt
	if !t.keep && h.word >= 0 {
		// The 16-bit word the field lies in, before and after.
		oldW, newW := word(h.word, cur, nv)
		csum, _ := p4gen.Hdr("ipv4.checksum")
		c32 := func(x p4gen.Expr) p4gen.Expr { return p4gen.Cast{Bits: 32, X: x} }
		inv := func(x p4gen.Expr) p4gen.Expr { return p4gen.Unary{Op: p4gen.Inv, X: x} }
		sum := p4gen.B(p4gen.Add, p4gen.B(p4gen.Add, c32(inv(csum)), c32(inv(oldW))), c32(newW))
		fold := func(x p4gen.Expr) p4gen.Expr {
			return p4gen.B(p4gen.Add, p4gen.B(p4gen.And, x, p4gen.C(0xffff, 32)), p4gen.B(p4gen.Shr, x, p4gen.C(16, 32)))
		}
		newC := inv(p4gen.Cast{Bits: 16, X: fold(fold(sum))})
		for _, part := range p4gen.HdrParts("ipv4.checksum") {
			ss = append(ss, p4gen.Assign{Dst: part, X: newC})
		}
	}
	at := h.bits
	for _, part := range parts {
		at -= part.Bits
		ss = append(ss, p4gen.Assign{Dst: part, X: p4gen.Slice{X: nv, Hi: at + part.Bits - 1, Lo: at}})
	}
	// As the copier in Go finds the header: version 4, IHL at least 5,
	// whatever the total length says.
	isV4 := p4gen.AllOf(valid, p4gen.B(p4gen.Eq, mustHdr("ipv4.version"), p4gen.C(4, 4)),
		p4gen.B(p4gen.Ge, mustHdr("ipv4.ihl"), p4gen.C(5, 4)))
	return []p4gen.Stmt{p4gen.If{Cond: isV4, Then: ss}}
}

// word returns the IPv4 header's 16-bit word at off with the field cur
// (8 or 16 bits) as it is and as nv.
func word(off int, cur, nv p4gen.Expr) (oldW, newW p4gen.Expr) {
	if cur.Type().Bits == 16 {
		return cur, nv
	}
	if off == 0 {
		// version and IHL, then ToS
		vihl := p4gen.Concat(mustHdr("ipv4.version"), mustHdr("ipv4.ihl"))
		return p4gen.Concat(vihl, cur), p4gen.Concat(vihl, nv)
	}
	o := mustHdr("ipv4.proto") // the TTL's word: TTL, then protocol
	return p4gen.Concat(cur, o), p4gen.Concat(nv, o)
}

func mustHdr(name string) p4gen.Expr { x, _ := p4gen.Hdr(name); return x }

// tagRuns: on a switch, tag rewrites no copies, and its flows' tags are
// crc32's, not seeded.
func tagRuns(t functions.Target, p functions.Params) error {
	if t != functions.TargetP4 {
		return nil
	}
	switch {
	case p.Has("field"):
		return errors.New("tag with field= runs above the switch: its output is rewritten copies of the packets (on a path of switches, ffpf p4 net, it rewrites the packets themselves)")
	case p.Has("seed") && p.Int("seed") != 0:
		return errors.New("seed= keeps tag above the switch: a switch tags a flow with crc32 of its key, which takes no seed")
	}
	return nil
}
