// Package ports is the function class portcount: packets counted per TCP
// or UDP port, a per-key counter whose state is mergeable (DESIGN.md §15):
// a function that several workers reach runs on a shard of its counters
// per worker, and whoever reads it sees the shards summed. The example
// plugin examples/plugin/portcount serves it out of process.
package ports

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/examples/plugin/internal/layers"
	"github.com/ffpf-go/ffpf/functions"
)

var state = &functions.State{Fields: []functions.StateField{
	{Name: "packets", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum,
		LenOf: func(p functions.Params) int { l, _ := parsePorts(p.Str("ports")); return len(l) }, LenDoc: "ports",
		Summary: "packets per port of the list, in its order"},
	{Name: "other", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum,
		Summary: "packets of another port, or without a TCP or UDP header"},
}}

// MaxPorts bounds the list.
const MaxPorts = 1024

// parsePorts reads a comma-separated list of distinct ports.
func parsePorts(s string) ([]uint16, error) {
	var out []uint16
	seen := map[uint64]bool{}
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 16)
		switch {
		case err != nil:
			return nil, fmt.Errorf("%q is not a port (0 to 65535)", f)
		case seen[n]:
			return nil, fmt.Errorf("port %d is listed twice", n)
		case len(out) == MaxPorts:
			return nil, fmt.Errorf("more than %d ports", MaxPorts)
		}
		seen[n] = true
		out = append(out, uint16(n))
	}
	return out, nil
}

// Class is portcount.
var Class = &functions.Class{
	Name:    "portcount",
	Summary: "count packets per TCP or UDP port of a list (destination or source); passes every packet, the class result is the port",
	Params: []functions.Param{
		{Name: "ports", Type: functions.String, Default: "53,80,443", Summary: "the ports counted, comma-separated",
			Check: func(v functions.Value) error { _, err := parsePorts(v.Str); return err }},
		{Name: "key", Type: functions.String, Default: "dstport", Enum: []string{"dstport", "srcport"},
			Summary: "the port counted: the destination's or the source's"},
	},
	State:       state,
	Concurrency: functions.Mergeable,
	MinInputs:   1, MaxInputs: -1,
	Validate: func(ctx *functions.Context) error {
		if _, ok := layers.Of(ctx.LinkType); !ok {
			return fmt.Errorf("portcount reads Ethernet, raw IP, Linux cooked or BSD loopback packets, not %v", ctx.LinkType)
		}
		return nil
	},
	New: func(ctx *functions.Context) (functions.Function, error) {
		list, err := parsePorts(ctx.Params.Str("ports"))
		if err != nil {
			return nil, err
		}
		m, err := ctx.NewMBuf(state)
		if err != nil {
			return nil, err
		}
		link, _ := layers.Of(ctx.LinkType)
		c := &counter{link: link, m: m, other: functions.FieldOf(m, "other").Offset, at: 2}
		if ctx.Params.Str("key") == "srcport" {
			c.at = 0
		}
		base := functions.FieldOf(m, "packets").Offset
		for i := range c.index {
			c.index[i] = -1
		}
		for i, p := range list {
			c.index[p] = int32(base + 8*i)
		}
		return c, nil
	},
}

type counter struct {
	link  layers.Link
	m     *buffers.MBuf
	index [65536]int32 // per port, the offset of its counter, or -1
	other int
	at    int // offset of the port counted in the transport header
}

func (c *counter) MBuf() *buffers.MBuf { return c.m }

// Process counts every packet under its port and passes it, the port as
// its class result.
func (c *counter) Process(b *buffers.Batch) {
	var other uint64
	for i, e := range b.Entries() {
		proto, l4, ok := layers.Transport(c.link, b.PBuf.Data(e.Slot))
		if !ok || proto != layers.TCP && proto != layers.UDP || len(l4) < 4 {
			other++
			b.E[i].Class = 0
			continue
		}
		port := binary.BigEndian.Uint16(l4[c.at:])
		b.E[i].Class = uint32(port)
		if off := c.index[port]; off >= 0 {
			c.m.Add64(int(off), 1) // readers read while it runs: atomically
		} else {
			other++
		}
	}
	if other > 0 {
		c.m.Add64(c.other, other)
	}
}
