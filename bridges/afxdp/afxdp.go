// Package afxdp is the bridge from an XDP flowspace up to the Go flowspace
// of the process through AF_XDP sockets, for a capture that steals its
// packets from the kernel stack (dev's steal parameter): the XDP program
// redirects the packets an exported function passed to the socket of
// their receive queue, with the export mask in the MetaLen bytes of
// metadata before the frame. A goroutine per socket copies each frame once
// into a PBuf of the flowspace above and gives the UMEM frame back to the
// kernel at once (copy-once), or lets the flowspace above refer to it in
// place (zero-copy), through an in-process bridge (inproc.Stream).
// Notification is the ring buffer's adaptive scheme: poll(2) blocks only
// while the receive ring is empty.
//
// The sharp edge: the sockets (a Set) live as long as the flowspace, not
// as its readers: a Connect that changes the requests restarts the
// Reader, not the sockets, whose frames may still be referred to above,
// and a queue cannot be bound twice. A frame the kernel could not deliver
// is counted from the sockets' statistics once, though several sources'
// streams may have wanted it: the flowspace settles the rest (Settle).
package afxdp

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asavie/xdp"
	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/ffpf-go/ffpf/bridges/inproc"
	"github.com/ffpf-go/ffpf/buffers"
)

// MaxQueues bounds the receive queues of an interface that AF_XDP sockets
// serve: the size of the program's socket map.
const MaxQueues = 64

// MetaLen is the metadata the program puts before a redirected frame: the
// mask of the exported functions that passed it (a native-order u64,
// inproc.EndedBit set when it reached an end of the graph beneath).
// Annotation words that functions above read come before it, up to
// MaxAnn of them (the kernel takes at most 32 bytes of XDP metadata): Meta.
const MetaLen = 8

// MaxAnn is how many annotation words a frame's metadata carries.
const MaxAnn = 3

// Meta is the length of the metadata in front of a frame that carries
// words annotation words: the words, then the mask.
func Meta(words int) int { return MetaLen + 8*words }

// NewMap creates the socket map the XDP program redirects through, by
// receive queue.
func NewMap() (*ebpf.Map, error) {
	return ebpf.NewMap(&ebpf.MapSpec{Name: "ffpf_xsks", Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: MaxQueues})
}

// xskOptions sizes the rings for bursts at line rate (the defaults are
// tiny): 4096 frames of 2 KB, half of them lent to the kernel at a time.
var xskOptions = xdp.SocketOptions{NumFrames: 4096, FrameSize: 2048,
	FillRingNumDescs: 2048, CompletionRingNumDescs: 64, RxRingNumDescs: 2048, TxRingNumDescs: 64}

// MaxFrame is the longest frame an AF_XDP socket takes: a 2 KB UMEM frame
// less the XDP_PACKET_HEADROOM the kernel keeps in front of the packet
// (where MetaLen lies). The sockets are not multi-buffer (the library has
// no XDP_USE_SG), so a longer frame cannot go up this way: the XDP
// program lets it on to the kernel stack, counted as the bridge's dropped.
const MaxFrame = 2048 - 256

// zeroCopyRegions bounds the regions of a socket's UMEM view: at most 2048
// frames referred to above, the other 2048 for the kernel to fill.
const zeroCopyRegions = 8

// Set is the AF_XDP sockets of an interface, one per receive queue.
type Set struct {
	iface   string
	socks   []*xdp.Socket
	zcs     []*zeroCopy // per socket, set when its frames are referred to in place
	inPlace bool

	// got counts, per source, the frames its streams took; with the
	// program's per-source count of redirected frames (stolen) it tells,
	// at the end, what the kernel could not deliver.
	got  map[any]*atomic.Uint64
	live atomic.Uint64 // losses already counted from the sockets' statistics
	seen []uint64      // per socket, its statistics' losses counted (by its reader alone)

	// Lost, when set, is told of the frames the kernel lost on their way
	// to a socket, as the sockets' statistics count them while the
	// readers run (set it before Start): a packet limit counted at the
	// ends takes back the units those frames held.
	Lost func(n uint64)
}

