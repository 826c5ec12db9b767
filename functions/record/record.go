// Package record is ffpf's own record format: what a producer (a window
// report, a Trumpet event, a summary) writes into its PBuf and hands to its
// dependents as packets of link type functions.LinkRecord. A record is
// self-describing: a fixed header names its kind, time and producer, and
// typed, named fields follow, so that export can write it as JSON lines
// (or leave it in a pcap file) without knowing the producer's code.
//
// All integers are big-endian, as on a wire:
//
//	offset  size  field
//	0       2     magic "FR"
//	2       1     version (1)
//	3       1     kind (Report, Event, Alarm)
//	4       4     length of the whole record, in bytes
//	8       8     time: ns since the Unix epoch (a window's start)
//	16      1     producer id length L
//	17      L     producer id (the function's id)
//	17+L    ...   fields
//
// A field is a type byte, a name length byte, the name, then the value:
// u64, i64 and f64 take 8 bytes; bool 1; a string a 2-byte length and its
// bytes; an IPv4 address 4, an IPv6 address 16, a MAC 6; a prefix the
// address then a prefix-length byte; a null (an absent value) nothing.
// Begin and End (End has no name) bracket the fields of an object, as a
// report's key.
package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Kind says what a record is.
type Kind uint8

const (
	Report Kind = 1 // a summary at a window's end or the run's (sketch reports)
	Event  Kind = 2 // an event that was detected (a Trumpet trigger)
	Alarm  Kind = 3 // a packet that matched (MAFIA's alarms)
)

func (k Kind) String() string {
	switch k {
	case Report:
		return "report"
	case Event:
		return "event"
	case Alarm:
		return "alarm"
	}
	return fmt.Sprintf("kind%d", uint8(k))
}

// Type is a field's type.
type Type uint8

const (
	U64 Type = iota + 1
	I64
	F64
	String
	IPv4
	IPv6
	MAC
	Prefix4
	Prefix6
	Bool
	Begin
	End
	Null // a value that is absent (a key's port on a packet without ports)
)

const (
	magic0, magic1 = 'F', 'R'
	version        = 1
	// HeaderLen is the size of the fixed header, before the producer id.
	HeaderLen = 17
)

// ErrShort says a record was cut short or lies about its length.
var ErrShort = errors.New("record cut short")

// Builder writes one record into a buffer (a PBuf slot) without
// allocating. A record that does not fit is marked, not cut: Finish then
// reports it, and the producer counts it as dropped.
type Builder struct {
	buf   []byte
	n     int
	over  bool
	depth int
}

// Start begins a record of kind k at time ts from producer into buf.
func (b *Builder) Start(buf []byte, k Kind, ts int64, producer string) {
	b.buf, b.n, b.over, b.depth = buf, 0, false, 0
	if len(producer) > 255 {
		producer = producer[:255]
	}
	if len(buf) < HeaderLen+len(producer) {
		b.over = true
		return
	}
	buf[0], buf[1], buf[2], buf[3] = magic0, magic1, version, byte(k)
	binary.BigEndian.PutUint64(buf[8:], uint64(ts))
	buf[16] = byte(len(producer))
	b.n = HeaderLen + copy(buf[HeaderLen:], producer)
}

func (b *Builder) field(t Type, name string, size int) []byte {
	if len(name) > 255 {
		name = name[:255]
	}
	if b.over || b.n+2+len(name)+size > len(b.buf) {
		b.over = true
		return nil
	}
	b.buf[b.n] = byte(t)
	b.buf[b.n+1] = byte(len(name))
	b.n += 2 + copy(b.buf[b.n+2:], name)
	v := b.buf[b.n : b.n+size]
	b.n += size
	return v
}

// U64 adds an unsigned integer.
func (b *Builder) U64(name string, v uint64) {
	if p := b.field(U64, name, 8); p != nil {
		binary.BigEndian.PutUint64(p, v)
	}
}

// I64 adds a signed integer.
func (b *Builder) I64(name string, v int64) {
	if p := b.field(I64, name, 8); p != nil {
		binary.BigEndian.PutUint64(p, uint64(v))
	}
}

// F64 adds a floating-point number.
func (b *Builder) F64(name string, v float64) {
	if p := b.field(F64, name, 8); p != nil {
		binary.BigEndian.PutUint64(p, math.Float64bits(v))
	}
}

// Bool adds a truth value.
func (b *Builder) Bool(name string, v bool) {
	if p := b.field(Bool, name, 1); p != nil {
		p[0] = 0
		if v {
			p[0] = 1
		}
	}
}

// String adds a string of at most 65,535 bytes.
func (b *Builder) String(name, v string) {
	if len(v) > math.MaxUint16 {
		v = v[:math.MaxUint16]
	}
	if p := b.field(String, name, 2+len(v)); p != nil {
		binary.BigEndian.PutUint16(p, uint16(len(v)))
		copy(p[2:], v)
	}
}

