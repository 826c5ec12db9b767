// Package wire is DTA's report format: a two-byte base header naming the
// primitive, then the primitive's sub-header, big-endian, as the reference
// implementation (jonlanglet/DTA) sends them in one UDP datagram to port
// 40040.
//
//	base          opcode:8 | immediate:1 | reserved:7
//	Key-Write     redundancy:8 | key:32 | data:32
//	Append        listID:32 | data:32
//	Key-Increment redundancy:8 | key:32 | counter:64
//	Postcarding   key:32 | hop:8 | data:32
//
// Decode never panics on any input: a report too short for its opcode, an
// unknown opcode or trailing bytes are errors of a Reason a collector counts.
package wire

import (
	"encoding/binary"
	"fmt"
)

// Ports of the reference implementation.
const (
	Port    = 40040 // reports
	AckPort = 40044 // ACK/NACK of immediate reports
)

// Opcode names a DTA primitive.
type Opcode uint8

const (
	KeyWrite     Opcode = 0x01
	Append       Opcode = 0x02
	KeyIncrement Opcode = 0x03
	Postcarding  Opcode = 0x04
)

func (o Opcode) String() string {
	switch o {
	case KeyWrite:
		return "keywrite"
	case Append:
		return "append"
	case KeyIncrement:
		return "keyincrement"
	case Postcarding:
		return "postcarding"
	}
	return fmt.Sprintf("opcode(%#02x)", uint8(o))
}

// BaseLen is the length of the base header.
const BaseLen = 2

// Sub-header lengths by opcode.
const (
	KeyWriteLen     = 1 + 4 + 4
	AppendLen       = 4 + 4
	KeyIncrementLen = 1 + 4 + 8
	PostcardingLen  = 4 + 1 + 4
)

// Report is one decoded report. Only the fields of its opcode are meaningful.
type Report struct {
	Op         Opcode
	Immediate  bool   // the reporter asks for an ACK/NACK
	Redundancy uint8  // Key-Write, Key-Increment: slots written per key (N)
	Key        uint32 // Key-Write, Key-Increment, Postcarding
	Data       uint32 // Key-Write, Append, Postcarding
	Counter    uint64 // Key-Increment
	List       uint32 // Append
	Hop        uint8  // Postcarding
}

// Len is the encoded length of r, base header included; 0 for an unknown opcode.
func (r *Report) Len() int {
	n := subLen(r.Op)
	if n == 0 {
		return 0
	}
	return BaseLen + n
}

func subLen(o Opcode) int {
	switch o {
	case KeyWrite:
		return KeyWriteLen
	case Append:
		return AppendLen
	case KeyIncrement:
		return KeyIncrementLen
	case Postcarding:
		return PostcardingLen
	}
	return 0
}

// Append appends r's encoding to b. An unknown opcode appends nothing and
// returns ErrOpcode.
func (r *Report) Append(b []byte) ([]byte, error) {
	if subLen(r.Op) == 0 {
		return b, &Error{Reason: ReasonOpcode, Op: r.Op}
	}
	flags := byte(0)
	if r.Immediate {
		flags = 0x80
	}
	b = append(b, byte(r.Op), flags)
	switch r.Op {
	case KeyWrite:
		b = append(b, r.Redundancy)
		b = binary.BigEndian.AppendUint32(b, r.Key)
		b = binary.BigEndian.AppendUint32(b, r.Data)
	case Append:
		b = binary.BigEndian.AppendUint32(b, r.List)
		b = binary.BigEndian.AppendUint32(b, r.Data)
	case KeyIncrement:
		b = append(b, r.Redundancy)
		b = binary.BigEndian.AppendUint32(b, r.Key)
		b = binary.BigEndian.AppendUint64(b, r.Counter)
	case Postcarding:
		b = binary.BigEndian.AppendUint32(b, r.Key)
		b = append(b, r.Hop)
		b = binary.BigEndian.AppendUint32(b, r.Data)
	}
	return b, nil
}

// Reason classifies a report Decode refused, for per-reason counters.
type Reason uint8

const (
	ReasonShort    Reason = iota + 1 // shorter than its headers
	ReasonOpcode                     // an opcode no primitive has
	ReasonTrailing                   // bytes after the report: a length that lies
)

// Reasons lists every Reason, for counters and metrics labels.
var Reasons = []Reason{ReasonShort, ReasonOpcode, ReasonTrailing}

func (r Reason) String() string {
	switch r {
	case ReasonShort:
		return "short"
	case ReasonOpcode:
		return "opcode"
	case ReasonTrailing:
		return "trailing"
	}
	return "unknown"
}

// Error is a report Decode refused.
type Error struct {
	Reason Reason
	Op     Opcode
	Len    int // the payload's length
}

func (e *Error) Error() string {
	switch e.Reason {
	case ReasonShort:
		return fmt.Sprintf("dta: %d-byte report is too short for %v", e.Len, e.Op)
	case ReasonOpcode:
		return fmt.Sprintf("dta: unknown opcode %#02x", uint8(e.Op))
	case ReasonTrailing:
		return fmt.Sprintf("dta: %d-byte payload is longer than its %v report", e.Len, e.Op)
	}
	return "dta: malformed report"
}

// Decode reads the one report a UDP payload holds into r. It allocates
// nothing unless it fails.
func Decode(b []byte, r *Report) error {
	if len(b) < BaseLen {
		return &Error{Reason: ReasonShort, Len: len(b)}
	}
	op := Opcode(b[0])
	n := subLen(op)
	if n == 0 {
		return &Error{Reason: ReasonOpcode, Op: op, Len: len(b)}
	}
	if len(b) < BaseLen+n {
		return &Error{Reason: ReasonShort, Op: op, Len: len(b)}
	}
	if len(b) > BaseLen+n {
		return &Error{Reason: ReasonTrailing, Op: op, Len: len(b)}
	}
	*r = Report{Op: op, Immediate: b[1]&0x80 != 0}
	s := b[BaseLen:]
	switch op {
	case KeyWrite:
		r.Redundancy = s[0]
		r.Key = binary.BigEndian.Uint32(s[1:])
		r.Data = binary.BigEndian.Uint32(s[5:])
	case Append:
		r.List = binary.BigEndian.Uint32(s)
		r.Data = binary.BigEndian.Uint32(s[4:])
	case KeyIncrement:
		r.Redundancy = s[0]
		r.Key = binary.BigEndian.Uint32(s[1:])
		r.Counter = binary.BigEndian.Uint64(s[5:])
	case Postcarding:
		r.Key = binary.BigEndian.Uint32(s)
		r.Hop = s[4]
		r.Data = binary.BigEndian.Uint32(s[5:])
	}
	return nil
}
