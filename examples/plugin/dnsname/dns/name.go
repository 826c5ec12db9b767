package dns

import "encoding/binary"

// Limits of a name (RFC 1035 §2.3.4, §3.1): a label of at most 63 bytes,
// a name of at most 255 bytes on the wire (its length octets and the root's
// zero included), so at most 127 labels.
const (
	maxLabel  = 63
	maxName   = 255
	maxLabels = 127
	headerLen = 12
)

// label is one label of a name: its bytes at msg[off:off+n].
type label struct{ off, n uint16 }

// name is a parsed name: its labels in order, from the leftmost.
type name struct {
	labels [maxLabels]label
	n      int
}

// parseName reads the name that starts at off in the DNS message msg,
// following compression pointers (RFC 1035 §4.1.4). It returns where the
// data after the name starts (after its first pointer, or its root
// label) and false for a malformed name: one that runs past the message,
// is longer than 255 bytes, uses the reserved label types 0x40 and 0x80,
// or a pointer into the header or not strictly before every place the
// name was read from (which is how a pointer loop is refused: each jump
// goes further back).
func parseName(msg []byte, off int, nm *name) (end int, ok bool) {
	nm.n = 0
	wire := 1 // the root's zero
	end = -1
	limit := off // a pointer must point before this
	for {
		if off >= len(msg) {
			return 0, false
		}
		b := msg[off]
		switch b & 0xC0 {
		case 0x00:
			l := int(b)
			if l == 0 {
				if end < 0 {
					end = off + 1
				}
				return end, true
			}
			wire += 1 + l
			if off+1+l > len(msg) || wire > maxName {
				return 0, false
			}
			nm.labels[nm.n] = label{uint16(off + 1), uint16(l)}
			nm.n++
			off += 1 + l
		case 0xC0:
			if off+1 >= len(msg) {
				return 0, false
			}
			ptr := int(binary.BigEndian.Uint16(msg[off:]) & 0x3FFF)
			if end < 0 {
				end = off + 2
			}
			if ptr < headerLen || ptr >= limit {
				return 0, false
			}
			off, limit = ptr, ptr
		default: // 0x40 (extended label types), 0x80 (reserved)
			return 0, false
		}
	}
}

// hasSuffix reports whether the name's last labels are suffix's labels,
// byte by byte except for ASCII case (RFC 4343).
func (nm *name) hasSuffix(msg []byte, suffix [][]byte) bool {
	if len(suffix) > nm.n {
		return false
	}
	for i, want := range suffix {
		l := nm.labels[nm.n-len(suffix)+i]
		if int(l.n) != len(want) {
			return false
		}
		for j, c := range msg[l.off : l.off+l.n] {
			if lower(c) != want[j] {
				return false
			}
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// question parses the first question of the DNS message msg: its name and
// its type. present is false for a message without a question; ok false
// for a malformed one (a short header, a name that does not parse, a
// question cut before its type and class).
func question(msg []byte, nm *name) (qtype uint16, present, ok bool) {
	if len(msg) < headerLen {
		return 0, true, false
	}
	if binary.BigEndian.Uint16(msg[4:]) == 0 { // QDCOUNT
		return 0, false, true
	}
	end, ok := parseName(msg, headerLen, nm)
	if !ok || end+4 > len(msg) {
		return 0, true, false
	}
	return binary.BigEndian.Uint16(msg[end:]), true, true
}
