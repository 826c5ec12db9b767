package ringbuf

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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
	r, err := Start([]*ebpf.Map{ring}, [][]*inproc.Stream{{a, b}}, 0, Offset())
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

// TestReaderClockAndAnnotations: a clock-only record (mask 0) moves the
// clock of every stream of its port with a message that carries no packet;
// a packet's record carries annotation words after the header, which land
// in the words the streams name.
func TestReaderClockAndAnnotations(t *testing.T) {
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
	// Two records: clock-only at time t1; a packet of 8 bytes with mask
	// 1 and one annotation word, 0x0a0b0c0d, at t1+1000. t1 is an hour
	// ahead, so that the reader's idle ticks (now) come before it.
	const rec = -64
	t1 := monotonic() + int64(time.Hour)
	h := int16(Header(1))
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SocketFilter, License: "GPL", Instructions: asm.Instructions{
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(asm.RFP, rec+OffMask, asm.R1, asm.DWord),
		asm.StoreMem(asm.RFP, rec+OffWireLen, asm.R1, asm.Word),
		asm.StoreMem(asm.RFP, rec+OffCapLen, asm.R1, asm.Word),
		asm.StoreMem(asm.RFP, rec+OffPort, asm.R1, asm.DWord),
		asm.LoadImm(asm.R1, t1, asm.DWord),
		asm.StoreMem(asm.RFP, rec+OffTime, asm.R1, asm.DWord),
		asm.LoadMapPtr(asm.R1, ring.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, rec),
		asm.Mov.Imm(asm.R3, HeaderLen),
		asm.Mov.Imm(asm.R4, 0),
		asm.FnRingbufOutput.Call(),

		asm.Mov.Imm(asm.R1, 1),
		asm.StoreMem(asm.RFP, rec+OffMask, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R1, 8),
		asm.StoreMem(asm.RFP, rec+OffWireLen, asm.R1, asm.Word),
		asm.StoreMem(asm.RFP, rec+OffCapLen, asm.R1, asm.Word),
		asm.LoadImm(asm.R1, t1+1000, asm.DWord),
		asm.StoreMem(asm.RFP, rec+OffTime, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R1, 0x0a0b0c0d),
		asm.StoreMem(asm.RFP, rec+OffAnn, asm.R1, asm.DWord),
		asm.StoreMem(asm.RFP, rec+h, asm.R1, asm.DWord),
		asm.LoadMapPtr(asm.R1, ring.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, rec),
		asm.Mov.Imm(asm.R3, int32(h)+8),
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
	s := &inproc.Stream{Up: up, Source: "src", Mask: 1, Tags: []any{"f"}, Snap: Snap, Pool: inproc.NewPool(256), Ann: []int{3}}
	r, err := Start([]*ebpf.Map{ring}, [][]*inproc.Stream{{s}}, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		now     int64
		packets int
		ann     uint64
	}
	var msgs []got
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := up.Receive(context.Background()); m != nil; m = up.Receive(context.Background()) {
			g := got{now: m.Now - t1, packets: m.Packets}
			for _, o := range m.Out {
				for _, e := range o.Batch.E[:o.Batch.N] {
					g.ann = o.Batch.PBuf.Ann(e.Slot)[3]
				}
			}
			if g.now >= 0 {
				msgs = append(msgs, g)
			}
			up.Done(m)
		}
	}()
	if _, err := prog.Run(&ebpf.RunOptions{Data: make([]byte, 64)}); err != nil {
		t.Fatal(err)
	}
	r.Stop()
	up.Close()
	<-done
	if len(msgs) != 2 || msgs[0] != (got{now: 0}) || msgs[1] != (got{now: 1000, packets: 1, ann: 0x0a0b0c0d}) {
		t.Errorf("messages %+v (times from t1), want a clock-only one at t1, then one packet at t1+1000 with its word", msgs)
	}
	if st := up.Stats(); st.In != 1 || st.Out != 1 || st.Clocks < 1 || st.Messages != 1 {
		t.Errorf("bridge %+v: want 1 packet, 1 message and the clock messages apart", st)
	}
}

