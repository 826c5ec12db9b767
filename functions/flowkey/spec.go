package flowkey

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ffpf-go/ffpf/lang"
)

// Field is one part of a flow key.
type Field uint8

// The key fields, in the order of a key's words (see Key).
const (
	SrcIP Field = iota + 1
	DstIP
	SrcPort
	DstPort
	Proto
	VLAN
	SrcMAC
	DstMAC
)

var fieldNames = [...]string{SrcIP: "srcip", DstIP: "dstip", SrcPort: "srcport", DstPort: "dstport",
	Proto: "proto", VLAN: "vlan", SrcMAC: "srcmac", DstMAC: "dstmac"}

// String returns the field's name in a key spec ("srcip").
func (f Field) String() string {
	if f >= SrcIP && f <= DstMAC {
		return fieldNames[f]
	}
	return fmt.Sprintf("Field(%d)", uint8(f))
}

// FieldNames lists the words a key spec accepts, 5tuple included.
func FieldNames() []string {
	return []string{"srcip", "dstip", "srcport", "dstport", "proto", "vlan", "srcmac", "dstmac", "5tuple"}
}

// MaxWords is the size of the largest key, in 64-bit words: the header word,
// two addresses of two words and two MACs of one.
const MaxWords = 7

// Bits of a key's header word (word 0). A field the spec does not name is
// zero; so are the ports and the VLAN ID when absent (their present bits
// tell absent from zero).
const (
	FamilyShift  = 0  // 8 bits: 4 or 6 when an address is in the spec, else 0
	ProtoShift   = 8  // 8 bits: IPv4 protocol or IPv6 upper-layer next header
	SrcPortShift = 16 // 16 bits
	DstPortShift = 32 // 16 bits
	VLANShift    = 48 // 12 bits: the outermost tag's VLAN ID
	VLANPresent  = uint64(1) << 60
	PortsPresent = uint64(1) << 61
)

// Key is a flow key: up to MaxWords 64-bit words, of which a spec uses the
// first Spec.Words(); the others stay zero, so two keys of one spec compare
// with ==. Layout, in this order, each part only when the spec names it:
//
//	word 0      header: family, proto, ports, VLAN, present bits (the *Shift constants)
//	2 words     srcip: address bytes 0–7 and 8–15 read big-endian (IPv4: bytes 0–3, rest 0), prefix-masked
//	2 words     dstip: likewise
//	1 word      srcmac: the 6 bytes big-endian in the low 48 bits
//	1 word      dstmac: likewise
type Key [MaxWords]uint64

// Spec is a parsed key spec: which fields make a flow, with prefix lengths.
// It is immutable after Parse and safe for concurrent use.
type Spec struct {
	order  []Field // as written, 5tuple expanded
	has    [DstMAC + 1]bool
	words  int
	srcW   int // word index of srcip, or -1
	dstW   int
	smacW  int
	dmacW  int
	pfx    [2]prefix // srcip, dstip
	header uint64    // mask of word 0 bits the spec keeps
	needIP bool
}

// prefix is an address field's prefix lengths for each family and the masks
// they make of the address words.
type prefix struct {
	set        bool
	v4, v6     int // bits kept
	m4         uint64
	m6hi, m6lo uint64
}

func maskBits(n int) uint64 { // the top n of 64 bits
	if n <= 0 {
		return 0
	}
	if n >= 64 {
		return ^uint64(0)
	}
	return ^uint64(0) << (64 - n)
}

func newPrefix(set bool, v4, v6 int) prefix {
	p := prefix{set: set, v4: v4, v6: v6, m4: maskBits(v4) & 0xffffffff00000000}
	p.m6hi = maskBits(v6)
	p.m6lo = maskBits(v6 - 64)
	return p
}

// Parse parses a key spec: a comma-separated list of srcip, dstip, srcport,
// dstport, proto, vlan, srcmac, dstmac and 5tuple (srcip, dstip, srcport,
// dstport, proto). An address field may carry a prefix length: srcip/N keeps
// the first N bits of an IPv4 address (at most 32: srcip/48 keeps all of
// one) and the first N of an IPv6 address (N in 0..128); srcip/N4/N6 gives
// the two families their own lengths (N4 in 0..32, N6 in 0..128).
func Parse(s string) (*Spec, error) {
	sp := &Spec{srcW: -1, dstW: -1, smacW: -1, dmacW: -1}
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("empty key: name fields such as %s", strings.Join(FieldNames(), ", "))
	}
	add := func(f Field, p prefix) error {
		if sp.has[f] {
			return fmt.Errorf("key field %s given twice", f)
		}
		sp.has[f] = true
		sp.order = append(sp.order, f)
		if f == SrcIP {
			sp.pfx[0] = p
		} else if f == DstIP {
			sp.pfx[1] = p
		}
		return nil
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		name, plen, hasPrefix := strings.Cut(part, "/")
		name = strings.ToLower(name)
		p := newPrefix(false, 32, 128)
		if hasPrefix {
			if name != "srcip" && name != "dstip" {
				return nil, fmt.Errorf("key field %q: only srcip and dstip take a prefix length", part)
			}
			var err error
			if p, err = parsePrefix(name, plen); err != nil {
				return nil, err
			}
		}
		switch name {
		case "5tuple":
			for _, f := range []Field{SrcIP, DstIP, SrcPort, DstPort, Proto} {
				if err := add(f, newPrefix(false, 32, 128)); err != nil {
					return nil, err
				}
			}
			continue
		case "":
			return nil, fmt.Errorf("empty field in key %q", s)
		}
		f := fieldByName(name)
		if f == 0 {
			if sug, ok := lang.Suggest(name, FieldNames()); ok {
				return nil, fmt.Errorf("unknown key field %q (did you mean %q?)", name, sug)
			}
			return nil, fmt.Errorf("unknown key field %q (fields: %s)", name, strings.Join(FieldNames(), ", "))
		}
		if err := add(f, p); err != nil {
			return nil, err
		}
	}
	sp.layout()
	return sp, nil
}

