package flowkey

import "github.com/ffpf-go/ffpf/functions/record"

// Record writes k's fields into a record, in the order the spec names
// them: addresses (with the prefix length when one was written), ports,
// proto and vlan as numbers, MACs. An absent port or VLAN is null, as
// AppendJSON writes it.
// It allocates nothing.
func (sp *Spec) Record(b *record.Builder, k *Key) {
	h := k[0]
	for _, f := range sp.order {
		name := fieldNames[f]
		switch f {
		case SrcIP, DstIP:
			w := sp.srcW
			if f == DstIP {
				w = sp.dstW
			}
			p := &sp.pfx[f-SrcIP]
			hi, lo := k[w], k[w+1]
			switch uint8(h >> FamilyShift) {
			case 4:
				a := [4]byte{byte(hi >> 56), byte(hi >> 48), byte(hi >> 40), byte(hi >> 32)}
				if p.set {
					b.Prefix(name, a[:], p.v4)
				} else {
					b.Addr(name, a[:])
				}
			case 6:
				var a [16]byte
				for i := range 8 {
					a[i] = byte(hi >> (56 - 8*i))
					a[8+i] = byte(lo >> (56 - 8*i))
				}
				if p.set {
					b.Prefix(name, a[:], p.v6)
				} else {
					b.Addr(name, a[:])
				}
			}
		case SrcPort, DstPort:
			if h&PortsPresent == 0 {
				b.Null(name)
				continue
			}
			shift := SrcPortShift
			if f == DstPort {
				shift = DstPortShift
			}
			b.U64(name, h>>shift&0xffff)
		case Proto:
			b.U64(name, h>>ProtoShift&0xff)
		case VLAN:
			if h&VLANPresent == 0 {
				b.Null(name)
				continue
			}
			b.U64(name, h>>VLANShift&0xfff)
		case SrcMAC, DstMAC:
			w := sp.smacW
			if f == DstMAC {
				w = sp.dmacW
			}
			m := k[w]
			a := [6]byte{byte(m >> 40), byte(m >> 32), byte(m >> 24), byte(m >> 16), byte(m >> 8), byte(m)}
			b.MAC(name, a[:])
		}
	}
}
