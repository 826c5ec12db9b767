package kernel

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asavie/xdp"
	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/ffpf-go/ffpf/bridges/inproc"
	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowspaces"
)

// AF_XDP. With dev's steal parameter the XDP program redirects the
// packets an exported function passed to the AF_XDP socket of their
// receive queue, with the export mask in the 8 bytes of metadata before
// the frame; they leave the kernel stack. A goroutine per socket copies
// each frame once into the parent's PBuf and gives the UMEM frame back to
// the kernel at once, or, over a zero-copy bridge, lets the flowspace above
// refer to it in place. Notification is the same adaptive scheme as the
// ring buffer's: poll(2) blocks only while the receive ring is empty.
//
// The sockets live as long as the flowspace: a Connect that changes the
// requests restarts the readers, not the sockets (their frames may still
// be referred to above, and a queue cannot be bound twice).

// xskOptions sizes the rings for bursts at line rate (the defaults are
// tiny): 4096 frames of 2 KB, half of them lent to the kernel at a time.
var xskOptions = xdp.SocketOptions{NumFrames: 4096, FrameSize: 2048,
	FillRingNumDescs: 2048, CompletionRingNumDescs: 64, RxRingNumDescs: 2048, TxRingNumDescs: 64}

// zeroCopyRegions bounds the regions of a socket's UMEM view: at most 2048
// frames referred to above, the other 2048 for the kernel to fill.
const zeroCopyRegions = 8

// xskSet is the AF_XDP sockets of an interface, one per receive queue.
type xskSet struct {
	iface   string
	socks   []*xdp.Socket
	zcs     []*zeroCopy // per socket, set when its frames are referred to in place
	inPlace bool

	// got counts, per source, the frames its streams took; with the
	// program's per-source count of redirected frames (stolen) it tells,
	// at the end, what the kernel could not deliver.
	got  map[*flowspaces.Node]*atomic.Uint64
	live atomic.Uint64 // losses already counted from the sockets' statistics
	seen []uint64      // per socket, its statistics' losses counted (by its reader alone)
}

// openXSK binds one AF_XDP socket per receive queue of iface and registers
// it in the program's socket map.
func openXSK(iface string, xsks *ebpf.Map, inPlace bool) (*xskSet, error) {
	ifc, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, err
	}
	queues, _ := filepath.Glob("/sys/class/net/" + iface + "/queues/rx-*")
	n := max(1, min(len(queues), maxQueues))
	x := &xskSet{iface: iface, inPlace: inPlace, got: map[*flowspaces.Node]*atomic.Uint64{}}
	for q := range n {
		opts := xskOptions
		s, err := xdp.NewSocket(ifc.Index, q, &opts)
		if err != nil {
			x.close(0)
			return nil, fmt.Errorf("cannot open an AF_XDP socket on %s queue %d: %w", iface, q, err)
		}
		if err := xsks.Put(uint32(q), uint32(s.FD())); err != nil {
			closeSocket(s)
			x.close(0)
			return nil, fmt.Errorf("cannot register the AF_XDP socket of %s queue %d: %w", iface, q, err)
		}
		filled := append([]xdp.Desc(nil), s.GetDescs(s.NumFreeFillSlots())...)
		s.Fill(filled)
		x.socks = append(x.socks, s)
		var z *zeroCopy
		if inPlace {
			z = newZeroCopy(s, filled)
		}
		x.zcs = append(x.zcs, z)
	}
	x.seen = make([]uint64, len(x.socks))
	return x, nil
}

// counter returns the count of frames src's streams took.
func (x *xskSet) counter(src *flowspaces.Node) *atomic.Uint64 {
	c := x.got[src]
	if c == nil {
		c = new(atomic.Uint64)
		x.got[src] = c
	}
	return c
}

// describe says what the run used, for Attachments.
func (x *xskSet) describe() string {
	how := "copy-once"
	if x.inPlace {
		how = "zero-copy"
	}
	return fmt.Sprintf("%s: %d AF_XDP socket(s), one per receive queue, %s", x.iface, len(x.socks), how)
}

// close waits up to wait for the flowspace above to release the frames it
// refers to, then closes the sockets. Frames still referred to keep their
// socket (and its memory) open: a leak, not a fault.
func (x *xskSet) close(wait time.Duration) {
	deadline := time.Now().Add(wait)
	for q, s := range x.socks {
		if z := x.zcs[q]; z != nil && !z.idle(deadline) {
			continue
		}
		closeSocket(s)
	}
	x.socks, x.zcs = nil, nil
}

// closeSocket closes s and unmaps its rings, which asavie/xdp's Close
// leaves mapped (it unmaps only the UMEM): a mapping keeps the socket, and
// so its queue, bound until the process ends.
func closeSocket(s *xdp.Socket) {
	var st unix.Stat_t
	inode := uint64(0)
	if unix.Fstat(s.FD(), &st) == nil {
		inode = st.Ino
	}
	s.Close()
	if inode == 0 {
		return
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return
	}
	defer f.Close()
	var spans [][2]uintptr
	want := "socket:[" + strconv.FormatUint(inode, 10) + "]"
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasSuffix(l, want) {
			continue
		}
		lo, hi, ok := strings.Cut(strings.Fields(l)[0], "-")
		a, err1 := strconv.ParseUint(lo, 16, 64)
		b, err2 := strconv.ParseUint(hi, 16, 64)
		if ok && err1 == nil && err2 == nil {
			spans = append(spans, [2]uintptr{uintptr(a), uintptr(b - a)})
		}
	}
	for _, sp := range spans {
		unix.Syscall(unix.SYS_MUNMAP, sp[0], sp[1], 0)
	}
}