// Open binds one AF_XDP socket per receive queue of iface and registers
// it in the program's socket map (NewMap). With inPlace the flowspace
// above refers to the frames where they are (zero-copy).
func Open(iface string, xsks *ebpf.Map, inPlace bool) (*Set, error) {
	ifc, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, err
	}
	n := Queues(iface)
	x := &Set{iface: iface, inPlace: inPlace, got: map[any]*atomic.Uint64{}}
	for q := range n {
		opts := xskOptions
		s, err := xdp.NewSocket(ifc.Index, q, &opts)
		if err != nil {
			x.Close(0)
			return nil, fmt.Errorf("cannot open an AF_XDP socket on %s queue %d: %w", iface, q, err)
		}
		if err := xsks.Put(uint32(q), uint32(s.FD())); err != nil {
			closeSocket(s)
			x.Close(0)
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

// Queues is how many receive queues of iface get an AF_XDP socket: all,
// up to MaxQueues.
func Queues(iface string) int {
	queues, _ := filepath.Glob("/sys/class/net/" + iface + "/queues/rx-*")
	return max(1, min(len(queues), MaxQueues))
}

// counter returns the count of frames src's streams took.
func (x *Set) counter(src any) *atomic.Uint64 {
	c := x.got[src]
	if c == nil {
		c = new(atomic.Uint64)
		x.got[src] = c
	}
	return c
}

// Taken returns how many frames of source src its streams took.
func (x *Set) Taken(src any) uint64 { return x.counter(src).Load() }

// Settle is told, once the readers have stopped, how many frames were lost
// in all (the program's per-source counts of frames redirected, less
// Taken); it returns those that the sockets' statistics did not count
// yet, and counts them.
func (x *Set) Settle(lost uint64) uint64 {
	live := x.live.Load()
	if lost <= live {
		return 0
	}
	x.live.Store(lost)
	return lost - live
}

// String says what the run used: how many sockets, and how.
func (x *Set) String() string {
	how := "copy-once"
	if x.inPlace {
		how = "zero-copy"
	}
	return fmt.Sprintf("%s: %d AF_XDP socket(s), one per receive queue, %s", x.iface, len(x.socks), how)
}

// Close waits up to wait for the flowspace above to release the frames it
// refers to, then closes the sockets. Frames still referred to keep their
// socket (and its memory) open: a leak, not a fault.
func (x *Set) Close(wait time.Duration) {
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

// TryTake implements inproc.Frames.
func (z *zeroCopy) TryTake() (*inproc.Region, bool) {
	z.reclaim()
	if n := len(z.ready); n > 0 {
		r := z.ready[n-1]
		z.ready = z.ready[:n-1]
		return r, true
	}
	return nil, false
}

// Take implements inproc.Frames: it waits for the flowspace above to
// release a region.
func (z *zeroCopy) Take(ctx context.Context) (*inproc.Region, error) {
	r, err := z.pool.Take(ctx)
	if err != nil {
		return nil, err
	}
	z.free(r)
	return r, nil
}

// Hold implements inproc.Frames.
func (z *zeroCopy) Hold(reg *inproc.Region, addr uint64) {
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

// Reader carries the frames of a Set's sockets up: one goroutine per
// socket, each with batches of its own, so that a quiet queue never holds
// up a busy one, each on a lane of the bridge of its own (socket q on lane
// q, modulo the lanes), so that the queues spread over the workers above.
type Reader struct {
	x     *Set
	up    *inproc.Bridge
	ports [][]*inproc.Stream // per socket, a stream per source
	quit  chan struct{}
	wg    sync.WaitGroup
}

// Start reads x's sockets until Stop. Each socket gets its own streams,
// copies of sources (one per source that captures on the interface), whose
// batches refer to that socket's frames (zero-copy) or copy them into
// pools of slot-byte slots.
func (x *Set) Start(up *inproc.Bridge, sources []*inproc.Stream, slot int) *Reader {
	r := &Reader{x: x, up: up, quit: make(chan struct{}), ports: make([][]*inproc.Stream, len(x.socks))}
	for q := range x.socks {
		for _, src := range sources {
			c := &inproc.Stream{Up: up, Source: src.Source, Mask: src.Mask, Tags: src.Tags, Snap: src.Snap,
				Taken: x.counter(src.Source), Ann: src.Ann, Holds: src.Holds, Lane: q}
			if z := x.zcs[q]; z != nil {
				c.Frames = z
			} else {
				c.Pool = inproc.NewPool(slot)
			}
			r.ports[q] = append(r.ports[q], c)
		}
		for _, c := range r.ports[q] {
			c.Peers = r.ports[q]
		}
	}
	for q := range x.socks {
		r.wg.Add(1)
		go r.run(context.Background(), q)
	}
	return r
}

// Stop sends up what the sockets' readers hold, then stops them. The
// sockets stay open (Set.Close closes them).
func (r *Reader) Stop() {
	close(r.quit)
	r.wg.Wait()
}

// run carries the frames of socket q up until Stop.
func (r *Reader) run(ctx context.Context, q int) {
	defer r.wg.Done()
	s, z, streams := r.x.socks[q], r.x.zcs[q], r.ports[q]
	words := 0
	if len(streams) > 0 {
		words = len(streams[0].Ann)
	}
	ml := uint64(Meta(words))
	checked := time.Now()
	for {
		// Wait at most FlushAfter while a batch is not full, so that its
		// packets go up soon; a quiet link costs a wake-up per 50 ms (and
		// Stop waits as long); a busy one never waits.
		wait := 50
		for _, st := range streams {
			if st.Pending() {
				wait = int(inproc.FlushAfter / time.Millisecond)
			}
		}
		n, _, err := s.Poll(wait)
		if err != nil {
			n = 0
		}
		now := time.Now().UnixNano()
		for _, d := range s.Receive(n) {
			if z != nil {
				z.pin(d.Addr)
			}
			if d.Addr >= ml {
				meta := s.GetFrame(xdp.Desc{Addr: d.Addr - ml, Len: uint32(ml)})
				mask := binary.NativeEndian.Uint64(meta[ml-MetaLen:])
				pkt := s.GetFrame(d)
				for _, st := range streams {
					if m := mask & st.Mask; m != 0 {
						st.Add(ctx, m|mask&inproc.EndedBit, pkt[:min(len(pkt), st.Snap)], uint32(len(pkt)), now, d.Addr, meta[:ml-MetaLen])
					}
				}
			}
			if z != nil {
				z.unpin(d.Addr) // back to the kernel unless a batch refers to it
			}
		}
		if z != nil {
			z.refill()
		} else {
			s.Fill(s.GetDescs(s.NumFreeFillSlots()))
		}
		if time.Since(checked) >= 100*time.Millisecond {
			r.kernelLosses(q)
			checked = time.Now()
		}
		if n == 0 && s.NumFilled() == 0 {
			// The kernel has no frame to receive into: the flowspace
			// above holds them all. Poll would return at once.
			time.Sleep(100 * time.Microsecond)
		}
		if n == 0 {
			inproc.FlushAll(ctx, streams)
			// Idle: the packets' time base is the wall clock, which
			// moves on; the flowspace above learns it (clock-only).
			for _, st := range streams {
				st.Clock(ctx, now)
			}
			select {
			case <-r.quit:
				r.kernelLosses(q)
				return
			default:
			}
		}
	}
}

// kernelLosses counts, as the bridge's dropped, the packets the kernel
// redirected to socket q but could not deliver: its receive ring was full,
// or the fill ring had no frame for it (userspace holds them all). The
// statistics are the socket's since it opened; x.seen[q] is what was
// counted before, by this reader or an earlier one.
func (r *Reader) kernelLosses(q int) {
	st, err := r.x.socks[q].Stats()
	if err != nil {
		return
	}
	k := st.KernelStats
	if n := k.Rx_dropped + k.Rx_ring_full + k.Rx_invalid_descs; n > r.x.seen[q] {
		// A lost frame counts once here, though it may have belonged to
		// several sources' streams: the flowspace settles the rest at
		// the end, from the program's per-source counts (Set.Settle).
		r.up.Lose(int(n - r.x.seen[q]))
		r.x.live.Add(n - r.x.seen[q])
		if r.x.Lost != nil {
			r.x.Lost(n - r.x.seen[q])
		}
		r.x.seen[q] = n
	}
}
