package gen

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"runtime"
	"sort"
	"syscall"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// TransmitXDP sends through XDP live frames: BPF_PROG_RUN runs an XDP
// program over kernel-made frames (BPF_F_TEST_XDP_LIVE_FRAMES, Linux 5.18);
// the program writes the next frame of a pool into each and redirects it to
// the interface, whose ndo_xdp_xmit transmits it (on a veth: into the
// peer's receive queue). No syscall per frame: several Mpps from one core.
//
// The pool is a BPF array map holding the first `pool` frames of the
// trace (pool <= 0: min(packets, DefaultXDPPool)), loaded once. With
// cfg.Packets <= pool the trace goes out exactly, in order: the frames
// Transmit sends. With more packets, the first pool frames go out again
// and again, in order, until cfg.Packets frames have been offered
// (cfg.Packets 0: for ever). The contract is Transmit's otherwise: n
// frames went out and skipped were refused (shorter than an Ethernet
// header, or longer than the MTU allows, by AF_PACKET's rule), pps paces
// (0: top speed), and sent gets each frame that went out, in order, with
// times interpolated over the run it went out in.
//
// After the redirect, a frame the receiver cannot take is dropped without
// a word to the sender. On a veth, the peer takes none unless it runs NAPI,
// which an XDP program attached to it or GRO (ethtool -K PEER gro on;
// EnableGRO) turns on: TransmitXDP refuses such an interface with
// ErrNoXDPXmit (Linux 6.3 tells beforehand; on older kernels a veth is
// checked after the first run). At the end it compares what a veth's peer
// took (the veth's tx counter) with n, and returns a *PeerLossError if the
// peer took fewer.
func TransmitXDP(iface string, cfg Config, pps float64, pool int, sent func(frame []byte, ts time.Time) error) (n, skipped int64, err error) {
	// bpf_redirect's ifindex is looked up in the network namespace of the
	// thread that runs the program: stay on this one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ifc, err := net.InterfaceByName(iface)
	if err != nil {
		return 0, 0, fmt.Errorf("cannot transmit on %s: %v", iface, err)
	}
	if ifc.Index == loopback {
		return 0, 0, fmt.Errorf("%w: %s is the loopback", ErrNoXDPXmit, iface)
	}
	veth := isVeth(iface)
	ok, known := canXmitXDP(ifc.Index)
	if known && !ok {
		return 0, 0, noXmitError(iface, veth)
	}
	if pool <= 0 {
		pool = DefaultXDPPool
		if cfg.Packets > 0 {
			pool = int(min(cfg.Packets, DefaultXDPPool))
		}
	}
	if pool > MaxXDPPool {
		return 0, 0, fmt.Errorf("a pool of %d frames is too large (at most %d)", pool, MaxXDPPool)
	}
	if cfg.Packets > 0 && int64(pool) > cfg.Packets {
		pool = int(cfg.Packets)
	}

	// The trace's first pool frames, those the interface takes, in order.
	p := &xdpPool{offs: []int{0}}
	g := New(cfg)
	buf := make([]byte, MaxFrameLen)
	for i := 0; i < pool; i++ {
		c, _, _, _ := g.Next(buf)
		if !fits(buf[:c], ifc.MTU) {
			continue
		}
		p.pos = append(p.pos, i)
		p.data = append(p.data, buf[:c]...)
		p.offs = append(p.offs, len(p.data))
	}
	if len(p.pos) == 0 {
		if cfg.Packets == 0 {
			return 0, 0, fmt.Errorf("%s refuses all of the trace's first %d frames", iface, pool)
		}
		return 0, cfg.Packets, nil
	}
	total := int64(math.MaxInt64) // frames to send
	if cfg.Packets > 0 {
		total = cfg.Packets / int64(pool) * int64(len(p.pos))
		total += int64(sort.SearchInts(p.pos, int(cfg.Packets%int64(pool))))
		skipped = cfg.Packets - total
	}

	tx, err := newXDPTx(ifc.Index, p)
	if err != nil {
		return 0, 0, err
	}
	defer tx.close()
	if err := tx.state.Put(uint32(0), xdpState{Limit: uint64(total)}); err != nil {
		return 0, 0, fmt.Errorf("setting up the XDP transmitter: %v", err)
	}
	// A run with Repeat > 1 points the kernel's XDP dispatcher at the
	// program and back (bpf_prog_change_xdp), each change waiting for an RCU
	// grace period: ~25 ms per run here, whatever the batch. Not so when the
	// program is attached somewhere already. So it is also attached to the
	// interface itself, in generic mode, where it lets every frame the
	// interface receives through (it only transmits when run by
	// BPF_PROG_RUN). If that fails (another XDP program there), runs are
	// slow: batches are then 50 ms of traffic, as bursts.
	period, topBatch := 200*time.Microsecond, int64(1<<16)
	if l, err := link.AttachXDP(link.XDPOptions{Program: tx.prog, Interface: ifc.Index, Flags: link.XDPGenericMode}); err == nil {
		defer l.Close()
	} else {
		period, topBatch = 50*time.Millisecond, 1<<20
	}
	batch := topBatch
	if pps > 0 {
		batch = min(max(int64(pps*period.Seconds()), 1), topBatch)
	}

	var before linkCounters
	if veth {
		if before, err = readCounters(ifc.Index); err != nil {
			veth = false // not worth failing for: the check is advice
		}
	}
	data := make([]byte, xdpDataIn)
	var st xdpState
	start := time.Now()
	checked := !veth || known
	for n < total {
		if pps > 0 {
			if d := time.Duration(float64(n) / pps * 1e9); time.Since(start) < d {
				time.Sleep(d - time.Since(start))
			}
		}
		t0 := time.Now()
		runErr := liveRun(tx.prog.FD(), data, uint32(min(total-n, batch)))
		t1 := time.Now()
		// The count in the map is what the program really did, also when
		// a signal cut the run short (EINTR: the next run goes on from it).
		if err := tx.state.Lookup(uint32(0), &st); err != nil {
			return n, skipped, fmt.Errorf("reading the XDP transmitter's count: %v", err)
		}
		if sent != nil {
			k := int64(st.Count) - n
			for i := int64(0); i < k; i++ {
				j := int((n + i) % int64(len(p.pos)))
				ts := t0.Add(time.Duration(float64(t1.Sub(t0)) * float64(i+1) / float64(k)))
				if err := sent(p.data[p.offs[j]:p.offs[j+1]], ts); err != nil {
					return int64(st.Count), skipped, err
				}
			}
		}
		n = int64(st.Count)
		if runErr != nil && runErr != unix.EINTR {
			return n, skipped, liveFramesError(runErr)
		}
		if st.Failed != 0 {
			return n, skipped, fmt.Errorf("the kernel refused to resize or write %d XDP frames (bpf_xdp_adjust_tail, bpf_xdp_store_bytes)", st.Failed)
		}
		if !checked {
			// The kernel could not say whether the peer takes frames:
			// stop early if it takes none.
			checked = true
			if got := peerTook(ifc.Index, before, n, 500*time.Millisecond, 2*time.Second); got == 0 {
				return n, skipped, noXmitError(iface, veth)
			}
		}
	}
	if veth {
		if got := peerTook(ifc.Index, before, n, time.Second, 10*time.Second); got < n {
			return n, skipped, &PeerLossError{Iface: iface, Sent: n, Received: got}
		}
	}
	return n, skipped, nil
}

