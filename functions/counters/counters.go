// Package counters holds the pktcount and bytecount classes: the simplest
// stateful functions, which pass every packet and count it into their MBuf.
package counters

import (
	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

func init() {
	functions.Register(&functions.Class{
		Name:        "pktcount",
		Summary:     "count the packets that pass (state: packets)",
		Concurrency: functions.Mergeable,
		MinInputs:   1, MaxInputs: -1,
		State: &functions.State{Fields: []functions.StateField{{Name: "packets", Type: buffers.U64,
			Unit: "packets", Merge: functions.MergeSum, Summary: "packets that passed"}}},
		Targets: []functions.Target{functions.TargetUser, functions.TargetKernel, functions.TargetXDP, functions.TargetP4},
		New:     func(*functions.Context) (functions.Function, error) { return newPktCount(), nil },
		Code:    functions.Codes(functions.EBPFCode(ebpfPktCount), functions.P4Code(p4PktCount)),
	})
	functions.Register(&functions.Class{
		Name:        "bytecount",
		Summary:     "count the wire bytes of the packets that pass (state: bytes)",
		Concurrency: functions.Mergeable,
		MinInputs:   1, MaxInputs: -1,
		State: &functions.State{Fields: []functions.StateField{{Name: "bytes", Type: buffers.U64,
			Unit: "bytes", Merge: functions.MergeSum, Summary: "sum of their wire lengths"}}},
		Targets: []functions.Target{functions.TargetUser, functions.TargetKernel, functions.TargetXDP, functions.TargetP4},
		New:     func(*functions.Context) (functions.Function, error) { return newByteCount(), nil },
		Code:    functions.Codes(functions.EBPFCode(ebpfByteCount), functions.P4Code(p4ByteCount)),
	})
}

// PktCount counts packets. Its MBuf holds one native-order u64, "packets".
type PktCount struct{ m *buffers.MBuf }

func newPktCount() *PktCount {
	return &PktCount{buffers.NewMBuf(8, buffers.Native, buffers.Field{Name: "packets", Type: buffers.U64})}
}

// Process counts the batch and passes it unchanged.
func (c *PktCount) Process(b *buffers.Batch) { c.m.Add64(0, uint64(b.N)) }

// MBuf returns the state.
func (c *PktCount) MBuf() *buffers.MBuf { return c.m }

// ByteCount sums wire lengths (the original packet length, not the captured
// part, as tcpdump's and NetFlow's byte counts do). Its MBuf holds "bytes".
type ByteCount struct{ m *buffers.MBuf }

func newByteCount() *ByteCount {
	return &ByteCount{buffers.NewMBuf(8, buffers.Native, buffers.Field{Name: "bytes", Type: buffers.U64})}
}

// Process sums the batch's wire bytes and passes it unchanged.
func (c *ByteCount) Process(b *buffers.Batch) {
	var sum uint64
	p := b.PBuf
	for _, e := range b.E[:b.N] {
		sum += uint64(p.Meta(e.Slot).WireLen)
	}
	c.m.Add64(0, sum)
}

// MBuf returns the state.
func (c *ByteCount) MBuf() *buffers.MBuf { return c.m }