func fieldByName(name string) Field {
	for f := SrcIP; f <= DstMAC; f++ {
		if fieldNames[f] == name {
			return f
		}
	}
	return 0
}

func parsePrefix(name, s string) (prefix, error) {
	a, b, two := strings.Cut(s, "/")
	v4, err := strconv.Atoi(a)
	if err != nil || a == "" || a[0] == '+' || a[0] == '-' {
		return prefix{}, fmt.Errorf("key field %s/%s: the prefix length must be a number", name, s)
	}
	if !two {
		if v4 > 128 {
			return prefix{}, fmt.Errorf("key field %s/%s: prefix length %d out of range 0..128", name, s, v4)
		}
		return newPrefix(true, min(v4, 32), v4), nil
	}
	v6, err := strconv.Atoi(b)
	if err != nil || b == "" || b[0] == '+' || b[0] == '-' {
		return prefix{}, fmt.Errorf("key field %s/%s: the IPv6 prefix length must be a number", name, s)
	}
	if v4 > 32 {
		return prefix{}, fmt.Errorf("key field %s/%s: IPv4 prefix length %d out of range 0..32", name, s, v4)
	}
	if v6 > 128 {
		return prefix{}, fmt.Errorf("key field %s/%s: IPv6 prefix length %d out of range 0..128", name, s, v6)
	}
	return newPrefix(true, v4, v6), nil
}

func (sp *Spec) layout() {
	w := 1
	if sp.has[SrcIP] {
		sp.srcW, w = w, w+2
	}
	if sp.has[DstIP] {
		sp.dstW, w = w, w+2
	}
	if sp.has[SrcMAC] {
		sp.smacW, w = w, w+1
	}
	if sp.has[DstMAC] {
		sp.dmacW, w = w, w+1
	}
	sp.words = w
	if sp.has[SrcIP] || sp.has[DstIP] {
		sp.header |= 0xff << FamilyShift
	}
	if sp.has[Proto] {
		sp.header |= 0xff << ProtoShift
	}
	if sp.has[SrcPort] {
		sp.header |= 0xffff<<SrcPortShift | PortsPresent
	}
	if sp.has[DstPort] {
		sp.header |= 0xffff<<DstPortShift | PortsPresent
	}
	if sp.has[VLAN] {
		sp.header |= 0xfff<<VLANShift | VLANPresent
	}
	sp.needIP = sp.has[SrcIP] || sp.has[DstIP] || sp.has[SrcPort] || sp.has[DstPort] || sp.has[Proto]
}

// Words returns how many words of a Key the spec uses (1 to MaxWords).
func (sp *Spec) Words() int { return sp.words }

// HeaderMask returns the bits of word 0 the spec keeps (the fields it
// names, their present bits, the family when it names an address); Extract
// clears the others.
func (sp *Spec) HeaderMask() uint64 { return sp.header }

// Has reports whether the spec names field f.
func (sp *Spec) Has(f Field) bool { return f >= SrcIP && f <= DstMAC && sp.has[f] }

// Fields returns the fields in the order written, 5tuple expanded.
func (sp *Spec) Fields() []Field { return append([]Field(nil), sp.order...) }

// Word returns the index of the first key word holding f (srcip, dstip,
// srcmac, dstmac), 0 for the fields of the header word, or -1 when the spec
// does not name f.
func (sp *Spec) Word(f Field) int {
	if !sp.Has(f) {
		return -1
	}
	switch f {
	case SrcIP:
		return sp.srcW
	case DstIP:
		return sp.dstW
	case SrcMAC:
		return sp.smacW
	case DstMAC:
		return sp.dmacW
	}
	return 0
}

// Prefix returns the prefix lengths of an address field (32 and 128 when
// none was written) and whether one was written.
func (sp *Spec) Prefix(f Field) (v4, v6 int, set bool) {
	var p prefix
	switch f {
	case SrcIP:
		p = sp.pfx[0]
	case DstIP:
		p = sp.pfx[1]
	default:
		return 0, 0, false
	}
	if !sp.has[f] {
		return 0, 0, false
	}
	return p.v4, p.v6, p.set
}

// String returns the spec in canonical form: the fields as written, 5tuple
// expanded, prefixes as srcip/N or srcip/N4/N6.
func (sp *Spec) String() string {
	var b strings.Builder
	for i, f := range sp.order {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(f.String())
		if f == SrcIP || f == DstIP {
			p := sp.pfx[f-SrcIP]
			if p.set {
				if p.v4 == min(p.v6, 32) {
					fmt.Fprintf(&b, "/%d", p.v6)
				} else {
					fmt.Fprintf(&b, "/%d/%d", p.v4, p.v6)
				}
			}
		}
	}
	return b.String()
}