// DefaultXDPPool is TransmitXDP's default pool size: 8192 frames, a 12.6 MB
// map. MaxXDPPool bounds it (100 MB).
const (
	DefaultXDPPool = 8192
	MaxXDPPool     = 1 << 16
)

// xdpFrameRoom is the room for a frame in a pool entry, after its u32
// length: a frame's length must be a bounded constant for the verifier's
// check of bpf_xdp_store_bytes. It must hold MaxFrameLen.
const xdpFrameRoom = 1536

// loopback is the loopback's ifindex in every network namespace; a run
// without a context runs the program as if the frame came in there.
const loopback = 1

// xdpDataIn is the size of the frame BPF_PROG_RUN initializes its pages
// with. Live frame mode refuses data_in that does not fit a page after
// XDP_PACKET_HEADROOM, its page header and skb_shared_info's tailroom
// (3400 bytes pass here, 3500 fail with EINVAL). Within that, the size does
// not matter: the program resizes each frame from the length the run gives
// it (a 14-byte data_in grows to 1514 as well).
const xdpDataIn = xdpFrameRoom

// xdpPool is the userspace copy of the pool: frame j is
// data[offs[j]:offs[j+1]], and pos[j] its position in the trace.
type xdpPool struct {
	data []byte
	offs []int
	pos  []int
}

