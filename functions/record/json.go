package record

import (
	"encoding/binary"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends rec as one JSON object: "function" (the producer),
// "ts" (its time, ns since the epoch), "kind", then its fields in order,
// objects nested. It does not append a newline.
func AppendJSON(dst, rec []byte) ([]byte, error) {
	h, err := ParseHeader(rec)
	if err != nil {
		return dst, err
	}
	start := len(dst)
	dst = append(dst, `{"function":`...)
	dst = appendString(dst, h.Producer)
	dst = append(dst, `,"ts":`...)
	dst = strconv.AppendInt(dst, h.Time, 10)
	dst = append(dst, `,"kind":`...)
	dst = appendString(dst, h.Kind.String())
	err = Fields(rec, func(f Field) error {
		if f.Type == End {
			dst = append(dst, '}')
			return nil
		}
		if dst[len(dst)-1] != '{' {
			dst = append(dst, ',')
		}
		dst = appendString(dst, f.Name)
		dst = append(dst, ':')
		switch f.Type {
		case U64:
			dst = strconv.AppendUint(dst, binary.BigEndian.Uint64(f.Raw), 10)
		case I64:
			dst = strconv.AppendInt(dst, int64(binary.BigEndian.Uint64(f.Raw)), 10)
		case F64:
			v := math.Float64frombits(binary.BigEndian.Uint64(f.Raw))
			if math.IsNaN(v) || math.IsInf(v, 0) {
				dst = append(dst, "null"...)
			} else {
				// As encoding/json writes a float64: whole numbers of bytes
				// read 1516940, not 1.51694e+06.
				format := byte('f')
				if a := math.Abs(v); a != 0 && (a < 1e-6 || a >= 1e21) {
					format = 'e'
				}
				dst = strconv.AppendFloat(dst, v, format, -1, 64)
				if n := len(dst); format == 'e' && n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
					dst[n-2] = dst[n-1] // e-07 is e-7
					dst = dst[:n-1]
				}
			}
		case Bool:
			dst = strconv.AppendBool(dst, f.Raw[0] != 0)
		case String:
			dst = appendString(dst, string(f.Raw))
		case IPv4, IPv6:
			a, _ := netip.AddrFromSlice(f.Raw)
			dst = append(dst, '"')
			dst = a.AppendTo(dst)
			dst = append(dst, '"')
		case Prefix4, Prefix6:
			a, _ := netip.AddrFromSlice(f.Raw[:len(f.Raw)-1])
			dst = append(dst, '"')
			dst = a.AppendTo(dst)
			dst = append(dst, '/')
			dst = strconv.AppendUint(dst, uint64(f.Raw[len(f.Raw)-1]), 10)
			dst = append(dst, '"')
		case MAC:
			dst = append(dst, '"')
			for i, x := range f.Raw {
				if i > 0 {
					dst = append(dst, ':')
				}
				dst = append(dst, hex[x>>4], hex[x&15])
			}
			dst = append(dst, '"')
		case Null:
			dst = append(dst, "null"...)
		case Begin:
			dst = append(dst, '{')
		default:
			return fmt.Errorf("record field %q has an unknown type %d", f.Name, f.Type)
		}
		return nil
	})
	if err != nil {
		return dst[:start], err
	}
	return append(dst, '}'), nil
}

const hex = "0123456789abcdef"

// appendString appends s as a JSON string.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < 0x20:
				dst = append(dst, `\u00`...)
				dst = append(dst, hex[c>>4], hex[c&15])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return append(dst, '"')
}