// zeroCopy lets the flowspace above refer to packets where they are, in
// the UMEM of an AF_XDP socket: a region of a PBuf view of the UMEM holds
// a batch's frames, which go back to the kernel's fill ring once the
// flowspace above has released every region that refers to them. Each
// socket has its own UMEM, so each has its own view and regions; the
// sources capturing on the interface share the frames (a frame two
// sources keep is referred to twice, and counted). One goroutine, the
// socket's reader, uses it.
type zeroCopy struct {
	sock  *xdp.Socket
	pool  *inproc.Pool
	ready []*inproc.Region            // released by the flowspace above, frames reclaimed
	held  map[*inproc.Region][]uint64 // frames each region refers to
	refs  []int32                     // per frame, the regions that refer to it
	spare []uint64                    // frames in neither the kernel's rings nor a region
	descs []xdp.Desc                  // refill's buffer, reused
}

func newZeroCopy(s *xdp.Socket, filled []xdp.Desc) *zeroCopy {
	n, size := xskOptions.NumFrames, xskOptions.FrameSize
	view := buffers.NewPBufView(s.GetFrame(xdp.Desc{Addr: 0, Len: uint32(n * size)}), zeroCopyRegions*buffers.MaxBatch)
	z := &zeroCopy{sock: s, pool: inproc.PoolOf(view, zeroCopyRegions), held: map[*inproc.Region][]uint64{}, refs: make([]int32, n)}
	inKernel := map[uint64]bool{}
	for _, d := range filled {
		inKernel[d.Addr] = true
	}
	for i := range n {
		if a := uint64(i * size); !inKernel[a] {
			z.spare = append(z.spare, a)
		}
	}
	return z
}

// reclaim frees the frames of the regions the flowspace above released.
func (z *zeroCopy) reclaim() {
	for {
		r, ok := z.pool.TryTake()
		if !ok {
			return
		}
		z.free(r)
		z.ready = append(z.ready, r)
	}
}

// free gives back the frames r referred to that no other region holds.
func (z *zeroCopy) free(r *inproc.Region) {
	for _, a := range z.held[r] {
		if i := a / uint64(xskOptions.FrameSize); z.refs[i] > 0 {
			z.refs[i]--
			if z.refs[i] == 0 {
				z.spare = append(z.spare, a)
			}
		}
	}
	z.held[r] = z.held[r][:0]
}

// take returns a free region. When none is, it first sends up the
// partial batches of the socket's streams (flush), which may be what the
// flowspace above waits for, then waits.
func (z *zeroCopy) take(ctx context.Context, flush func()) (*inproc.Region, error) {
	z.reclaim()
	if n := len(z.ready); n > 0 {
		r := z.ready[n-1]
		z.ready = z.ready[:n-1]
		return r, nil
	}
	flush()
	r, err := z.pool.Take(ctx)
	if err != nil {
		return nil, err
	}
	z.free(r)
	return r, nil
}

// hold records that reg refers to the frame at addr.
func (z *zeroCopy) hold(reg *inproc.Region, addr uint64) {
	a := addr - addr%uint64(xskOptions.FrameSize)
	z.refs[a/uint64(xskOptions.FrameSize)]++
	z.held[reg] = append(z.held[reg], a)
}

// pin holds a received frame while the reader hands it to the streams: a
// stream's batch may go up, and its region come back, before the next
// stream refers to the frame.
func (z *zeroCopy) pin(addr uint64) {
	z.refs[addr/uint64(xskOptions.FrameSize)]++
}

// unpin ends pin: a frame no region refers to goes back.
func (z *zeroCopy) unpin(addr uint64) {
	a := addr - addr%uint64(xskOptions.FrameSize)
	if i := a / uint64(xskOptions.FrameSize); z.refs[i] > 0 {
		z.refs[i]--
		if z.refs[i] == 0 {
			z.spare = append(z.spare, a)
		}
	}
}

// refill gives the kernel spare frames to receive into.
func (z *zeroCopy) refill() {
	z.reclaim()
	n := min(len(z.spare), z.sock.NumFreeFillSlots())
	if n == 0 {
		return
	}
	descs := z.descs[:0]
	for i := range n {
		descs = append(descs, xdp.Desc{Addr: z.spare[len(z.spare)-1-i], Len: uint32(xskOptions.FrameSize)})
	}
	z.spare = z.spare[:len(z.spare)-n]
	z.sock.Fill(descs)
	z.descs = descs
}

// idle waits until the flowspace above has released every region, or the
// deadline has passed; it reports whether it had.
func (z *zeroCopy) idle(deadline time.Time) bool {
	for {
		z.reclaim()
		if len(z.ready) == zeroCopyRegions { // the readers, stopped, hold none
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}