// xdpState is the program's state map value: the frames it has sent, the
// count it stops at (further runs drop their frame), and the frames it
// could not write.
type xdpState struct {
	Count  uint64
	Limit  uint64
	Failed uint64
}

// fits reports whether an Ethernet interface with this MTU takes the
// frame. It is AF_PACKET's rule, so that both transmitters send the same
// frames: at least an Ethernet header, at most MTU + 14 bytes, or 4 more
// with an 802.1Q tag. (bpf_redirect alone would take MTU + 18 bytes
// whatever the tag, and bpf_xdp_adjust_tail cannot go below 14.)
func fits(f []byte, mtu int) bool {
	if len(f) < 14 || len(f) > xdpFrameRoom {
		return false
	}
	return len(f) <= mtu+14 || len(f) <= mtu+18 && binary.BigEndian.Uint16(f[12:]) == 0x8100
}

type xdpTx struct {
	prog        *ebpf.Program
	pool, state *ebpf.Map
}

func (t *xdpTx) close() {
	t.prog.Close()
	t.pool.Close()
	t.state.Close()
}

// newXDPTx loads the pool and the program that sends it to ifindex.
func newXDPTx(ifindex int, p *xdpPool) (*xdpTx, error) {
	t := &xdpTx{}
	var err error
	t.pool, err = ebpf.NewMap(&ebpf.MapSpec{Name: "ffpf_gen_pool", Type: ebpf.Array,
		KeySize: 4, ValueSize: 4 + xdpFrameRoom, MaxEntries: uint32(len(p.pos))})
	if err != nil {
		return nil, fmt.Errorf("creating the frame pool (%d frames): %v", len(p.pos), err)
	}
	t.state, err = ebpf.NewMap(&ebpf.MapSpec{Name: "ffpf_gen_state", Type: ebpf.Array,
		KeySize: 4, ValueSize: uint32(unsafe.Sizeof(xdpState{})), MaxEntries: 1})
	if err != nil {
		t.pool.Close()
		return nil, fmt.Errorf("creating the transmitter's state: %v", err)
	}
	value := make([]byte, 4+xdpFrameRoom)
	for j := range p.pos {
		f := p.data[p.offs[j]:p.offs[j+1]]
		binary.NativeEndian.PutUint32(value, uint32(len(f)))
		copy(value[4:], f)
		if err := t.pool.Put(uint32(j), value); err != nil {
			t.pool.Close()
			t.state.Close()
			return nil, fmt.Errorf("filling the frame pool: %v", err)
		}
	}
	t.prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{Name: "ffpf_gen_tx", Type: ebpf.XDP, License: "GPL",
		Instructions: xdpTxProgram(t.pool.FD(), t.state.FD(), len(p.pos), ifindex)})
	if err != nil {
		t.pool.Close()
		t.state.Close()
		if errors.Is(err, unix.EINVAL) || errors.Is(err, ebpf.ErrNotSupported) {
			return nil, fmt.Errorf("loading the XDP transmitter: %v (it needs bpf_xdp_store_bytes, Linux 5.18 or later)", err)
		}
		return nil, fmt.Errorf("loading the XDP transmitter: %v", err)
	}
	return t, nil
}

