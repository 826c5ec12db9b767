// Package dns is the function class dnsname: a filter on the first query
// name of DNS messages, which the example plugin examples/plugin/dnsname
// serves out of process (and a program may register in process, the
// same class). It parses names as RFC 1035 writes them, compression
// pointers included, and refuses the malformed ones (see parseName)
// without ever reading past the packet.
//
// The sharp edge: only DNS over UDP (port 53, either side) is read; a
// message over TCP, or a UDP datagram that is not the first fragment, is
// not a DNS message here and is filtered.
package dns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/examples/plugin/internal/layers"
	"github.com/ffpf-go/ffpf/functions"
)

var state = &functions.State{Fields: []functions.StateField{
	{Name: "names", Type: buffers.U64, Unit: "names", Merge: functions.MergeSum, Summary: "query names parsed (the first question of each DNS message)"},
	{Name: "matched", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum, Summary: "messages whose name ends in the suffix (passed)"},
	{Name: "malformed", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum, Summary: "DNS messages whose header or first question does not parse"},
}}

// Class is dnsname.
var Class = &functions.Class{
	Name:    "dnsname",
	Summary: "pass DNS messages (UDP port 53) whose first query name ends in a suffix, label by label in any case; the class result is the query type",
	Params: []functions.Param{
		{Name: "suffix", Type: functions.String, Required: true,
			Summary: `the labels the name ends in: ".example.com" (or "example.com") passes example.com and every name under it; "." passes every name`,
			Check:   func(v functions.Value) error { _, err := labels(v.Str); return err }},
	},
	State:     state,
	MinInputs: 1, MaxInputs: -1,
	Validate: func(ctx *functions.Context) error {
		if _, ok := layers.Of(ctx.LinkType); !ok {
			return fmt.Errorf("dnsname reads Ethernet, raw IP, Linux cooked or BSD loopback packets, not %v", ctx.LinkType)
		}
		return nil
	},
	New: func(ctx *functions.Context) (functions.Function, error) {
		suffix, err := labels(ctx.Params.Str("suffix"))
		if err != nil {
			return nil, err
		}
		m, err := ctx.NewMBuf(state)
		if err != nil {
			return nil, err
		}
		lt, _ := layers.Of(ctx.LinkType)
		return &filter{suffix: suffix, link: lt, m: m, names: functions.FieldOf(m, "names").Offset,
			matched: functions.FieldOf(m, "matched").Offset, malformed: functions.FieldOf(m, "malformed").Offset}, nil
	},
}

// labels splits a suffix into its labels, lower case: "" and "." are the
// root (no label).
func labels(s string) ([][]byte, error) {
	s = strings.Trim(strings.ToLower(s), ".")
	if s == "" {
		return nil, nil
	}
	if len(s) > maxName-2 {
		return nil, fmt.Errorf("suffix %q is longer than a name can be", s)
	}
	var out [][]byte
	for _, l := range strings.Split(s, ".") {
		switch {
		case l == "":
			return nil, fmt.Errorf("suffix %q has an empty label", s)
		case len(l) > maxLabel:
			return nil, fmt.Errorf("suffix %q has a label of %d bytes, more than %d", s, len(l), maxLabel)
		}
		out = append(out, []byte(l))
	}
	return out, nil
}

// filter is a dnsname function.
type filter struct {
	suffix                    [][]byte
	link                      layers.Link
	m                         *buffers.MBuf
	names, matched, malformed int
	nm                        name
}

func (f *filter) MBuf() *buffers.MBuf { return f.m }

// Process keeps the DNS messages whose first query name ends in the
// suffix, with the query type as class result.
func (f *filter) Process(b *buffers.Batch) {
	var names, bad uint64
	n := 0
	for _, e := range b.Entries() {
		msg, ok := udp53(f.link, b.PBuf.Data(e.Slot))
		if !ok {
			continue
		}
		qtype, present, ok := question(msg, &f.nm)
		if !ok {
			bad++
			continue
		}
		if !present {
			continue
		}
		names++
		if f.nm.hasSuffix(msg, f.suffix) {
			b.E[n] = buffers.Entry{Slot: e.Slot, Class: uint32(qtype)}
			n++
		}
	}
	b.N = n
	f.m.Add64(f.names, names)
	f.m.Add64(f.malformed, bad)
	f.m.Add64(f.matched, uint64(n))
}

// Handlers: reset zeroes the counters and returns what they held.
func (f *filter) Handlers() []functions.Handler {
	return []functions.Handler{{Name: "reset", Summary: "zero the counters; returns what they held",
		Call: func(arg string) (any, error) {
			if arg != "" {
				return nil, errors.New("reset takes no argument")
			}
			out := f.m.Snapshot()
			for _, off := range []int{f.names, f.matched, f.malformed} {
				f.m.Store64(off, 0)
			}
			return out, nil
		}}}
}

// udp53 returns the payload of a UDP datagram to or from port 53 in pkt
// (as much of it as was captured), or false when pkt is none.
func udp53(k layers.Link, pkt []byte) ([]byte, bool) {
	proto, l4, ok := layers.Transport(k, pkt)
	if !ok || proto != layers.UDP || len(l4) < 8 || binary.BigEndian.Uint16(l4) != 53 && binary.BigEndian.Uint16(l4[2:]) != 53 {
		return nil, false
	}
	payload := l4[8:]
	if ul := int(binary.BigEndian.Uint16(l4[4:])); ul >= 8 && ul-8 < len(payload) {
		payload = payload[:ul-8]
	}
	return payload, true
}
