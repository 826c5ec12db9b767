// Package event is Trumpet's event language: an event is a filter over
// packets, a predicate over per-flow aggregates of Table 1's variables, the
// granularity at which flows are grouped before the predicate is tested, and
// the interval over which the aggregates are taken.
//
//	heavy: dstip=10.0.128.0/24; sum(volume) > 125KB; 5-tuple; 10ms
//
// This file holds the parsed form the packet monitor compiles; parse.go and
// expr.go read the one-line form and print the canonical one, file.go reads
// files (YAML or one event a line), validate.go checks an event against the
// epoch. The sharp edge: Parse checks everything but the interval's relation
// to the epoch, which only the monitor knows; call ValidateAll with it.
package event

import (
	"net/netip"
	"time"
)

// Event is one parsed event definition.
type Event struct {
	Name        string
	Filters     []Filter // a packet matches when it matches any of them
	Predicate   Expr     // true (non-zero) fires a report
	Granularity []Field  // how matched flows are grouped; nil is the 5-tuple (each flow its own bucket)
	Interval    time.Duration
	Pos         Pos // where it was defined, for messages
}

// Pos names a definition's place in its source: "events.yaml:12".
type Pos struct {
	File string
	Line int
}

// Filter is a conjunction of field conditions. An invalid prefix, AnyPort and
// Proto -1 match anything (AnyFilter is the filter "*").
type Filter struct {
	SrcIP, DstIP     netip.Prefix // !IsValid() matches any address
	SrcPort, DstPort PortRange
	Proto            int // IP protocol number; -1 matches any
}

// PortRange is an inclusive range of ports; {0, 65535} matches any port.
type PortRange struct{ Lo, Hi uint16 }

// AnyPort matches every port.
var AnyPort = PortRange{0, 65535}

// Field is one field of a granularity. Bits is the prefix length kept of an
// address field and 0 for the others. As in a flow key's srcip/N, an IPv4
// address keeps min(Bits, 32) bits and an IPv6 one Bits; a bare srcip is
// WholeAddress (128), the whole address of either family.
type Field struct {
	Name string // srcip, dstip, srcport, dstport or proto
	Bits int
}

// Expr is a node of a predicate.
type Expr interface{ expr() }

// Num is a constant, units already applied (125KB is 125000: sizes are
// decimal, see README.md).
type Num float64

// Agg is an aggregate of a Table 1 variable over an interval: sum(volume).
// Var is empty for count(), which counts packets.
//
// And, when set, is a second flag multiplied into Var per packet before
// aggregating: sum(is_lost & is_burst) counts the packets both lost and in a
// burst (Table 2's second event). Both are then flags (ecn, is_lost,
// is_burst).
//
// Func is empty for a bare state variable (ack, seq or dup): the flow's value
// at the end of the interval, or with Prev at the end of the previous
// interval (ack_lastepoch), as Table 2's congestion event reads them. Only a
// 5-tuple granularity allows them, since a bucket of several flows has no
// single latest ack.
type Agg struct {
	Func string // sum, count, max, min, avg or stddev; "" for a state variable
	Var  string // volume, ecn, rwnd, ttl, rtt, is_lost, is_burst, ack, seq, dup
	And  string // a second flag: sum(is_lost & is_burst)
	Prev bool   // a state variable's value at the end of the previous interval
}

// Binary applies Op to two sub-expressions: + - * / < <= > >= == != and or.
// Comparisons and logic give 1 for true and 0 for false.
type Binary struct {
	Op   string
	L, R Expr
}

func (Num) expr()    {}
func (Agg) expr()    {}
func (Binary) expr() {}