// xdpTxProgram generates the program. In C:
//
//	if (ctx->ingress_ifindex != loopback) return XDP_PASS
//	s = state[0]
//	if (s->count >= s->limit) return XDP_DROP
//	f = pool[s->count % poolLen]
//	if (bpf_xdp_adjust_tail(ctx, f->len - (data_end - data)) ||
//	    bpf_xdp_store_bytes(ctx, 0, f->data, f->len)) { s->failed++; return XDP_DROP }
//	s->count++
//	return bpf_redirect(ifindex, 0)
func xdpTxProgram(pool, state, poolLen, ifindex int) asm.Instructions {
	const (
		ctx   = asm.R6
		st    = asm.R7
		frame = asm.R8
		size  = asm.R9
		key   = -4
	)
	return asm.Instructions{
		asm.Mov.Reg(ctx, asm.R1),
		// Frames the interface receives (the program is attached there
		// too) pass.
		asm.LoadMem(asm.R1, ctx, 12, asm.Word), // xdp_md.ingress_ifindex
		asm.JNE.Imm(asm.R1, loopback, "pass"),
		asm.StoreImm(asm.RFP, key, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, state),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, key),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "drop"),
		asm.Mov.Reg(st, asm.R0),
		asm.LoadMem(asm.R1, st, 0, asm.DWord),
		asm.LoadMem(asm.R2, st, 8, asm.DWord),
		asm.JGE.Reg(asm.R1, asm.R2, "drop"),
		asm.Mod.Imm(asm.R1, int32(poolLen)),
		asm.StoreMem(asm.RFP, key, asm.R1, asm.Word),
		asm.LoadMapPtr(asm.R1, pool),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, key),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "drop"),
		asm.Mov.Reg(frame, asm.R0),
		asm.LoadMem(size, frame, 0, asm.Word),
		// Bounds for the verifier (userspace wrote 14..xdpFrameRoom).
		asm.JLT.Imm(size, 14, "failed"),
		asm.JGT.Imm(size, xdpFrameRoom, "failed"),
		asm.LoadMem(asm.R2, ctx, 4, asm.Word), // xdp_md.data_end
		asm.LoadMem(asm.R1, ctx, 0, asm.Word), // xdp_md.data
		asm.Sub.Reg(asm.R2, asm.R1),
		asm.Mov.Reg(asm.R1, size),
		asm.Sub.Reg(asm.R1, asm.R2),
		asm.Mov.Reg(asm.R2, asm.R1),
		asm.Mov.Reg(asm.R1, ctx),
		asm.FnXdpAdjustTail.Call(),
		asm.JNE.Imm(asm.R0, 0, "failed"),
		asm.Mov.Reg(asm.R1, ctx),
		asm.Mov.Imm(asm.R2, 0),
		asm.Mov.Reg(asm.R3, frame),
		asm.Add.Imm(asm.R3, 4),
		asm.Mov.Reg(asm.R4, size),
		asm.FnXdpStoreBytes.Call(),
		asm.JNE.Imm(asm.R0, 0, "failed"),
		asm.LoadMem(asm.R1, st, 0, asm.DWord),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(st, 0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R1, int32(ifindex)),
		asm.Mov.Imm(asm.R2, 0),
		asm.FnRedirect.Call(),
		asm.Return(),
		asm.LoadMem(asm.R1, st, 16, asm.DWord).WithSymbol("failed"),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(st, 16, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, 1).WithSymbol("drop"), // XDP_DROP
		asm.Return(),
		asm.Mov.Imm(asm.R0, 2).WithSymbol("pass"), // XDP_PASS
		asm.Return(),
	}
}

// liveRun runs the program repeat times in live frame mode. It is
// BPF_PROG_RUN without cilium/ebpf's Run, which retries an interrupted run
// with the whole Repeat: under a steady rain of signals (a profiler's
// SIGPROF, Go's SIGURG) long runs would never end.
func liveRun(prog int, data []byte, repeat uint32) error {
	attr := struct {
		progFD, retval, dataSizeIn, dataSizeOut uint32
		dataIn, dataOut                         uint64
		repeat, duration, ctxSizeIn, ctxSizeOut uint32
		ctxIn, ctxOut                           uint64
		flags, cpu, batchSize, _                uint32
	}{
		progFD:     uint32(prog),
		dataSizeIn: uint32(len(data)),
		dataIn:     uint64(uintptr(unsafe.Pointer(&data[0]))),
		repeat:     repeat,
		flags:      unix.BPF_F_TEST_XDP_LIVE_FRAMES,
	}
	_, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_TEST_RUN, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(data)
	if errno != 0 {
		return errno
	}
	return nil
}

