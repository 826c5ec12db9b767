package monitor

import (
	"net/netip"

	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/trumpet/event"
)

// pattern is a wildcard pattern of filters: which fields a filter fixes and
// how many bits of each address (tuple-space search: one hash table per
// pattern, so matching a flow costs one lookup per pattern, whatever the
// number of triggers). A port range other than a single port or any port
// is indexed as any port and checked on the candidates.
type pattern struct {
	fam          uint8 // 0: any family
	sbits, dbits uint8
	sport, dport bool
	proto        bool
}

// tuple is the hash table of one pattern: masked key → the filters.
type tuple struct {
	pat pattern
	m   map[Key][]filterRef
	// and is the pattern as word masks of an IPv4 key [0] and an IPv6
	// key [1]: a flow's masked key is its key ANDed with them.
	and [2]Key
}

type filterRef struct {
	trig int32
	f    *event.Filter
	// exact: the pattern decides the filter (no port range to check on
	// the candidates).
	exact bool
}

func (p *pattern) ands() (a [2]Key) {
	for i, fam := range [2]uint8{4, 6} {
		if p.fam != 0 {
			a[i][0] |= 0xff << flowkey.FamilyShift
		}
		if p.proto {
			a[i][0] |= 0xff << flowkey.ProtoShift
		}
		if p.sport || p.dport {
			a[i][0] |= flowkey.PortsPresent
		}
		if p.sport {
			a[i][0] |= 0xffff << flowkey.SrcPortShift
		}
		if p.dport {
			a[i][0] |= 0xffff << flowkey.DstPortShift
		}
		if p.sbits > 0 {
			a[i][1], a[i][2] = addrMask(fam, int(p.sbits))
		}
		if p.dbits > 0 {
			a[i][3], a[i][4] = addrMask(fam, int(p.dbits))
		}
	}
	return a
}

func portsExact(r event.PortRange) bool { return r.Lo == r.Hi || r == event.AnyPort }

type index struct {
	tuples []*tuple
	byPat  map[pattern]*tuple

	// The tuples' tables flattened into one open-addressing table keyed
	// by (tuple, masked key), for match: rebuilt at the first match after
	// a change (reusing its memory), it costs one multiply-shift hash and
	// a probe per pattern where a Go map lookup costs several times that.
	dirty  bool
	slots  []int32 // group+1; 0 is empty
	smask  uint64
	groups []flatGroup
	refs   []filterRef
	sink   int32 // keeps match's early loads
}

// flatGroup is one key of one tuple and its filters, refs[lo:hi].
type flatGroup struct {
	key    Key
	tuple  int32
	lo, hi int32
}

func (ix *index) flatten() {
	ix.dirty = false
	ix.groups, ix.refs = ix.groups[:0], ix.refs[:0]
	for ti, tp := range ix.tuples {
		for k, refs := range tp.m {
			ix.groups = append(ix.groups, flatGroup{key: k, tuple: int32(ti), lo: int32(len(ix.refs)), hi: int32(len(ix.refs) + len(refs))})
			ix.refs = append(ix.refs, refs...)
		}
	}
	size := 16
	for size < 2*len(ix.groups) {
		size <<= 1
	}
	if cap(ix.slots) < size {
		ix.slots = make([]int32, size)
	}
	ix.slots = ix.slots[:size]
	clear(ix.slots)
	ix.smask = uint64(size - 1)
	for gi := range ix.groups {
		g := &ix.groups[gi]
		i := flowkey.HashWords(g.key[:], uint64(g.tuple)) & ix.smask
		for ix.slots[i] != 0 {
			i = (i + 1) & ix.smask
		}
		ix.slots[i] = int32(gi + 1)
	}
}

func prefixWords(a netip.Addr, bits int) (hi, lo uint64) {
	b := a.As16()
	if a.Is4() {
		b4 := a.As4()
		return uint64(b4[0])<<56 | uint64(b4[1])<<48 | uint64(b4[2])<<40 | uint64(b4[3])<<32, 0
	}
	for i := range 8 {
		hi = hi<<8 | uint64(b[i])
		lo = lo<<8 | uint64(b[8+i])
	}
	return hi, lo
}

func topBits(n int) uint64 {
	if n <= 0 {
		return 0
	}
	if n >= 64 {
		return ^uint64(0)
	}
	return ^uint64(0) << (64 - n)
}

// addrMask returns the masks of an address's two words for a prefix of
// bits on family fam.
func addrMask(fam uint8, bits int) (hi, lo uint64) {
	if fam == 4 {
		return topBits(min(bits, 32)), 0
	}
	return topBits(min(bits, 64)), topBits(bits - 64)
}

