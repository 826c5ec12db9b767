package counters

import (
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

func batch(lens ...[2]uint32) *buffers.Batch {
	p := buffers.NewPBuf(buffers.MaxBatch, 64)
	b := buffers.NewBatch(p, 0, buffers.MaxBatch, 0)
	for _, l := range lens {
		b.Append(make([]byte, l[0]), l[1], 0)
		b.E[b.N-1].Class = uint32(b.N)
	}
	return b
}

func TestCountersPassEverythingAndCountWireBytes(t *testing.T) {
	pc, bc := newPktCount(), newByteCount()
	// A 1514-byte frame captured in a 64-byte slot counts 1514 bytes.
	b := batch([2]uint32{60, 60}, [2]uint32{64, 1514}, [2]uint32{10, 0})
	before := append([]buffers.Entry(nil), b.Entries()...)
	for range 2 {
		pc.Process(b)
		bc.Process(b)
	}
	if b.N != 3 || b.Entries()[2] != before[2] {
		t.Errorf("counters changed the batch: %v", b.Entries())
	}
	if got := pc.MBuf().Snapshot()["packets"]; got != uint64(6) {
		t.Errorf("packets = %v, want 6", got)
	}
	// The third packet's wire length, 0, is counted as its source said
	// (libpcap keeps a capture file's wire length below the captured one).
	if got := bc.MBuf().Snapshot()["bytes"]; got != uint64(2*(60+1514+0)) {
		t.Errorf("bytes = %v, want %d", got, 2*(60+1514+0))
	}
	if a := testing.AllocsPerRun(100, func() { pc.Process(b); bc.Process(b) }); a != 0 {
		t.Errorf("%v allocations per batch", a)
	}
}

func TestRegistered(t *testing.T) {
	for _, name := range []string{"pktcount", "bytecount"} {
		c, ok := functions.Default.Lookup(name)
		if !ok || c.IsSource() || c.MinInputs != 1 || !c.Supports(functions.TargetUser) {
			t.Errorf("%s: %+v", name, c)
		}
	}
}
