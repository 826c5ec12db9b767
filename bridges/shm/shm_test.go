package shm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ffpf-go/ffpf/buffers"
)

// TestMain lets the test binary play the other process: with
// SHM_TEST_CHILD set it runs that role on the descriptors it inherited.
func TestMain(m *testing.M) {
	if role := os.Getenv("SHM_TEST_CHILD"); role != "" {
		os.Exit(child(role))
	}
	os.Exit(m.Run())
}

func pair(t *testing.T, g Geometry) (*Ring, *Sender, *Receiver) {
	t.Helper()
	r, err := New(g)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	s, err := r.Sender()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := r.Receiver()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); rc.Close() })
	return r, s, rc
}

func packet(batch, i int) []byte {
	return []byte(fmt.Sprintf("packet %d of batch %d%s", i, batch, strings.Repeat("x", (batch*7+i)%90)))
}

// fill puts n packets of batch b in a cell and publishes it.
func fill(t testing.TB, s *Sender, b, n int) {
	c, err := s.Reserve()
	if err != nil || c == nil {
		t.Fatalf("batch %d: no cell (%v)", b, err)
	}
	c.Seq, c.Now = uint64(b), int64(1000+b)
	for i := range n {
		if !c.Put(i, packet(b, i), uint32(100+i), int64(b*1000+i)) {
			t.Fatalf("batch %d: packet %d does not fit", b, i)
		}
		c.E[i] = buffers.Entry{Slot: uint32(i), Class: uint32(b)}
	}
	c.N = uint32(n)
	s.Publish()
}