func filterFamily(f *event.Filter) uint8 {
	for _, p := range []netip.Prefix{f.SrcIP, f.DstIP} {
		if p.IsValid() {
			if p.Addr().Is4() {
				return 4
			}
			return 6
		}
	}
	return 0
}

func patternOf(f *event.Filter) pattern {
	p := pattern{fam: filterFamily(f), proto: f.Proto >= 0,
		sport: f.SrcPort.Lo == f.SrcPort.Hi, dport: f.DstPort.Lo == f.DstPort.Hi}
	if f.SrcIP.IsValid() {
		p.sbits = uint8(f.SrcIP.Bits())
	}
	if f.DstIP.IsValid() {
		p.dbits = uint8(f.DstIP.Bits())
	}
	return p
}

// filterKey is the masked key a flow matching f has under f's pattern.
func filterKey(f *event.Filter, p *pattern) Key {
	var k Key
	if p.fam != 0 {
		k[0] = uint64(p.fam) << flowkey.FamilyShift
	}
	if p.proto {
		k[0] |= uint64(uint8(f.Proto)) << flowkey.ProtoShift
	}
	if p.sport || p.dport {
		k[0] |= flowkey.PortsPresent
	}
	if p.sport {
		k[0] |= uint64(f.SrcPort.Lo) << flowkey.SrcPortShift
	}
	if p.dport {
		k[0] |= uint64(f.DstPort.Lo) << flowkey.DstPortShift
	}
	if f.SrcIP.IsValid() {
		pf := f.SrcIP.Masked()
		hi, lo := prefixWords(pf.Addr(), pf.Bits())
		mh, ml := addrMask(p.fam, pf.Bits())
		k[1], k[2] = hi&mh, lo&ml
	}
	if f.DstIP.IsValid() {
		pf := f.DstIP.Masked()
		hi, lo := prefixWords(pf.Addr(), pf.Bits())
		mh, ml := addrMask(p.fam, pf.Bits())
		k[3], k[4] = hi&mh, lo&ml
	}
	return k
}

// matchFilter checks every field of f against k (the tuple search's
// candidates, for port ranges; and flows present when a trigger is added).
func matchFilter(f *event.Filter, k *Key) bool {
	fam := k.Family()
	for i, pf := range []netip.Prefix{f.SrcIP, f.DstIP} {
		if !pf.IsValid() {
			continue
		}
		pfam := uint8(6)
		if pf.Addr().Is4() {
			pfam = 4
		}
		if pfam != fam {
			return false
		}
		hi, lo := prefixWords(pf.Masked().Addr(), pf.Bits())
		mh, ml := addrMask(fam, pf.Bits())
		if k[1+2*i]&mh != hi&mh || k[2+2*i]&ml != lo&ml {
			return false
		}
	}
	if f.Proto >= 0 && int(k.Proto()) != f.Proto {
		return false
	}
	sp, dp, ok := k.Ports()
	for _, c := range []struct {
		r event.PortRange
		v uint16
	}{{f.SrcPort, sp}, {f.DstPort, dp}} {
		if c.r == event.AnyPort {
			continue
		}
		if !ok || c.v < c.r.Lo || c.v > c.r.Hi {
			return false
		}
	}
	return true
}

func (ix *index) add(trig int32, f *event.Filter) {
	if ix.byPat == nil {
		ix.byPat = map[pattern]*tuple{}
	}
	p := patternOf(f)
	tp := ix.byPat[p]
	if tp == nil {
		tp = &tuple{pat: p, m: map[Key][]filterRef{}, and: p.ands()}
		ix.byPat[p] = tp
		ix.tuples = append(ix.tuples, tp)
	}
	k := filterKey(f, &p)
	tp.m[k] = append(tp.m[k], filterRef{trig, f, portsExact(f.SrcPort) && portsExact(f.DstPort)})
	ix.dirty = true
}

func (ix *index) remove(trig int32) {
	ix.dirty = true
	for i := 0; i < len(ix.tuples); i++ {
		tp := ix.tuples[i]
		for k, refs := range tp.m {
			out := refs[:0]
			for _, r := range refs {
				if r.trig != trig {
					out = append(out, r)
				}
			}
			if len(out) == 0 {
				delete(tp.m, k)
			} else {
				tp.m[k] = out
			}
		}
		if len(tp.m) == 0 {
			delete(ix.byPat, tp.pat)
			ix.tuples = append(ix.tuples[:i], ix.tuples[i+1:]...)
			i--
		}
	}
}

// Patterns is how many wildcard patterns the index holds.
func (ix *index) patterns() int { return len(ix.tuples) }

