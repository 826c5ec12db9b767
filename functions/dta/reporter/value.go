package reporter

import (
	"encoding/binary"
	"math"
	"strconv"

	"github.com/ffpf-go/ffpf/functions/dta/layout"
	"github.com/ffpf-go/ffpf/functions/record"
)

// value is where a report's key, data, counter or hop comes from: a number
// written in the expression, a packet field (its index in the function's
// match.Fields) or a record field (by name).
type value struct {
	lit   bool
	n     uint64 // the literal
	name  string // the field's name
	index int    // of a packet field
}

// parseValue reads "1234", "0x0a000105" as a literal and anything else
// as a field name.
func parseValue(s string) value {
	if n, err := strconv.ParseUint(s, 0, 64); err == nil {
		return value{lit: true, n: n}
	}
	return value{name: s}
}

// fromRecord turns a record field into a number: integers, booleans and
// IPv4 addresses (big-endian, so 10.0.1.5 is 0x0a000105) as they are, a
// float rounded (negative: 0); anything wider (an IPv6 address, a MAC, a
// string, an object such as a report's key) folds into the CRC-32 of its
// bytes, wide set. ok is false for a null.
func fromRecord(f record.Field) (v uint64, wide, ok bool) {
	switch f.Type {
	case record.U64, record.I64, record.Bool:
		return f.Uint(), false, true
	case record.F64:
		x := math.Round(f.Float())
		switch {
		case !(x > 0): // negative, zero or NaN
			return 0, false, true
		case x >= math.MaxUint64:
			return math.MaxUint64, false, true
		}
		return uint64(x), false, true
	case record.IPv4:
		return uint64(binary.BigEndian.Uint32(f.Raw)), false, true
	case record.Null:
		return 0, false, false
	}
	return uint64(layout.CRC32(f.Raw)), true, true
}

// key32 makes a key of any number: one of 32 bits is itself, a wider one
// (a MAC, a 64-bit value) the CRC-32 of its 8 bytes big-endian.
func key32(v uint64) uint32 {
	if v <= math.MaxUint32 {
		return uint32(v)
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return layout.CRC32(b[:])
}
