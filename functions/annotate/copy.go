package annotate

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/match"
)

// A tag with field= is a producer: its output is a copy of each packet
// with one header field set to value= (the IPv4 header checksum updated),
// of the link type of the packets it receives, so that what follows it
// (an export to a pcap file, a filter) sees the modified packets. A packet
// without the field (an ARP frame for ipv4.tos, an untagged one for
// vlan.id, one cut short before it) is copied unchanged and counted in
// nofield.

// header is a field tag can write in a copy.
type header struct {
	family byte   // '4' IPv4, '6' IPv6, 'i' either, 'v' the outermost VLAN tag, 's' an ez-Segway message
	max    uint64 // largest value
	// set writes v into the field of the header at h (IPv4: its first 20
	// bytes; IPv6: its first 8; VLAN: the 2-byte TCI; ez-Segway: its 16
	// bytes), keeping the header's checksum right when keep is false (it
	// is left as it was otherwise).
	set func(h []byte, v uint64, keep bool)
}

// The fields, named as match reads them.
var headers = map[string]header{
	"ipv4.tos":  {'4', 255, func(h []byte, v uint64, k bool) { set4(h, 0, uint16(h[0])<<8|uint16(v), k) }},
	"ipv4.dscp": {'4', 63, func(h []byte, v uint64, k bool) { set4(h, 0, uint16(h[0])<<8|uint16(v)<<2|uint16(h[1]&3), k) }},
	"ipv4.ecn":  {'4', 3, func(h []byte, v uint64, k bool) { set4(h, 0, uint16(h[0])<<8|uint16(h[1]&^3)|uint16(v), k) }},
	"ipv4.ttl":  {'4', 255, func(h []byte, v uint64, k bool) { set4(h, 8, uint16(v)<<8|uint16(h[9]), k) }},
	"ipv4.id":   {'4', 0xffff, func(h []byte, v uint64, k bool) { set4(h, 4, uint16(v), k) }},
	"ipv4.csum": {'4', 0xffff, func(h []byte, v uint64, _ bool) { put16(h[10:], uint16(v)) }},
	"ipv6.tc":   {'6', 255, func(h []byte, v uint64, _ bool) { setTC(h, uint8(v)) }},
	"ipv6.dscp": {'6', 63, func(h []byte, v uint64, _ bool) { setTC(h, uint8(v)<<2|tc(h)&3) }},
	"ipv6.ecn":  {'6', 3, func(h []byte, v uint64, _ bool) { setTC(h, tc(h)&^3|uint8(v)) }},
	"ipv6.hlim": {'6', 255, func(h []byte, v uint64, _ bool) { h[7] = uint8(v) }},
	"ip.dscp":   {'i', 63, nil},
	"ip.ecn":    {'i', 3, nil},
	"vlan.id":   {'v', 4095, func(h []byte, v uint64, _ bool) { put16(h, get16(h)&^0x0fff|uint16(v)) }},
	"vlan.pcp":  {'v', 7, func(h []byte, v uint64, _ bool) { put16(h, get16(h)&0x1fff|uint16(v)<<13) }},
	// ez-Segway's message (match.SegwayPort): the checksum kept right is
	// the UDP datagram's, when it has one.
	"segway.ts":   {'s', 255, func(h []byte, v uint64, _ bool) { h[1] = uint8(v) }},
	"segway.time": {'s', ^uint64(0), func(h []byte, v uint64, _ bool) { binary.BigEndian.PutUint64(h[8:], v) }},
}

