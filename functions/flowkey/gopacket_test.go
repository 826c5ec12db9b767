package flowkey

import (
	"encoding/binary"
	"encoding/json"
	"net"
	"strconv"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/gen"
	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// expected computes a key from gopacket's decoding of an Ethernet frame, as
// a map (JSON-comparable); ok is false when gopacket could not decode a
// layer the key needs (adversarial frames have their own tests).
func expected(sp *Spec, data []byte) (m map[string]any, none, ok bool) {
	p := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.DecodeOptions{NoCopy: true})
	if p.ErrorLayer() != nil {
		return nil, false, false
	}
	m = map[string]any{}
	e, _ := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	if e == nil {
		return nil, true, true
	}
	var vlan any
	if q, _ := p.Layer(layers.LayerTypeDot1Q).(*layers.Dot1Q); q != nil {
		vlan = float64(q.VLANIdentifier)
	}
	var src, dst net.IP
	var fam int
	proto := -1
	var sport, dport any
	nonFirst := false
	exts, stopped := 0, false // the walk's bound: MaxIPv6Ext extension headers
	walk := func(nh layers.IPProtocol) {
		if exts >= MaxIPv6Ext {
			stopped = true
		}
		if !stopped {
			proto = int(nh)
			exts++
		}
	}
	for _, l := range p.Layers() {
		switch l := l.(type) {
		case *layers.IPv4:
			src, dst, fam, proto = l.SrcIP, l.DstIP, 4, int(l.Protocol)
			nonFirst = l.FragOffset != 0
			if !nonFirst && l.Flags&layers.IPv4MoreFragments != 0 && (proto == 6 || proto == 17 || proto == 132) &&
				len(l.Payload) >= 4 {
				sport, dport = float64(binary.BigEndian.Uint16(l.Payload)), float64(binary.BigEndian.Uint16(l.Payload[2:]))
			}
		case *layers.IPv6:
			src, dst, fam, proto = l.SrcIP, l.DstIP, 6, int(l.NextHeader)
			if l.HopByHop != nil {
				walk(l.HopByHop.NextHeader)
			}
		case *layers.IPv6Routing:
			walk(l.NextHeader)
		case *layers.IPv6Destination:
			walk(l.NextHeader)
		case *layers.IPv6Fragment:
			walk(l.NextHeader)
			nonFirst = nonFirst || l.FragmentOffset != 0 && !stopped
			// gopacket decodes no further than a fragment header; a first
			// fragment's transport header is in its payload.
			if !nonFirst && (proto == 6 || proto == 17 || proto == 132) && len(l.Payload) >= 4 {
				sport, dport = float64(binary.BigEndian.Uint16(l.Payload)), float64(binary.BigEndian.Uint16(l.Payload[2:]))
			}
		case *layers.TCP:
			sport, dport = float64(l.SrcPort), float64(l.DstPort)
		case *layers.UDP:
			sport, dport = float64(l.SrcPort), float64(l.DstPort)
		case *layers.SCTP:
			sport, dport = float64(l.SrcPort), float64(l.DstPort)
		}
	}
	if nonFirst || stopped {
		sport, dport = nil, nil
	}
	addr := func(a net.IP, f Field) string {
		v4, v6, set := sp.Prefix(f)
		bits, n := v6, 128
		if fam == 4 {
			a, bits, n = a.To4(), v4, 32
		}
		s := a.Mask(net.CIDRMask(bits, n)).String()
		if set {
			s += "/" + strconv.Itoa(bits)
		}
		return s
	}
	for _, f := range sp.order {
		switch f {
		case SrcMAC:
			m["srcmac"] = e.SrcMAC.String()
		case DstMAC:
			m["dstmac"] = e.DstMAC.String()
		case VLAN:
			m["vlan"] = vlan
		default:
			if fam == 0 {
				return nil, true, true
			}
			switch f {
			case SrcIP:
				m["srcip"] = addr(src, SrcIP)
			case DstIP:
				m["dstip"] = addr(dst, DstIP)
			case SrcPort:
				m["srcport"] = sport
			case DstPort:
				m["dstport"] = dport
			case Proto:
				m["proto"] = float64(proto)
			}
		}
	}
	return m, false, true
}