// liveFramesError names the feature when the kernel lacks it.
func liveFramesError(err error) error {
	const enotsupp = syscall.Errno(524) // the kernel's ENOTSUPP
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) || errors.Is(err, enotsupp) {
		return fmt.Errorf("running the XDP transmitter: %v (XDP live frames, BPF_F_TEST_XDP_LIVE_FRAMES, need Linux 5.18 or later)", err)
	}
	return fmt.Errorf("running the XDP transmitter: %v", err)
}

// ErrNoXDPXmit is the error when the interface does not take XDP frames.
var ErrNoXDPXmit = errors.New("cannot transmit XDP frames")

func noXmitError(iface string, veth bool) error {
	if veth {
		return fmt.Errorf("%w on %s: a veth's peer takes them only with NAPI on, "+
			"which an XDP program attached to the peer or GRO (ethtool -K PEER gro on) turns on", ErrNoXDPXmit, iface)
	}
	return fmt.Errorf("%w on %s: its driver has no ndo_xdp_xmit", ErrNoXDPXmit, iface)
}

// PeerLossError says that a veth's peer took fewer frames than went out.
// The veth hands the peer frames in bulks of up to 16 and drops the rest of
// a bulk from the first frame the peer's receive queue (256 frames) has no
// room for or its MTU refuses.
type PeerLossError struct {
	Iface          string
	Sent, Received int64
}

func (e *PeerLossError) Error() string {
	return fmt.Sprintf("the peer of %s took %d of the %d frames sent (its receive queue was full or its MTU is smaller)",
		e.Iface, e.Received, e.Sent)
}

// EnableGRO turns GRO on for an interface of this network namespace, as
// ethtool -K IFACE gro on: on a veth, that gives the peer of the interface
// what it needs to accept XDP frames. Beware that GRO then merges TCP
// segments before the stack and packet sockets see them.
func EnableGRO(iface string) error { return setGRO(iface, true) }

func setGRO(iface string, on bool) error {
	v := ethtoolValue{cmd: unix.ETHTOOL_SGRO}
	if on {
		v.data = 1
	}
	if err := ethtool(iface, &v); err != nil {
		return fmt.Errorf("cannot set GRO on %s: %v", iface, err)
	}
	return nil
}

type ethtoolValue struct{ cmd, data uint32 }

// ethtool issues a SIOCETHTOOL request whose data is v.
func ethtool(iface string, v *ethtoolValue) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data unsafe.Pointer
		_    [16]byte
	}
	if len(iface) >= len(ifr.name) {
		return unix.EINVAL
	}
	copy(ifr.name[:], iface)
	ifr.data = unsafe.Pointer(v)
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); errno != 0 {
		return errno
	}
	return nil
}

// isVeth reports whether the interface is a veth.
func isVeth(iface string) bool {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	info, err := unix.IoctlGetEthtoolDrvinfo(fd, iface)
	return err == nil && unix.ByteSliceToString(info.Driver[:]) == "veth"
}

type linkCounters struct{ rxPackets, txPackets uint64 }

