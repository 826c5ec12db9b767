package kernel

// The way up. Packets that a function the flowspace above asked for
// passed go up through the ring buffer (bridges/ringbuf), or, when a
// capture on an XDP flowspace steals them, through AF_XDP sockets
// (bridges/afxdp); either way a reader here sends them through the
// in-process bridge the parent gave (SetWant), one stream per source.

import (
	"fmt"
	"runtime"

	"github.com/cilium/ebpf"

	"github.com/ffpf-go/ffpf/bridges/afxdp"
	"github.com/ffpf-go/ffpf/bridges/inproc"
	"github.com/ffpf-go/ffpf/bridges/ringbuf"
	"github.com/ffpf-go/ffpf/flowspaces"
)

// reader is what reads the way up: a ringbuf.Reader or an afxdp.Reader.
type reader interface{ Stop() }

// restartReader starts reading the ring buffer (or the AF_XDP sockets)
// for the current exports, replacing the reader of an earlier Connect;
// fs.mu is held.
func (fs *Flowspace) restartReader(nodes []*node) {
	if !fs.active || fs.up == nil || len(fs.want) == 0 || fs.ring == nil {
		return
	}
	if fs.reader != nil {
		fs.reader.Stop()
		fs.reader = nil
	}
	var exports []any
	var exported []*flowspaces.Node
	for _, w := range packetsOf(fs.want) {
		for _, k := range nodes {
			if k.Node == w {
				exports, exported = append(exports, w), append(exported, w)
			}
		}
	}
	var reach flowspaces.Reach // which sources reach which exported functions
	ann := annWords(nodes)
	var ports [][]*inproc.Stream
	for _, iface := range ifaces(nodes) {
		var port []*inproc.Stream
		for _, k := range nodes {
			if k.iface != iface {
				continue
			}
			s := &inproc.Stream{Up: fs.up, Source: k.Node, Tags: exports, Snap: captureSnap(k.Node), Ann: ann,
				Holds: fs.budget.AtEnds()}
			for b, e := range exported {
				if reach.Reaches(k.Node, e) {
					s.Mask |= 1 << b
				}
			}
			port = append(port, s)
		}
		ports = append(ports, port)
	}
	if x := fs.xsk; x != nil && steals(nodes) && len(ports) == 1 {
		fs.reader = x.Start(fs.up, ports[0], afxdp.MaxFrame)
		return
	}
	// A goroutine per ring buffer, each on its lane of the bridge.
	for _, port := range ports {
		for _, s := range port {
			// Slots as long as the capture's snap length: the PBuf's pages
			// are touched only as far as the packets reach.
			s.Pool = inproc.NewPool(s.Snap)
		}
	}
	r, err := ringbuf.Start(fs.rings, ports, len(ann), fs.offset)
	if err != nil {
		return // nothing comes up: the exports' packets count as the ring's losses
	}
	fs.reader = r
	if len(fs.rings) > 1 {
		fs.ringsUp = fmt.Sprintf("%d ring buffers, one per CPU, each read by a goroutine of its own on a lane of the bridge up", len(fs.rings))
	}
}

// ringCount is how many ring buffers the flowspace keeps: one per CPU, up
// to the workers one source may spread over.
func (fs *Flowspace) ringCount() int {
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		cpus = 1
	}
	return max(1, min(fs.maxWorkers(), cpus))
}

// maxWorkers is the most workers one source may spread over.
func (fs *Flowspace) maxWorkers() int {
	if fs.workers > 0 {
		return fs.workers
	}
	return runtime.GOMAXPROCS(0)
}

// SetWorkers implements flowspaces.Spreader: the ring buffers (made at the
// first Instantiate) and the lanes of the way up are at most n.
func (fs *Flowspace) SetWorkers(n int) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.workers = n
}

// Lanes implements user.Laned: the lanes its packets go up on (a ring
// buffer per CPU, or with a capture that steals, an AF_XDP socket per
// receive queue), or those of an eBPF flowspace beneath that sends up
// through the same bridge, whichever are more; 0 with nothing here.
func (fs *Flowspace) Lanes() int {
	fs.mu.Lock()
	n := 0
	if len(fs.nodes) > 0 {
		n = fs.ringCount()
		if fs.opts.Kind == flowspaces.KindXDP && steals(fs.nodes) {
			n = max(1, min(afxdp.Queues(fs.opts.Interface), fs.maxWorkers()))
		}
	}
	fs.mu.Unlock()
	for _, s := range fs.Children() {
		if l, ok := s.Child().(interface{ Lanes() int }); ok {
			n = max(n, l.Lanes())
		}
	}
	return n
}

// closeRings closes the ring buffers and the map of each CPU's.
func closeRings(rings []*ebpf.Map, byCPU *ebpf.Map) {
	for _, r := range rings {
		r.Close()
	}
	if byCPU != nil {
		byCPU.Close()
	}
}

// openXSK opens the AF_XDP sockets when a capture here steals and they are
// not open yet; fs.mu is held.
func (fs *Flowspace) openXSK(nodes []*node) error {
	if fs.xsk != nil || fs.xsks == nil || !steals(nodes) || fs.opts.Kind != flowspaces.KindXDP {
		return nil
	}
	// The frames reach userspace in place only if every barrier on the
	// way (the driver's, then user/kernel) is zero-copy: the bridge up,
	// which the kernel flowspace relays, must not copy against its word.
	inPlace := flowspaces.StubOf(fs) != nil
	for up := flowspaces.Flowspace(fs); up.Parent() != nil; up = up.Parent() {
		inPlace = inPlace && flowspaces.StubOf(up).Strategy == flowspaces.ZeroCopy
	}
	x, err := afxdp.Open(fs.opts.Interface, fs.xsks, inPlace)
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Name(), err)
	}
	if b := fs.budget; b.AtEnds() {
		// A frame lost on its way up held a unit of the packet limit
		// (none that reached an end here goes up: spec).
		x.Lost = func(n uint64) { b.Return(int(n)) }
	}
	fs.xsk, fs.sockets = x, x.String()
	return nil
}

// lostXSK counts, as the bridge's dropped, the packets of each capture's
// stream that its program redirected to an AF_XDP socket (stolen) but
// that never came up, less what the sockets' statistics already counted
// (once per frame); the readers have stopped and the counters are final.
func (fs *Flowspace) lostXSK() {
	x := fs.xsk
	if x == nil || fs.sending == nil {
		return
	}
	var lost uint64
	for _, k := range fs.nodes {
		if k.iface == "" || k.mbuf == nil {
			continue
		}
		stolen, got := k.mbuf.Load64(0), x.Taken(k.Node)
		lost += stolen - min(stolen, got)
	}
	if n := x.Settle(lost); n > 0 {
		fs.sending.Lose(int(n))
	}
}