// match calls fn for each trigger with a filter matching k (a trigger
// whose several filters match is called once per filter).
func (ix *index) match(k *Key, fn func(trig int32)) {
	if ix.dirty {
		ix.flatten()
	}
	fam := k.Family()
	fi := 0
	if fam != 4 {
		fi = 1
	}
	// The patterns are probed in chunks: the masked keys and their slots
	// first, then the groups the slots point to, then the probes proper.
	// The loads of a chunk do not depend on each other, so their cache
	// misses overlap instead of coming one pattern after the other.
	const chunk = 16
	var (
		mks  [chunk]Key
		slot [chunk]uint64
		tis  [chunk]int32
		sink int32
	)
	for base := 0; base < len(ix.tuples); base += chunk {
		n := 0
		for ti := base; ti < min(base+chunk, len(ix.tuples)); ti++ {
			tp := ix.tuples[ti]
			// the key as the pattern sees it: of the pattern's family,
			// with ports if it fixes one, masked
			if tp.pat.fam != 0 && tp.pat.fam != fam ||
				(tp.pat.sport || tp.pat.dport) && k[0]&flowkey.PortsPresent == 0 {
				continue
			}
			and := &tp.and[fi]
			mks[n] = Key{k[0] & and[0], k[1] & and[1], k[2] & and[2], k[3] & and[3], k[4] & and[4]}
			slot[n] = flowkey.HashWords(mks[n][:], uint64(ti)) & ix.smask
			tis[n] = int32(ti)
			sink += ix.slots[slot[n]]
			n++
		}
		for j := range n {
			if g := ix.slots[slot[j]]; g != 0 {
				sink += ix.groups[g-1].tuple
			}
		}
		ix.sink += sink
		for j := range n {
			ti, mk := tis[j], &mks[j]
			for i := slot[j]; ix.slots[i] != 0; i = (i + 1) & ix.smask {
				g := &ix.groups[ix.slots[i]-1]
				if g.tuple != ti || !g.key.eq(mk) {
					continue
				}
				for _, r := range ix.refs[g.lo:g.hi] {
					if r.exact || matchFilter(r.f, k) {
						fn(r.trig)
					}
				}
				break
			}
		}
	}
}

// gran is a trigger's flow granularity compiled: which key bits a bucket
// keeps.
type gran struct {
	fields   []event.Field
	five     bool // the 5-tuple: a bucket is a flow
	hdr      uint64
	src, dst [2]int // prefix bits kept of each family (v4, v6); -1: dropped
}

func compileGran(fs []event.Field) gran {
	g := gran{fields: fs, src: [2]int{-1, -1}, dst: [2]int{-1, -1}, hdr: 0xff << flowkey.FamilyShift}
	if len(fs) == 0 {
		g.five = true
		g.fields = []event.Field{{Name: "srcip", Bits: 128}, {Name: "dstip", Bits: 128}, {Name: "srcport"}, {Name: "dstport"}, {Name: "proto"}}
		fs = g.fields
	}
	var has = map[string]bool{}
	for _, f := range fs {
		has[f.Name] = true
		switch f.Name {
		case "srcip":
			g.src = addrBits(f.Bits)
		case "dstip":
			g.dst = addrBits(f.Bits)
		case "srcport":
			g.hdr |= 0xffff<<flowkey.SrcPortShift | flowkey.PortsPresent
		case "dstport":
			g.hdr |= 0xffff<<flowkey.DstPortShift | flowkey.PortsPresent
		case "proto":
			g.hdr |= 0xff << flowkey.ProtoShift
		}
	}
	if has["srcip"] && has["dstip"] && has["srcport"] && has["dstport"] && has["proto"] && g.src == [2]int{32, 128} && g.dst == [2]int{32, 128} {
		g.five = true
	}
	if !has["srcip"] && !has["dstip"] {
		// no address in the report's key: IPv4 and IPv6 flows share a bucket
		g.hdr &^= 0xff << flowkey.FamilyShift
	}
	return g
}

// Kept is how many bits of an address of family fam (4 or 6) a
// granularity field of Bits keeps: an IPv4 address min(Bits, 32), an IPv6
// one Bits (128, event.WholeAddress, for a bare srcip).
func Kept(bits int, fam uint8) int {
	if fam == 4 {
		return min(bits, 32)
	}
	return min(bits, 128)
}

func addrBits(b int) [2]int { return [2]int{Kept(b, 4), Kept(b, 6)} }

// bucket returns the key of k's bucket.
func (g *gran) bucket(k *Key) Key {
	if g.five {
		return *k
	}
	out := Key{k[0] & g.hdr}
	fi := 0
	if k.Family() == 6 {
		fi = 1
	}
	if b := g.src[fi]; b >= 0 {
		hi, lo := addrMask(k.Family(), b)
		out[1], out[2] = k[1]&hi, k[2]&lo
	}
	if b := g.dst[fi]; b >= 0 {
		hi, lo := addrMask(k.Family(), b)
		out[3], out[4] = k[3]&hi, k[4]&lo
	}
	return out
}