// TestRingPerCPU: with a ring buffer per CPU, a program writes into its
// CPU's ring (looked up in the map of each CPU's), and each ring's records
// go up on a lane of the bridge of their own, each ring read by a
// goroutine of its own: the packets written on CPU c arrive on lane c.
func TestRingPerCPU(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("loading eBPF programs needs root")
		}
		t.Skip("loading eBPF programs needs root")
	}
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs")
	}
	rings, byCPU, err := NewRings(2)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, r := range rings {
			r.Close()
		}
		byCPU.Close()
	}()
	const rec, key = -48, -52
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SocketFilter, License: "GPL", Instructions: asm.Instructions{
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreMem(asm.RFP, rec+OffMask, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R1, 60),
		asm.StoreMem(asm.RFP, rec+OffWireLen, asm.R1, asm.Word),
		asm.Mov.Imm(asm.R1, 16),
		asm.StoreMem(asm.RFP, rec+OffCapLen, asm.R1, asm.Word),
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(asm.RFP, rec+OffTime, asm.R1, asm.DWord),
		asm.StoreMem(asm.RFP, rec+OffPort, asm.R1, asm.DWord),
		asm.StoreMem(asm.RFP, rec+HeaderLen, asm.R1, asm.DWord),
		asm.FnGetSmpProcessorId.Call(),
		asm.StoreMem(asm.RFP, rec+HeaderLen+8, asm.R0, asm.DWord), // the CPU, in the packet
		asm.StoreMem(asm.RFP, key, asm.R0, asm.Word),
		asm.LoadMapPtr(asm.R1, byCPU.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, key),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Mov.Reg(asm.R1, asm.R0),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, rec),
		asm.Mov.Imm(asm.R3, HeaderLen+16),
		asm.Mov.Imm(asm.R4, 0),
		asm.FnRingbufOutput.Call(),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
		asm.Return(),
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()

	up := inproc.NewLanes("test", 2)
	s := &inproc.Stream{Up: up, Source: "src", Mask: 1, Tags: []any{"a"}, Snap: Snap, Pool: inproc.NewPool(Snap)}
	r, err := Start(rings, [][]*inproc.Stream{{s}}, 0, Offset())
	if err != nil {
		t.Fatal(err)
	}
	var got [2][2]int // [lane][cpu written on]
	var wg sync.WaitGroup
	for lane := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := up.ReceiveLane(context.Background(), lane); m != nil; m = up.ReceiveLane(context.Background(), lane) {
				for _, o := range m.Out {
					for _, e := range o.Batch.E[:o.Batch.N] {
						got[lane][o.Batch.PBuf.Data(e.Slot)[8]%2]++
					}
				}
				up.Done(m)
			}
		}()
	}
	const n = 300
	for cpu := range 2 {
		runOn(t, cpu, func() {
			for range n {
				if _, err := prog.Run(&ebpf.RunOptions{Data: make([]byte, 64)}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	r.Stop()
	up.Close()
	wg.Wait()
	if got != [2][2]int{{n, 0}, {0, n}} {
		t.Errorf("packets by lane and CPU: %v, want %d of CPU 0 on lane 0 and %d of CPU 1 on lane 1", got, n, n)
	}
	if st := up.Stats(); len(st.Lanes) != 2 || st.Lanes[0] != n || st.Lanes[1] != n || st.Dropped != 0 {
		t.Errorf("bridge counters %+v", st)
	}
}

// runOn runs f on a thread bound to cpu.
func runOn(t *testing.T, cpu int, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			t.Error(err)
			return
		}
		f()
	}()
	<-done
}

// TestRingBytes: rings of 8 MB up to four, smaller ones beyond, never
// below 1 MB, each a power of two.
func TestRingBytes(t *testing.T) {
	for n, want := range map[int]int{1: Bytes, 4: Bytes, 5: Bytes / 2, 8: Bytes / 2, 16: Bytes / 4, 64: 1 << 20, 1024: 1 << 20} {
		if got := RingBytes(n); got != want || got&(got-1) != 0 {
			t.Errorf("RingBytes(%d) = %d, want %d", n, got, want)
		}
	}
}
