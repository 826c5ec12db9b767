package ringbuf

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/ffpf-go/ffpf/bridges/inproc"
)

// TestReaderSendsRecordsUp: records a program writes into the ring go up
// as messages, one stream per source, each packet to the outputs its mask
// selects, with the record's bytes and wire length; a full batch goes up
// at once and the rest when the reader stops.
func TestReaderSendsRecordsUp(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("loading eBPF programs needs root")
		}
		t.Skip("loading eBPF programs needs root")
	}
	ring, err := NewMap()
	if err != nil {
		t.Fatal(err)
	}
	defer ring.Close()
	// A record of 16 bytes of data, mask 0b11, wire length 100, port 0.
	const rec = -48
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SocketFilter, License: "GPL", Instructions: asm.Instructions{
		asm.Mov.Imm(asm.R1, 3),
		asm.StoreMem(asm.RFP, rec+OffMask, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R1, 100),
		asm.StoreMem(asm.RFP, rec+OffWireLen, asm.R1, asm.Word),
		asm.Mov.Imm(asm.R1, 16),
		asm.StoreMem(asm.RFP, rec+OffCapLen, asm.R1, asm.Word),
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(asm.RFP, rec+OffTime, asm.R1, asm.DWord),
		asm.StoreMem(asm.RFP, rec+OffPort, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R1, 0x01020304),
		asm.StoreMem(asm.RFP, rec+HeaderLen, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R1, 0x05060708),
		asm.StoreMem(asm.RFP, rec+HeaderLen+8, asm.R1, asm.DWord),
		asm.LoadMapPtr(asm.R1, ring.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, rec),
		asm.Mov.Imm(asm.R3, HeaderLen+16),
		asm.Mov.Imm(asm.R4, 0),
		asm.FnRingbufOutput.Call(),
		asm.Mov.Imm(asm.R0, 0),
		asm.Return(),
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()

	up := inproc.New("test")
	tags := []any{"a", "b"}
	a := &inproc.Stream{Up: up, Source: "src1", Mask: 1, Tags: tags, Snap: Snap, Pool: inproc.NewPool(Snap)}
	b := &inproc.Stream{Up: up, Source: "src2", Mask: 2, Tags: tags, Snap: Snap, Pool: inproc.NewPool(Snap)}
	r, err := Start(ring, [][]*inproc.Stream{{a, b}}, 0, Offset())
	if err != nil {
		t.Fatal(err)
	}
	const n = 300 // a full batch and a partial one per stream
	got := map[any]map[any]int{"src1": {}, "src2": {}}
	done := make(chan struct{})
	var bad []string
	go func() {
		defer close(done)
		for m := up.Receive(context.Background()); m != nil; m = up.Receive(context.Background()) {
			for _, o := range m.Out {
				for _, e := range o.Batch.E[:o.Batch.N] {
					md := o.Batch.PBuf.Meta(e.Slot)
					data := o.Batch.PBuf.Data(e.Slot)
					if md.WireLen != 100 || len(data) != 16 || !bytes.Equal(data[:4], []byte{4, 3, 2, 1}) {
						bad = append(bad, string(data))
					}
				}
				got[m.Stream][o.Tag] += o.Batch.N
			}
			up.Done(m)
		}
	}()
	for range n {
		if _, err := prog.Run(&ebpf.RunOptions{Data: make([]byte, 64)}); err != nil {
			t.Fatal(err)
		}
	}
	r.Stop()
	up.Close()
	<-done
	if len(bad) > 0 {
		t.Errorf("%d packets with the wrong bytes or length", len(bad))
	}
	if got["src1"]["a"] != n || got["src2"]["b"] != n || got["src1"]["b"] != 0 || got["src2"]["a"] != 0 {
		t.Errorf("packets per stream and output: %v, want %d for src1→a and src2→b only", got, n)
	}
	if s := up.Stats(); s.In != 2*n || s.Out != 2*n || s.Copied != 2*n || s.Referred != 0 || s.Dropped != 0 {
		t.Errorf("bridge counters %+v, want %d in, out and copied", s, 2*n)
	}
}