// Addr adds an IPv4 (4 bytes) or IPv6 (16 bytes) address.
func (b *Builder) Addr(name string, a []byte) {
	t := IPv4
	if len(a) == 16 {
		t = IPv6
	} else if len(a) != 4 {
		b.over = true
		return
	}
	if p := b.field(t, name, len(a)); p != nil {
		copy(p, a)
	}
}

// Prefix adds an address with a prefix length ("10.0.1.0/24").
func (b *Builder) Prefix(name string, a []byte, bits int) {
	t := Prefix4
	if len(a) == 16 {
		t = Prefix6
	} else if len(a) != 4 {
		b.over = true
		return
	}
	if p := b.field(t, name, len(a)+1); p != nil {
		copy(p, a)
		p[len(a)] = byte(bits)
	}
}

// MAC adds a 6-byte hardware address.
func (b *Builder) MAC(name string, a []byte) {
	if len(a) != 6 {
		b.over = true
		return
	}
	if p := b.field(MAC, name, 6); p != nil {
		copy(p, a)
	}
}

// Null adds a field whose value is absent (JSON null).
func (b *Builder) Null(name string) { b.field(Null, name, 0) }

// Begin opens an object named name; End closes it.
func (b *Builder) Begin(name string) {
	b.field(Begin, name, 0)
	b.depth++
}

// End closes the object Begin opened.
func (b *Builder) End() {
	b.field(End, "", 0)
	b.depth--
}

// Finish writes the record's length and returns it; ok is false when the
// record did not fit the buffer (or an object was left open).
func (b *Builder) Finish() (n int, ok bool) {
	if b.over || b.depth != 0 {
		return 0, false
	}
	binary.BigEndian.PutUint32(b.buf[4:], uint32(b.n))
	return b.n, true
}

// Header is a record's fixed header.
type Header struct {
	Kind     Kind
	Time     int64
	Producer string
	Len      int // of the whole record
	fields   int // offset of the first field
}

// ParseHeader decodes a record's header.
func ParseHeader(rec []byte) (Header, error) {
	if len(rec) < HeaderLen {
		return Header{}, ErrShort
	}
	if rec[0] != magic0 || rec[1] != magic1 {
		return Header{}, errors.New("not an ffpf record (bad magic)")
	}
	if rec[2] != version {
		return Header{}, fmt.Errorf("ffpf record version %d is not known (this reads %d)", rec[2], version)
	}
	n := int(binary.BigEndian.Uint32(rec[4:]))
	l := int(rec[16])
	if n > len(rec) || n < HeaderLen+l {
		return Header{}, ErrShort
	}
	return Header{Kind: Kind(rec[3]), Time: int64(binary.BigEndian.Uint64(rec[8:])),
		Producer: string(rec[HeaderLen : HeaderLen+l]), Len: n, fields: HeaderLen + l}, nil
}

// Field is one decoded field. Raw is the value's bytes (after a string's
// length), which alias the record.
type Field struct {
	Type Type
	Name string
	Raw  []byte
}

// Uint returns a U64's value (or I64's, Bool's as 0/1).
func (f Field) Uint() uint64 {
	switch f.Type {
	case U64, I64:
		return binary.BigEndian.Uint64(f.Raw)
	case Bool:
		return uint64(f.Raw[0])
	}
	return 0
}

// Float returns a numeric field's value as a float64.
func (f Field) Float() float64 {
	switch f.Type {
	case U64:
		return float64(binary.BigEndian.Uint64(f.Raw))
	case I64:
		return float64(int64(binary.BigEndian.Uint64(f.Raw)))
	case F64:
		return math.Float64frombits(binary.BigEndian.Uint64(f.Raw))
	case Bool:
		return float64(f.Raw[0])
	}
	return math.NaN()
}

// Fields calls fn for each field of rec in order, and reports a malformed
// record.
func Fields(rec []byte, fn func(Field) error) error {
	h, err := ParseHeader(rec)
	if err != nil {
		return err
	}
	rec = rec[:h.Len]
	depth := 0
	for i := h.fields; i < len(rec); {
		if i+2 > len(rec) {
			return ErrShort
		}
		t, nl := Type(rec[i]), int(rec[i+1])
		i += 2
		if i+nl > len(rec) {
			return ErrShort
		}
		name := string(rec[i : i+nl])
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
		case Null:
		case Begin:
			depth++
		case End:
			if depth--; depth < 0 {
				return errors.New("record closes an object it did not open")
			}
		case String:
			if i+2 > len(rec) {
				return ErrShort
			}
			size = int(binary.BigEndian.Uint16(rec[i:]))
			i += 2
		default:
			return fmt.Errorf("record field %q has an unknown type %d", name, t)
		}
		if i+size > len(rec) {
			return ErrShort
		}
		if err := fn(Field{Type: t, Name: name, Raw: rec[i : i+size : i+size]}); err != nil {
			return err
		}
		i += size
	}
	if depth != 0 {
		return errors.New("record leaves an object open")
	}
	return nil
}
