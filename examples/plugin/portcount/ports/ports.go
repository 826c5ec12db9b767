// Package ports is the function class portcount: packets counted per TCP
// or UDP port, a per-key counter whose state is mergeable (DESIGN.md §15):
// a function that several workers reach runs on a shard of its counters
// per worker, and whoever reads it sees the shards summed. The example
// plugin examples/plugin/portcount serves it out of process.
package ports

import (
	"encoding/binary"
	"fmt"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/examples/plugin/internal/layers"
	"github.com/ffpf-go/ffpf/functions"
)

var state = &functions.State{Fields: []functions.StateField{
	{Name: "ports", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum, Len: 65536,
		Summary: "packets per port: the value at index p counts the packets of port p"},
	{Name: "other", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum,
		Summary: "packets without a TCP or UDP header"},
}}

// Class is portcount.
var Class = &functions.Class{
	Name:    "portcount",
	Summary: "count packets per TCP or UDP port (destination or source); passes every packet, the class result is the port",
	Params: []functions.Param{
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
		m, err := ctx.NewMBuf(state)
		if err != nil {
			return nil, err
		}
		link, _ := layers.Of(ctx.LinkType)
		c := &counter{link: link, m: m, ports: functions.FieldOf(m, "ports").Offset, other: functions.FieldOf(m, "other").Offset}
		if ctx.Params.Str("key") == "srcport" {
			c.at = 0
		} else {
			c.at = 2
		}
		return c, nil
	},
}

type counter struct {
	link  layers.Link
	m     *buffers.MBuf
	ports int // offsets of the fields
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
		c.m.Add64(c.ports+8*int(port), 1) // readers read while it runs: atomically
		b.E[i].Class = uint32(port)
	}
	if other > 0 {
		c.m.Add64(c.other, other)
	}
}