// readCounters reads an interface's counters through rtnetlink (sysfs
// shows the namespace it was mounted in, not the thread's).
func readCounters(ifindex int) (linkCounters, error) {
	tab, err := syscall.NetlinkRIB(syscall.RTM_GETLINK, syscall.AF_UNSPEC)
	if err != nil {
		return linkCounters{}, err
	}
	msgs, err := syscall.ParseNetlinkMessage(tab)
	if err != nil {
		return linkCounters{}, err
	}
	for _, m := range msgs {
		if m.Header.Type != syscall.RTM_NEWLINK || len(m.Data) < syscall.SizeofIfInfomsg {
			continue
		}
		ifi := (*syscall.IfInfomsg)(unsafe.Pointer(&m.Data[0]))
		if int(ifi.Index) != ifindex {
			continue
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(&m)
		if err != nil {
			return linkCounters{}, err
		}
		for _, a := range attrs {
			if a.Attr.Type == unix.IFLA_STATS64 && len(a.Value) >= 16 {
				// struct rtnl_link_stats64: rx_packets, tx_packets, ...
				return linkCounters{rxPackets: binary.NativeEndian.Uint64(a.Value), txPackets: binary.NativeEndian.Uint64(a.Value[8:])}, nil
			}
		}
	}
	return linkCounters{}, fmt.Errorf("no counters for interface %d", ifindex)
}

// peerTook returns how many frames a veth's peer took since before (a
// veth counts them in its tx_packets), waiting for it to reach n while it
// still moves: the peer's NAPI may still be busy with the last frames, and
// on a loaded machine it may get the CPU late. It gives up once the count
// has not moved for quiet, or after limit.
func peerTook(ifindex int, before linkCounters, n int64, quiet, limit time.Duration) int64 {
	start := time.Now()
	last, since := int64(-1), start
	for {
		c, err := readCounters(ifindex)
		if err != nil {
			return n // cannot tell: assume the best
		}
		got := int64(c.txPackets - before.txPackets)
		if got != last {
			last, since = got, time.Now()
		}
		if got >= n || time.Since(since) > quiet || time.Since(start) > limit {
			return min(got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// canXmitXDP reports whether the interface takes redirected XDP frames: the
// NDO_XMIT bit of its XDP features, which a veth sets only while its peer
// has NAPI. known is false when the kernel cannot tell (before Linux 6.3,
// which added the netdev generic netlink family).
func canXmitXDP(ifindex int) (ok, known bool) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_GENERIC)
	if err != nil {
		return false, false
	}
	defer unix.Close(fd)
	ctrl, err := genl(fd, unix.GENL_ID_CTRL, unix.CTRL_CMD_GETFAMILY, unix.CTRL_ATTR_FAMILY_NAME, []byte("netdev\x00"))
	if id := ctrl[unix.CTRL_ATTR_FAMILY_ID]; err != nil || len(id) < 2 {
		return false, false
	}
	const (
		netdevCmdDevGet      = 1
		netdevADevIfindex    = 1
		netdevADevXDPFeature = 3
		netdevXDPActNdoXmit  = 1 << 2
	)
	ifi := binary.NativeEndian.AppendUint32(nil, uint32(ifindex))
	dev, err := genl(fd, binary.NativeEndian.Uint16(ctrl[unix.CTRL_ATTR_FAMILY_ID]), netdevCmdDevGet, netdevADevIfindex, ifi)
	if f := dev[netdevADevXDPFeature]; err != nil || len(f) < 8 {
		return false, false
	}
	return binary.NativeEndian.Uint64(dev[netdevADevXDPFeature])&netdevXDPActNdoXmit != 0, true
}

// genl sends a generic netlink request with one attribute and returns the
// attributes of the answer.
func genl(fd int, family uint16, cmd uint8, attr uint16, value []byte) (map[uint16][]byte, error) {
	al := 4 + len(value)
	msg := make([]byte, unix.NLMSG_HDRLEN+unix.GENL_HDRLEN+(al+3)&^3)
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], family)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST)
	msg[16], msg[17] = cmd, 1 // genlmsghdr: command, version
	binary.NativeEndian.PutUint16(msg[20:], uint16(al))
	binary.NativeEndian.PutUint16(msg[22:], attr)
	copy(msg[24:], value)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	buf := make([]byte, 1<<16)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return nil, err
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil || len(msgs) == 0 || msgs[0].Header.Type == unix.NLMSG_ERROR || len(msgs[0].Data) < unix.GENL_HDRLEN {
		return nil, fmt.Errorf("generic netlink request %d refused", cmd)
	}
	attrs := map[uint16][]byte{}
	for b := msgs[0].Data[unix.GENL_HDRLEN:]; len(b) >= 4; {
		l := int(binary.NativeEndian.Uint16(b))
		if l < 4 || l > len(b) {
			break
		}
		attrs[binary.NativeEndian.Uint16(b[2:])&^unix.NLA_F_NESTED] = b[4:l]
		b = b[min((l+3)&^3, len(b)):]
	}
	return attrs, nil
}
