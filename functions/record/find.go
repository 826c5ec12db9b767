package record

import "encoding/binary"

// Find returns the field of rec named name without allocating, for a
// consumer that reads a few fields of every record (DTA's reporter). A
// dotted name "obj.member" finds a member of an object; a name that is an
// object's returns it as a field of type Begin whose Raw is the encoding
// of its members (from the first member to its End, excluded). ok is false
// when rec has no such field or is malformed.
func Find(rec []byte, name string) (f Field, ok bool) {
	// ParseHeader's checks, without its copy of the producer's id.
	if len(rec) < HeaderLen || rec[0] != magic0 || rec[1] != magic1 || rec[2] != version {
		return Field{}, false
	}
	n, start := int(binary.BigEndian.Uint32(rec[4:])), HeaderLen+int(rec[16])
	if n > len(rec) || n < start {
		return Field{}, false
	}
	rec = rec[:n]
	obj, member := "", name
	for i := 0; i < len(name); i++ {
		if name[i] == '.' {
			obj, member = name[:i], name[i+1:]
			break
		}
	}
	depth, inObj := 0, false
	for i := start; i < len(rec); {
		t, nm, raw, next, good := field(rec, i)
		if !good {
			return Field{}, false
		}
		switch {
		case t == End:
			depth--
			if depth < 0 {
				return Field{}, false
			}
			inObj = false
		case depth == 0 && obj == "" && string(nm) == member,
			depth == 1 && inObj && string(nm) == member:
			if t == Begin {
				end, good := objectEnd(rec, next)
				if !good {
					return Field{}, false
				}
				raw = rec[next:end:end]
			}
			return Field{Type: t, Name: name, Raw: raw}, true
		case t == Begin:
			if depth == 0 && obj != "" && string(nm) == obj {
				inObj = true
			}
			depth++
		}
		i = next
	}
	return Field{}, false
}

// field decodes the field at i: its type, name, value bytes and where the
// next field starts; good is false for a malformed field.
func field(rec []byte, i int) (t Type, name, raw []byte, next int, good bool) {
	if i+2 > len(rec) {
		return
	}
	t, nl := Type(rec[i]), int(rec[i+1])
	i += 2
	if i+nl > len(rec) {
		return
	}
	name = rec[i : i+nl]
	i += nl
	var size int
	switch t {
	case U64, I64, F64:
		size = 8
	case Bool:
		size = 1
	case IPv4:
		size = 4
	case IPv6:
		size = 16
	case MAC:
		size = 6
	case Prefix4:
		size = 5
	case Prefix6:
		size = 17
	case Null, Begin, End:
	case String:
		if i+2 > len(rec) {
			return
		}
		size = int(binary.BigEndian.Uint16(rec[i:]))
		i += 2
	default:
		return
	}
	if i+size > len(rec) {
		return
	}
	return t, name, rec[i : i+size : i+size], i + size, true
}

// objectEnd returns where the End that closes the object whose members
// start at i begins.
func objectEnd(rec []byte, i int) (int, bool) {
	depth := 0
	for i < len(rec) {
		t, _, _, next, good := field(rec, i)
		if !good {
			return 0, false
		}
		switch t {
		case Begin:
			depth++
		case End:
			if depth == 0 {
				return i, true
			}
			depth--
		}
		i = next
	}
	return 0, false
}