// headerNames lists the fields, sorted, for messages.
func headerNames() string {
	var names []string
	for n := range headers {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// copyLinkTypes are the link types whose headers tag finds.
var copyLinkTypes = []functions.LinkType{functions.LinkEthernet, functions.LinkRaw, functions.LinkIPv4,
	functions.LinkIPv6, functions.LinkLinuxSLL}

// checkField validates field= and value= against it.
func checkField(ctx *functions.Context) error {
	name := ctx.Params.Str("field")
	h, ok := headers[name]
	if !ok {
		return fmt.Errorf("tag cannot write field %q (it writes %s)", name, headerNames())
	}
	if ctx.Params.Has("key") || !ctx.Params.Has("value") {
		return fmt.Errorf("tag with field=%s writes value=N into a copy of each packet: give value=, not key=", name)
	}
	// A constant must fit; an expression's value is cut to the field's
	// width, as a switch assigns it.
	if v, ok := constValue(ctx.Params.Str("value")); ok && v > h.max {
		return fmt.Errorf("%s holds 0 to %d, not %d", name, h.max, int64(v))
	}
	if !slices.Contains(copyLinkTypes, ctx.LinkType) {
		return fmt.Errorf("tag field= writes into Ethernet, raw IP or Linux cooked packets, not %s", ctx.LinkType)
	}
	ctx.Output = ctx.LinkType // copies of the packets it receives
	return nil
}

// copier is the producer half of a Tag with field=.
type copier struct {
	h       header
	set     [2]func(h []byte, v uint64, keep bool) // for IPv4 and IPv6 headers (nil where the field is not)
	keep    bool                                   // checksum=keep
	t       *Tag                                   // its value of each packet
	lt      functions.LinkType
	out     *buffers.Batch
	emit    func(*buffers.Batch)
	records atomic.Uint64
	nofield int // offset of the MBuf field
}

// newCopier sizes the copies' PBuf for packets of snap bytes: a batch of
// slots, fewer of long ones (16 MiB at most).
func newCopier(ctx *functions.Context, m *buffers.MBuf) *copier {
	name := ctx.Params.Str("field")
	snap := ctx.Snaplen
	if snap <= 0 {
		snap = 262144
	}
	slots := max(1, min(buffers.MaxBatch, (16<<20)/snap))
	p := buffers.NewPBuf(slots, snap)
	c := &copier{h: headers[name], keep: ctx.Params.Str("checksum") == "keep", lt: ctx.LinkType,
		out: buffers.NewBatch(p, 0, slots, 0), nofield: functions.FieldOf(m, "nofield").Offset}
	switch c.h.family {
	case '4':
		c.set[0] = c.h.set
	case '6':
		c.set[1] = c.h.set
	case 'i': // ip.dscp, ip.ecn: the field of either family
		f := strings.TrimPrefix(name, "ip.")
		c.set = [2]func([]byte, uint64, bool){headers["ipv4."+f].set, headers["ipv6."+f].set}
	}
	return c
}

// process copies the batch's packets, each with the field set, into the
// output and hands them on; the annotation words come along, the tag's
// own (at) set to the value.
func (c *copier) process(b *buffers.Batch, at int, m *buffers.MBuf) {
	var none uint64
	p := b.PBuf
	o := c.out
	o.Now = b.Now
	for _, e := range b.E[:b.N] {
		if o.Room() == 0 {
			c.flush()
			o.Now = b.Now
		}
		md := p.Meta(e.Slot)
		v, ok := c.t.valueOk(p, e.Slot)
		v &= c.h.max
		slot := o.Base + uint32(o.N)
		o.Append(p.Data(e.Slot), md.WireLen, md.Timestamp)
		a := o.PBuf.Ann(slot)
		*a = *p.Ann(e.Slot)
		a[at] = v
		if !ok || !c.write(o.PBuf.Data(slot), v) {
			none++
		}
	}
	c.flush()
	if none > 0 {
		m.Add64(c.nofield, none)
	}
}

func (c *copier) flush() {
	if c.out.N == 0 {
		return
	}
	c.records.Add(uint64(c.out.N))
	if c.emit != nil {
		c.emit(c.out)
	}
	c.out.Reset()
}

// write sets the field in pkt to v; false when pkt has none.
func (c *copier) write(pkt []byte, v uint64) bool {
	l3, etype, vlan := layers(c.lt, pkt)
	if c.h.family == 'v' {
		if vlan < 0 {
			return false
		}
		c.h.set(pkt[vlan:vlan+2], v, c.keep)
		return true
	}
	if l3 < 0 {
		return false
	}
	h := pkt[l3:]
	if c.h.family == 's' {
		return c.writeSegway(h, etype, v)
	}
	switch {
	case etype == 0x0800 && c.set[0] != nil && len(h) >= 20 && h[0]>>4 == 4 && h[0]&15 >= 5:
		c.set[0](h, v, c.keep)
		return true
	case etype == 0x86dd && c.set[1] != nil && len(h) >= 40 && h[0]>>4 == 6:
		c.set[1](h, v, c.keep)
		return true
	}
	return false
}

// writeSegway sets a field of the ez-Segway message in the IP datagram at
// h (IPv4, or IPv6 with UDP as its first next header), keeping the UDP
// checksum right (RFC 1624) unless checksum=keep or the datagram has none.
func (c *copier) writeSegway(h []byte, etype uint16, v uint64) bool {
	l4 := -1
	switch {
	case etype == 0x0800 && len(h) >= 20 && h[0]>>4 == 4 && h[0]&15 >= 5 && h[9] == 17 && get16(h[6:])&0x1fff == 0:
		l4 = int(h[0]&15) * 4
	case etype == 0x86dd && len(h) >= 40 && h[0]>>4 == 6 && h[6] == 17:
		l4 = 40
	}
	if l4 < 0 || len(h) < l4+8+match.SegwayLen || get16(h[l4+2:]) != match.SegwayPort {
		return false
	}
	u, m := h[l4:], h[l4+8:l4+8+match.SegwayLen]
	var before [match.SegwayLen]byte
	copy(before[:], m)
	c.h.set(m, v, c.keep)
	if sum := get16(u[6:]); sum != 0 && !c.keep {
		x := uint32(^sum)
		for i := 0; i < match.SegwayLen; i += 2 {
			x += uint32(^get16(before[i:])) + uint32(get16(m[i:]))
		}
		for x>>16 != 0 {
			x = x&0xffff + x>>16
		}
		if s := ^uint16(x); s != 0 {
			put16(u[6:], s)
		} else {
			put16(u[6:], 0xffff) // a computed 0 is sent as all ones (RFC 768)
		}
	}
	return true
}

// layers finds, in a packet of link type lt, the offset of its network
// header and its ethertype (-1 without), and the offset of the outermost
// VLAN tag's TCI (-1 without).
func layers(lt functions.LinkType, pkt []byte) (l3 int, etype uint16, vlan int) {
	vlan = -1
	switch lt {
	case functions.LinkEthernet, functions.LinkLinuxSLL:
		off := 12 // the type field
		if lt == functions.LinkLinuxSLL {
			off = 14
		}
		if len(pkt) < off+2 {
			return -1, 0, -1
		}
		etype = get16(pkt[off:])
		for lt == functions.LinkEthernet && (etype == 0x8100 || etype == 0x88a8 || etype == 0x9100) {
			if vlan < 0 && len(pkt) >= off+4 {
				vlan = off + 2 // the tag's TCI, though what follows may be cut
			}
			if len(pkt) < off+6 {
				return -1, 0, vlan
			}
			off += 4
			etype = get16(pkt[off:])
		}
		return off + 2, etype, vlan
	case functions.LinkRaw, functions.LinkIPv4, functions.LinkIPv6:
		if len(pkt) == 0 {
			return -1, 0, -1
		}
		switch pkt[0] >> 4 {
		case 4:
			return 0, 0x0800, -1
		case 6:
			return 0, 0x86dd, -1
		}
	}
	return -1, 0, -1
}

// set4 replaces the 16-bit word at off of the IPv4 header h with w and,
// unless keep, updates the header checksum incrementally (RFC 1624, eqn.
// 3): HC' = ~(~HC + ~m + m').
func set4(h []byte, off int, w uint16, keep bool) {
	old := get16(h[off:])
	put16(h[off:], w)
	if keep {
		return
	}
	sum := uint32(^get16(h[10:])) + uint32(^old) + uint32(w)
	sum = sum&0xffff + sum>>16
	sum = sum&0xffff + sum>>16
	put16(h[10:], ^uint16(sum))
}

func tc(h []byte) uint8 { return h[0]<<4 | h[1]>>4 }

func setTC(h []byte, v uint8) {
	h[0] = h[0]&0xf0 | v>>4
	h[1] = h[1]&0x0f | v<<4
}

func get16(b []byte) uint16    { return binary.BigEndian.Uint16(b) }
func put16(b []byte, v uint16) { binary.BigEndian.PutUint16(b, v) }