func TestBatchesArriveInOrderWithTheirPackets(t *testing.T) {
	_, s, r := pair(t, Geometry{Cells: 4, Window: 64 << 10})
	for b := range 50 { // more batches than cells: the ring wraps
		n := 1 + b*5%buffers.MaxBatch
		fill(t, s, b, n)
		c, err := r.Next(time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if c.Seq != uint64(b) || c.Now != int64(1000+b) || int(c.N) != n {
			t.Fatalf("batch %d arrived as seq %d now %d with %d entries", b, c.Seq, c.Now, c.N)
		}
		for i := range n {
			pkt, ok := c.Packet(i)
			if !ok || !bytes.Equal(pkt, packet(b, i)) || c.D[i].WireLen != uint32(100+i) || c.D[i].TS != int64(b*1000+i) || c.E[i].Class != uint32(b) {
				t.Fatalf("batch %d packet %d: %q %+v %+v", b, i, pkt, c.D[i], c.E[i])
			}
		}
		r.Release()
	}
}

func TestAFullRingRefusesAndAWindowBoundsItsPackets(t *testing.T) {
	_, s, r := pair(t, Geometry{Cells: 2, Window: 128})
	for b := range 2 {
		fill(t, s, b, 1)
	}
	if c, err := s.Reserve(); c != nil || err != nil {
		t.Fatalf("a full ring gave a cell (%v)", err)
	}
	if s.Pending() != 2 {
		t.Errorf("pending %d, want 2", s.Pending())
	}
	if _, err := r.Next(time.Second); err != nil {
		t.Fatal(err)
	}
	r.Release()
	c, _ := s.Reserve()
	if c == nil {
		t.Fatal("no cell once the receiver released one")
	}
	if !c.Put(0, make([]byte, 100), 100, 0) || c.Put(1, make([]byte, 29), 29, 0) {
		t.Error("a 128-byte window took 100 + 29 bytes (each packet starts 8-aligned)")
	}
	if !c.Put(1, make([]byte, 24), 24, 0) {
		t.Error("a 128-byte window refused 104 + 24 bytes")
	}
	// A descriptor pointing past the window is refused on reading.
	c.D[2] = Desc{Off: 120, CapLen: 9}
	if _, ok := c.Packet(2); ok {
		t.Error("a packet past the window was returned")
	}
}

// TestRefDescribesPacketsInOtherMemory: a descriptor of Ref refers to
// memory both sides map, not the window: PacketIn reads it there, and
// refuses one that runs past that memory or wraps around the offsets.
func TestRefDescribesPacketsInOtherMemory(t *testing.T) {
	_, s, r := pair(t, Geometry{Cells: 2, Window: 128})
	mem := make([]byte, 1<<20)
	for i := range mem {
		mem[i] = byte(i * 7)
	}
	c, _ := s.Reserve()
	c.Ref(0, 1<<19+3, 200, 300, 42) // past the window, within mem
	c.Ref(1, 1<<20-10, 10, 10, 0)   // the last bytes of mem
	c.Ref(2, 1<<20-10, 11, 11, 0)   // one byte past them
	c.Ref(3, ^uint64(0)-5, 10, 10, 0)
	c.N = 4
	s.Publish()
	c, err := r.Next(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if pkt, ok := c.PacketIn(0, mem); !ok || !bytes.Equal(pkt, mem[1<<19+3:1<<19+203]) || c.D[0].WireLen != 300 || c.D[0].TS != 42 {
		t.Errorf("packet 0: %v %+v", ok, c.D[0])
	}
	if _, ok := c.Packet(0); ok {
		t.Error("a descriptor of other memory was read in the window")
	}
	if pkt, ok := c.PacketIn(1, mem); !ok || len(pkt) != 10 || cap(pkt) != 10 {
		t.Errorf("packet 1, the last bytes: %v, %d bytes", ok, len(pkt))
	}
	for _, i := range []int{2, 3} {
		if _, ok := c.PacketIn(i, mem); ok {
			t.Errorf("packet %d past the memory (%+v) was returned", i, c.D[i])
		}
	}
}

func TestNextWaitsTimesOutAndSeesTheClose(t *testing.T) {
	_, s, r := pair(t, Geometry{Cells: 2})
	start := time.Now()
	if _, err := r.Next(20 * time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("an empty ring: %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Errorf("timed out after %v", d)
	}
	go func() {
		time.Sleep(30 * time.Millisecond) // the receiver is asleep by then
		c, _ := s.Reserve()
		c.N = 7
		s.Publish()
		s.Close()
	}()
	c, err := r.Next(-1)
	if err != nil || c.N != 7 {
		t.Fatalf("a sleeping receiver got %v, %v", c, err)
	}
	if r.Stats.Slept != 1 || s.Wakes != 1 {
		t.Errorf("stats %+v, %d wake-ups: the batch should have woken it from sleep", r.Stats, s.Wakes)
	}
	// It waited 20 ms for the timeout, then at least 30 for the batch.
	if r.Stats.Waited < uint64(50*time.Millisecond) {
		t.Errorf("waited %v in all", time.Duration(r.Stats.Waited))
	}
	r.Release()
	if _, err := r.Next(-1); !errors.Is(err, ErrClosed) {
		t.Errorf("after the sender's close: %v, want ErrClosed", err)
	}
}

func TestCorruptIndicesAreRefused(t *testing.T) {
	_, s, r := pair(t, Geometry{Cells: 4})
	r.tail.Store(5) // a receiver writing nonsense into its index
	if _, err := s.Reserve(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("tail past head: %v", err)
	}
	r.tail.Store(0)
	s.head.Store(9) // and a sender
	if _, err := r.Next(time.Second); !errors.Is(err, ErrCorrupt) {
		t.Errorf("head 9 cells ahead of a ring of 4: %v", err)
	}
}

// TestTheReceiverCannotWriteTheArena: its mapping is read-only (a write
// faults the receiver), its descriptor cannot be mapped writable, and
// the memfd cannot be shrunk under the sender.
func TestTheReceiverCannotWriteTheArena(t *testing.T) {
	ring, s, r := pair(t, Geometry{Cells: 1, Window: 4096})
	fill(t, s, 3, 1)
	c, err := r.Next(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	pkt, _ := c.Packet(0)
	func() {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() {
			if recover() == nil {
				t.Error("a write into the receiver's mapping of the arena did not fault")
			}
		}()
		pkt[0] = 'X'
	}()
	if got, _ := c.Packet(0); !bytes.Equal(got, packet(3, 0)) {
		t.Errorf("the packet changed: %q", got)
	}
	fds := ring.Files(ReceiverSide)
	if _, err := unix.Mmap(fds[1], 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err == nil {
		t.Error("the receiver's data descriptor mapped writable")
	}
	if _, err := unix.Mmap(ring.Files(SenderSide)[1], 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err == nil {
		t.Error("after the sender mapped it, another writable mapping was made")
	}
	if err := unix.Ftruncate(ring.Files(SenderSide)[0], 0); err == nil {
		t.Error("the control memfd was shrunk")
	}
}

// TestAcrossProcesses runs the receiver in a child process that gets the
// descriptors over a unix socket: it echoes each batch's packets back
// reversed on a second ring, then (its last batch says so) writes into
// the arena, which kills it; the parent sees the child gone on its
// socket, and its packets unchanged.
func TestAcrossProcesses(t *testing.T) {
	down, err := New(Geometry{Cells: 4, Window: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	up, err := New(Geometry{Cells: 4, Window: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	s, err := down.Sender()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := up.Receiver()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	mine, theirs, err := Pair()
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SHM_TEST_CHILD=echo")
	cmd.ExtraFiles = []*os.File{theirs}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	theirs.Close()
	if err := SendFiles(mine, []byte("down"), down.Files(ReceiverSide)); err != nil {
		t.Fatal(err)
	}
	if err := SendFiles(mine, []byte("up"), up.Files(SenderSide)); err != nil {
		t.Fatal(err)
	}
	r.Watch(int(mine.Fd()), unix.POLLRDHUP)
	for b := range 20 {
		fill(t, s, b, 1+b%buffers.MaxBatch)
		c, err := r.Next(10 * time.Second)
		if err != nil {
			t.Fatalf("batch %d: %v (child: %s)", b, err, stderr.String())
		}
		for i := range int(c.N) {
			got, _ := c.Packet(i)
			want := packet(b, int(c.N)-1-i)
			if c.Seq != uint64(b) || !bytes.Equal(got, want) {
				t.Fatalf("batch %d entry %d: seq %d %q, want %q", b, i, c.Seq, got, want)
			}
		}
		r.Release()
	}
	fill(t, s, 99, 1) // the child writes into this one's packet
	if _, err := r.Next(10 * time.Second); !errors.Is(err, ErrPeerGone) {
		t.Errorf("after the child's fault: %v, want ErrPeerGone", err)
	}
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), "unexpected fault address") {
		t.Errorf("the child ended with %v: %s", err, stderr.String())
	}
	c := &s.cells[20%4]
	if got, _ := c.Packet(0); !bytes.Equal(got, packet(99, 0)) {
		t.Errorf("the child's write reached the arena: %q", got)
	}
}

func child(role string) int {
	sock := os.NewFile(3, "socket")
	get := func() []int {
		_, fds, err := ReceiveFiles(sock)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return fds
	}
	r, err := OpenReceiver(get())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := OpenSender(get())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	r.Watch(3, unix.POLLRDHUP)
	for {
		c, err := r.Next(-1)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if c.Seq == 99 {
			pkt, _ := c.Packet(0)
			pkt[0] = 'X' // faults: the arena is read-only here
		}
		o, _ := s.Reserve()
		o.Seq, o.N = c.Seq, c.N
		for i := range int(c.N) {
			pkt, _ := c.Packet(int(c.N) - 1 - i)
			o.Put(i, pkt, 0, 0)
		}
		r.Release()
		s.Publish()
	}
}

// BenchmarkRing carries batches of 256 packets of 64 bytes between two
// goroutines: the sender copies them in, the receiver reads every
// descriptor. 0 allocs/op.
func BenchmarkRing(b *testing.B) {
	r, err := New(Geometry{Cells: 8, Window: 256 * 64})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	s, _ := r.Sender()
	rc, _ := r.Receiver()
	defer s.Close()
	pkt := make([]byte, 64)
	done := make(chan uint64)
	go func() {
		var sum uint64
		for {
			c, err := rc.Next(-1)
			if err != nil {
				done <- sum
				return
			}
			for i := range int(c.N) {
				p, _ := c.Packet(i)
				sum += uint64(len(p))
			}
			rc.Release()
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var c *Cell
		for c == nil {
			c, _ = s.Reserve()
		}
		for i := range buffers.MaxBatch {
			c.Put(i, pkt, 64, 0)
			c.E[i] = buffers.Entry{Slot: uint32(i)}
		}
		c.N = buffers.MaxBatch
		s.Publish()
	}
	s.Close()
	if sum := <-done; sum != uint64(b.N)*buffers.MaxBatch*64 {
		b.Fatalf("received %d bytes", sum)
	}
	b.ReportMetric(float64(b.N)*buffers.MaxBatch/b.Elapsed().Seconds()/1e6, "Mpps")
	rc.Close()
}
