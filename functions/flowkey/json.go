package flowkey

import (
	"net/netip"
	"strconv"
)

// AppendJSON appends k as a JSON object of the spec's fields, in the order
// written: addresses as strings ("10.0.1.0/24" with the prefix length when
// one was written, of the key's family), ports, proto and vlan as numbers,
// MACs as "aa:bb:cc:dd:ee:ff"; an absent port or VLAN is null. It allocates
// only when dst must grow.
func (sp *Spec) AppendJSON(dst []byte, k *Key) []byte {
	dst = append(dst, '{')
	h := k[0]
	for i, f := range sp.order {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = append(dst, fieldNames[f]...)
		dst = append(dst, '"', ':')
		switch f {
		case SrcIP, DstIP:
			w := sp.srcW
			if f == DstIP {
				w = sp.dstW
			}
			dst = sp.pfx[f-SrcIP].appendAddr(dst, uint8(h>>FamilyShift), k[w], k[w+1])
		case SrcPort, DstPort:
			if h&PortsPresent == 0 {
				dst = append(dst, "null"...)
				break
			}
			shift := SrcPortShift
			if f == DstPort {
				shift = DstPortShift
			}
			dst = strconv.AppendUint(dst, h>>shift&0xffff, 10)
		case Proto:
			dst = strconv.AppendUint(dst, h>>ProtoShift&0xff, 10)
		case VLAN:
			if h&VLANPresent == 0 {
				dst = append(dst, "null"...)
				break
			}
			dst = strconv.AppendUint(dst, h>>VLANShift&0xfff, 10)
		case SrcMAC, DstMAC:
			w := sp.smacW
			if f == DstMAC {
				w = sp.dmacW
			}
			dst = append(appendMAC(append(dst, '"'), k[w]), '"')
		}
	}
	return append(dst, '}')
}

// Format returns k as the JSON object AppendJSON writes.
func (sp *Spec) Format(k *Key) string { return string(sp.AppendJSON(nil, k)) }

func (p *prefix) appendAddr(dst []byte, fam uint8, hi, lo uint64) []byte {
	var a netip.Addr
	bitsKept := p.v6
	switch fam {
	case 4:
		a = netip.AddrFrom4([4]byte{byte(hi >> 56), byte(hi >> 48), byte(hi >> 40), byte(hi >> 32)})
		bitsKept = p.v4
	case 6:
		var b [16]byte
		for i := range 8 {
			b[i] = byte(hi >> (56 - 8*i))
			b[8+i] = byte(lo >> (56 - 8*i))
		}
		a = netip.AddrFrom16(b)
	default:
		return append(dst, "null"...)
	}
	dst = append(dst, '"')
	dst = a.AppendTo(dst)
	if p.set {
		dst = append(dst, '/')
		dst = strconv.AppendInt(dst, int64(bitsKept), 10)
	}
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

func appendMAC(dst []byte, m uint64) []byte {
	for i := 5; i >= 0; i-- {
		b := byte(m >> (8 * i))
		dst = append(dst, hexDigits[b>>4], hexDigits[b&15])
		if i > 0 {
			dst = append(dst, ':')
		}
	}
	return dst
}