// TestDifferentialGopacket compares keys of generated traffic (VLAN and
// QinQ tags, IPv6, adversarial frames) with gopacket's decoding.
func TestDifferentialGopacket(t *testing.T) {
	specs := []*Spec{mustParse(t, "5tuple,vlan,srcmac,dstmac"), mustParse(t, "dstip/20/56,srcip/8,proto")}
	for _, cfg := range []gen.Config{
		{Seed: 1, VLAN: 0.3, IPv6: 0.3},
		{Seed: 2, VLAN: 0.5, IPv6: 0.5, Malformed: 0.2},
	} {
		cfg.Packets = 30000
		cfg.Flows = 2000
		g := gen.New(cfg)
		buf := make([]byte, gen.MaxFrameLen)
		compared, withKey := 0, 0
		for {
			n, _, _, more := g.Next(buf)
			if !more {
				break
			}
			pkt := buf[:n]
			for _, sp := range specs {
				want, none, ok := expected(sp, pkt)
				if !ok {
					continue
				}
				compared++
				var k Key
				got := sp.Extract(functions.LinkEthernet, pkt, &k)
				if none {
					if got {
						t.Fatalf("seed %d: %s: key %s, gopacket finds no such layer in %x", cfg.Seed, sp, sp.Format(&k), pkt)
					}
					continue
				}
				if !got {
					t.Fatalf("seed %d: %s: no key, gopacket gives %v for %x", cfg.Seed, sp, want, pkt)
				}
				withKey++
				var have map[string]any
				if err := json.Unmarshal(sp.AppendJSON(nil, &k), &have); err != nil {
					t.Fatal(err)
				}
				wj, _ := json.Marshal(want)
				hj, _ := json.Marshal(have)
				if string(wj) != string(hj) {
					t.Fatalf("seed %d: %s of %x\n got %s\nwant %s", cfg.Seed, sp, pkt, hj, wj)
				}
			}
		}
		t.Logf("seed %d: %d comparisons, %d with a key", cfg.Seed, compared, withKey)
		if compared < int(cfg.Packets)*len(specs)*3/4 {
			t.Errorf("seed %d: only %d of %d frames comparable", cfg.Seed, compared, cfg.Packets)
		}
	}
}

// relink rewrites an Ethernet frame as the same packet under another link
// type; ok is false when that link type cannot carry it (tags or a non-IP
// payload on RAW, NULL, LOOP).
func relink(lt functions.LinkType, f []byte) (out []byte, ok bool) {
	if len(f) < 14 {
		return nil, false
	}
	et := binary.BigEndian.Uint16(f[12:])
	ipOnly := func() ([]byte, bool) {
		if et != 0x0800 && et != 0x86dd {
			return nil, false
		}
		return f[14:], true
	}
	switch lt {
	case functions.LinkLinuxSLL:
		h := sll(6, et)
		copy(h[6:], f[6:12])
		return cat(h, f[14:]), true
	case functions.LinkSLL2:
		h := sll2(6, et)
		copy(h[12:], f[6:12])
		return cat(h, f[14:]), true
	case functions.LinkRaw:
		return ipOnly()
	case functions.LinkNull, functions.LinkLoop:
		p, ok := ipOnly()
		if !ok {
			return nil, false
		}
		af := []byte{0, 0, 0, 2}
		if et == 0x86dd {
			af[3] = 30
		}
		if lt == functions.LinkNull && len(p)%2 == 0 { // either byte order
			af[0], af[3] = af[3], 0
		}
		return cat(af, p), true
	}
	return nil, false
}

// TestLinkTypes checks that every link type gives the key Ethernet gives
// for the same packet (without the fields that link type lacks).
func TestLinkTypes(t *testing.T) {
	g := gen.New(gen.Config{Seed: 5, Packets: 20000, VLAN: 0.3, IPv6: 0.4, Malformed: 0.2})
	buf := make([]byte, gen.MaxFrameLen)
	specs := map[functions.LinkType]*Spec{
		functions.LinkLinuxSLL: mustParse(t, "5tuple,vlan,srcmac"),
		functions.LinkSLL2:     mustParse(t, "5tuple,vlan,srcmac"),
		functions.LinkRaw:      mustParse(t, "5tuple,vlan"),
		functions.LinkNull:     mustParse(t, "srcip/24,dstip,srcport,dstport,proto"),
		functions.LinkLoop:     mustParse(t, "dstip/64,proto,srcport"),
	}
	seen := map[functions.LinkType]int{}
	for {
		n, _, _, more := g.Next(buf)
		if !more {
			break
		}
		for lt, sp := range specs {
			p, ok := relink(lt, buf[:n])
			if !ok {
				continue
			}
			var a, b Key
			okA := sp.Extract(functions.LinkEthernet, buf[:n], &a)
			okB := sp.Extract(lt, p, &b)
			if okA != okB || a != b {
				t.Fatalf("%s: key %v %s, Ethernet gives %v %s for %x", lt, okB, sp.Format(&b), okA, sp.Format(&a), buf[:n])
			}
			seen[lt]++
		}
	}
	for lt := range specs {
		if seen[lt] < 10000 {
			t.Errorf("%s: only %d frames", lt, seen[lt])
		}
	}
}
