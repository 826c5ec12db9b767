package flowspaces

import "fmt"

// Path is FFPF's path field (§2.3): the route from the root of the
// hierarchy to a flowspace, 8 subfields of 4 bits, one per level, the
// root's in the most significant nibble. Subfield l is the index of the
// child to take below the flowspace at level l; Invalid means "not below
// level l". So 0x01FFFFFF reads: from the root take child 0, from there
// child 1, and stop; 0xFFFFFFFF is the root itself.
type Path uint32

const (
	// MaxLevels is how deep a hierarchy can be: one subfield per level.
	MaxLevels = 8
	// Invalid is the reserved subfield value: do not descend below this level.
	Invalid = 0xF
	// MaxChildren is how many children a flowspace can have: subfield
	// values 0 to 14 (15 is Invalid).
	MaxChildren = Invalid
	// Root is the path of the root flowspace; every subfield is Invalid.
	Root Path = 0xFFFFFFFF
)

// At returns the subfield of level l.
func (p Path) At(l int) uint8 {
	if l < 0 || l >= MaxLevels {
		return Invalid
	}
	return uint8(p>>(4*(MaxLevels-1-l))) & 0xF
}

// With returns p with the subfield of level l set to v.
func (p Path) With(l int, v uint8) Path {
	s := uint(4 * (MaxLevels - 1 - l))
	return p&^(0xF<<s) | Path(v&0xF)<<s
}

// Cut returns p with every subfield from level l down marked Invalid: a
// function placed at level l, and whatever depends on it, stays at or above l.
func (p Path) Cut(l int) Path {
	if l <= 0 {
		return Root
	}
	if l >= MaxLevels {
		return p
	}
	return p | Path(0xFFFFFFFF)>>(4*l)
}

// Depth returns the level the path leads to: the first Invalid subfield.
func (p Path) Depth() int {
	for l := 0; l < MaxLevels; l++ {
		if p.At(l) == Invalid {
			return l
		}
	}
	return MaxLevels
}

// Merge returns the path a function fed by functions with paths ps starts
// from: their common prefix, Invalid from the first level where they differ
// or any of them stops. The function's descent then ends at the inputs'
// lowest common successor (§2.3: the subfields marked Invalid are copied to
// the path fields of dependent functions).
func Merge(ps ...Path) Path {
	if len(ps) == 0 {
		return Root
	}
	for l := 0; l < MaxLevels; l++ {
		v := ps[0].At(l)
		for _, p := range ps[1:] {
			if p.At(l) != v {
				v = Invalid
			}
		}
		if v == Invalid {
			return ps[0].Cut(l)
		}
	}
	return ps[0]
}

// String formats the path in hex, as the paper writes it.
func (p Path) String() string { return fmt.Sprintf("0x%08x", uint32(p)) }
