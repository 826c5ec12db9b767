package dev

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/internal/libpcap"
)

func init() {
	functions.Register(&functions.Class{
		Name:    "dev",
		Summary: "capture packets live from a network interface (its XDP or tc hook, or libpcap)",
		Params: []functions.Param{
			{Name: "expr", Type: functions.String, Required: true,
				Summary: "the interface to capture on (eth0, any…)", Check: ifaceName},
			{Name: "snaplen", Type: functions.Size, Default: "262144", Unit: "bytes",
				Summary: "most bytes captured per packet", Check: snapRange},
			{Name: "promisc", Type: functions.Bool, Default: "true",
				Summary: "put the interface in promiscuous mode"},
			{Name: "buffer", Type: functions.Size, Default: "8MB", Unit: "bytes",
				Summary: "kernel capture buffer: packets arriving while it is full are dropped", Check: bufRange},
			{Name: "steal", Type: functions.Bool, Default: "false",
				Summary: "in XDP: the packets a userspace function needs go up through an AF_XDP socket and leave the kernel stack (default: a copy goes up through a ring buffer and the packet goes on); packets longer than 1792 bytes do not fit a socket's frame: they go on to the stack, counted as the bridge's dropped"},
			{Name: "drop", Type: functions.Bool, Default: "false",
				Summary: "in XDP or tc: the incoming packets the graph filters out are dropped at the hook instead of going on to the kernel stack"},
			{Name: "direction", Type: functions.String, Check: directionName,
				Summary: "the packets captured: in (received), out (sent) or inout (both); by default inout, as tcpdump, or in with steal=true"},
		},
		// At an eBPF hook the state counts what the hook's verdicts took
		// from the kernel stack (the eBPF flowspace keeps it); through
		// libpcap there is none.
		State: &functions.State{Fields: []functions.StateField{
			{Name: "stolen", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum, Targets: ebpfTargets,
				Summary: "packets of this capture's functions redirected to AF_XDP (steal=true)"},
			{Name: "discarded", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum, Targets: ebpfTargets,
				Summary: "filtered packets dropped at the hook (drop=true)"},
		}},
		// In the kernel and XDP flowspaces the source is the eBPF hook on
		// the interface itself.
		Targets:   []functions.Target{functions.TargetUser, functions.TargetKernel, functions.TargetXDP},
		Interface: func(p functions.Params) string { return p.Str("expr") },
		// Runs asks the flowspaces of this machine (simulated interfaces
		// of a hierarchy file are not asked): the interface must exist,
		// and an eBPF hook needs a network interface of its own.
		Runs: func(t functions.Target, p functions.Params) error {
			if t == functions.TargetUser && p.Bool("drop") {
				return errors.New("drop=true drops packets at an eBPF hook (tc or XDP); libpcap only gets copies of packets the kernel keeps")
			}
			if t != functions.TargetXDP && p.Bool("steal") {
				return errors.New("steal=true redirects packets to AF_XDP sockets, which only an XDP hook can do")
			}
			if p.Bool("steal") && Direction(p) != In {
				return errors.New("steal=true takes received packets off the kernel stack through AF_XDP, which sent packets never reach: capture direction=in (-Q in)")
			}
			iface := p.Str("expr")
			if err := Exists(iface); err != nil {
				return err
			}
			if t != functions.TargetUser {
				if iface == "any" {
					return errors.New("the any device is not an interface: XDP and tc hooks attach to one interface each, so libpcap captures on all of them, in userspace")
				}
				if _, err := net.InterfaceByName(iface); err != nil {
					return fmt.Errorf("%s is not a network interface: it has no XDP or tc hook", iface)
				}
			}
			return nil
		},
		// Validate reports the interface's link type. A missing
		// interface is a runtime error, not a bad request: NewSource
		// reports it.
		Validate: func(ctx *functions.Context) error {
			ctx.LinkType = functions.LinkEthernet
			if lt, err := Probe(ctx.Params.Str("expr")); err == nil {
				ctx.LinkType = lt
			}
			c := functions.LiveCapture(ctx.LinkType)
			c.Direction = Direction(ctx.Params)
			ctx.Captures = []functions.Capture{c}
			return nil
		},
		NewSource: func(ctx *functions.Context) (functions.Source, error) {
			p := ctx.Params
			s, err := Open(p.Str("expr"), Options{
				Snaplen: int(p.Int("snaplen")), Promisc: p.Bool("promisc"), Buffer: int(p.Int("buffer")),
				Direction: Direction(p),
			})
			if err == nil && ctx.LinkType != 0 && ctx.LinkType != s.link {
				s.Close() // the graph was checked for another link type
				return nil, fmt.Errorf("cannot capture on %s: its link type is %v, but the request was checked for %v",
					s.iface, s.link, ctx.LinkType)
			}
			return s, err
		},
	})
}

// ebpfTargets are the flowspaces where a dev is an eBPF hook.
var ebpfTargets = []functions.Target{functions.TargetKernel, functions.TargetXDP}

func ifaceName(v functions.Value) error {
	if v.Str == "" || len(v.Str) > 255 || strings.ContainsAny(v.Str, "/\x00") {
		return fmt.Errorf("%q is not an interface name", v.Str)
	}
	return nil
}

// Directions of a capture (the direction parameter, tcpdump's -Q).
const (
	In    = functions.DirectionIn
	Out   = functions.DirectionOut
	InOut = functions.DirectionInOut
)

func directionName(v functions.Value) error {
	switch v.Str {
	case In, Out, InOut:
		return nil
	}
	return fmt.Errorf("direction %q is not in, out or inout", v.Str)
}

// Direction is the direction a capture with parameters p captures: its
// direction parameter, or in for a capture that steals (the packets it
// takes off the stack are received ones) and inout otherwise.
func Direction(p functions.Params) string {
	switch {
	case p.Has("direction"):
		return p.Str("direction")
	case p.Bool("steal"):
		return In
	}
	return InOut
}

func snapRange(v functions.Value) error {
	if v.Int < 64 || v.Int > MaxSnaplen {
		return fmt.Errorf("snap length %d is not between 64 and %d bytes", v.Int, MaxSnaplen)
	}
	return nil
}

func bufRange(v functions.Value) error {
	if v.Int < 64<<10 || v.Int > 2<<30 {
		return fmt.Errorf("capture buffer %d is not between 64KB and 2GB", v.Int)
	}
	return nil
}

const (
	// MaxSnaplen is libpcap's largest snap length.
	MaxSnaplen = 262144
	// ReadTimeout is libpcap's packet buffer timeout: how long the kernel
	// holds packets before handing a partly filled block over.
	ReadTimeout = 50 * time.Millisecond
	// fillBudget bounds how long Fill keeps reading once it started; a
	// read blocks at most ReadTimeout, so Fill returns within about
	// fillBudget + ReadTimeout.
	fillBudget = 40 * time.Millisecond
	// statsEvery is how often Fill refreshes the drop counter.
	statsEvery = 100 * time.Millisecond
)

// Options of a live capture.
type Options struct {
	Snaplen int  // bytes per packet (0: MaxSnaplen)
	Promisc bool // promiscuous mode
	Buffer  int  // kernel buffer in bytes (0: libpcap's default)
	// Direction is in, out or inout ("": inout), as pcap_setdirection.
	Direction string
}

// Source is the dev class's source function: a libpcap handle on one
// interface, read with zero-copy reads and copied once into PBuf slots.
type Source struct {
	iface   string
	link    functions.LinkType
	snaplen int

	mu     sync.Mutex // held by Fill while it reads, and by Close
	h      *libpcap.Handle
	err    error // pending, returned once the batch is empty
	statAt time.Time

	closed atomic.Bool
	drops  atomic.Uint64
}

// Exists returns tcpdump's error for a device libpcap does not know
// ("nosuch0: No such device exists"), or nil.
func Exists(iface string) error {
	if iface == "any" {
		return nil
	}
	if _, err := net.InterfaceByName(iface); err == nil {
		return nil
	}
	devs, err := libpcap.Devices()
	if err != nil || hasDev(devs, iface) {
		return nil // libpcap will say what is wrong when it opens it
	}
	return fmt.Errorf("%s: No such device exists", iface)
}

// Probe returns the link type a capture on iface will have, and an error
// naming the interface if libpcap does not know it. It starts no capture
// for network interfaces (it reads their ARP hardware type from sysfs, as
// libpcap does); only for other devices (usbmon, nflog…) it opens and
// closes a capture, which needs the privileges capturing needs.
func Probe(iface string) (functions.LinkType, error) {
	if iface == "any" {
		return functions.LinkLinuxSLL, nil
	}
	if _, err := net.InterfaceByName(iface); err == nil {
		if b, err := os.ReadFile("/sys/class/net/" + iface + "/type"); err == nil {
			if t, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				if lt, ok := arphrdLink[t]; ok {
					return lt, nil
				}
			}
		}
	} else if err := Exists(iface); err != nil {
		return 0, err
	}
	s, err := Open(iface, Options{Snaplen: 64, Buffer: 64 << 10})
	if err != nil {
		return 0, err
	}
	defer s.Close()
	return s.link, nil
}

func hasDev(devs []libpcap.Device, name string) bool {
	for _, d := range devs {
		if d.Name == name {
			return true
		}
	}
	return false
}

// arphrdLink maps the ARP hardware types of Linux network interfaces to the
// link type libpcap gives their captures (pcap-linux.c); others are probed.
var arphrdLink = map[int]functions.LinkType{
	1:     functions.LinkEthernet, // ARPHRD_ETHER
	23:    functions.LinkEthernet, // ARPHRD_METRICOM
	772:   functions.LinkEthernet, // ARPHRD_LOOPBACK
	65534: functions.LinkRaw,      // ARPHRD_NONE: tun, wireguard
	256:   functions.LinkRaw,      // ARPHRD_SLIP
	257:   functions.LinkRaw,      // ARPHRD_CSLIP
	258:   functions.LinkRaw,      // ARPHRD_SLIP6
	259:   functions.LinkRaw,      // ARPHRD_CSLIP6
	264:   functions.LinkRaw,      // ARPHRD_ADAPT
	512:   functions.LinkLinuxSLL, // ARPHRD_PPP: cooked
	776:   functions.LinkRaw,      // ARPHRD_SIT
	768:   functions.LinkRaw,      // ARPHRD_TUNNEL
}

// Open activates a capture on iface. Errors name the interface and give
// libpcap's reason.
func Open(iface string, o Options) (*Source, error) {
	if o.Snaplen <= 0 || o.Snaplen > MaxSnaplen {
		o.Snaplen = MaxSnaplen
	}
	h, err := libpcap.Open(iface, libpcap.Options{Snaplen: o.Snaplen, Promisc: o.Promisc, Timeout: ReadTimeout, Buffer: o.Buffer})
	if err != nil {
		return nil, fmt.Errorf("cannot capture on %s: %s", iface, activateReason(err))
	}
	if d, ok := pcapDirections[o.Direction]; ok && o.Direction != InOut {
		if err := h.SetDirection(d); err != nil {
			h.Close()
			return nil, fmt.Errorf("cannot capture on %s: %v", iface, err)
		}
	}
	s := &Source{iface: iface, h: h, link: linkType(h.LinkType()), snaplen: o.Snaplen, statAt: time.Now()}
	if n := h.Snaplen(); n > 0 && n < s.snaplen {
		s.snaplen = n
	}
	return s, nil
}

// pcapDirections are libpcap's names for the directions.
var pcapDirections = map[string]libpcap.Direction{In: libpcap.DirectionIn, Out: libpcap.DirectionOut, InOut: libpcap.DirectionInOut, "": libpcap.DirectionInOut}

// activateReason turns libpcap's failures into lower-case reasons, in
// tcpdump's words where tcpdump has some.
func activateReason(err error) string {
	var ae *libpcap.ActivateError
	if !errors.As(err, &ae) {
		return err.Error() // "setting the snap length: …", or pcap_create's message
	}
	switch ae.Status {
	case libpcap.ErrNoSuchDevice:
		return "No such device exists" // tcpdump's words
	case libpcap.ErrPermDenied:
		return "permission denied (capturing needs root or CAP_NET_RAW and CAP_NET_ADMIN)"
	case libpcap.ErrIfaceNotUp:
		return "the interface is not up"
	case libpcap.WarnPromiscNotSup:
		return "cannot set promiscuous mode"
	}
	return ae.Msg
}

// linkType maps libpcap's DLT_ value to the LINKTYPE_ value pcap files and
// ffpf use. They differ only for a few old values, of which Linux uses
// DLT_RAW (12, or 14 on OpenBSD).
func linkType(dlt int) functions.LinkType {
	switch dlt {
	case 12, 14:
		return functions.LinkRaw
	}
	return functions.LinkType(dlt)
}

// Info describes the capture: the interface, its link type and the snap
// length.
func (s *Source) Info() functions.SourceInfo {
	return functions.SourceInfo{Name: s.iface, LinkType: s.link, MaxCapLen: s.snaplen, Live: true}
}

// Fill reads packets until the batch is full or no packet has arrived for
// a read timeout, and returns within about 100 ms even on an idle link.
// After Close it returns io.EOF; a capture error (the interface went away)
// is returned once, with an empty batch, and after it nothing more comes.
func (s *Source) Fill(b *buffers.Batch) error {
	if s.closed.Load() {
		return io.EOF
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.h == nil {
		return io.EOF
	}
	if s.err != nil {
		return s.err
	}
	n0 := b.N
	start := time.Now()
	for b.Room() > 0 && !s.closed.Load() {
		data, wire, ts, err := s.h.Next()
		if err != nil {
			if err != libpcap.ErrTimeout {
				if err == io.EOF || s.closed.Load() {
					s.err = io.EOF
				} else {
					s.err = fmt.Errorf("capture on %s failed: %v", s.iface, err)
				}
			}
			break
		}
		// data points into libpcap's ring: copy it before the next read
		b.Append(data, wire, ts)
		if b.N&31 == 0 && time.Since(start) > fillBudget { // the clock, every 32 packets
			break
		}
	}
	if time.Since(s.statAt) > statsEvery {
		s.updateDrops()
	}
	if b.N == n0 && s.err != nil {
		return s.err
	}
	return nil
}

// updateDrops reads the kernel's counters; s.mu must be held.
func (s *Source) updateDrops() {
	s.statAt = time.Now()
	if drop, ifdrop, err := s.h.Stats(); err == nil {
		s.drops.Store(drop + ifdrop)
	}
}

// Drops returns the packets lost before they reached the source: dropped
// by the kernel because the capture buffer was full, or by the interface.
// It is refreshed every 100 ms while Fill runs, and at Close.
func (s *Source) Drops() uint64 { return s.drops.Load() }

// Close stops the capture. It may run while Fill runs in another goroutine:
// it makes that Fill return (within a read timeout) and then closes the
// handle, so the packet bytes Fill is copying are never freed under it.
func (s *Source) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.h != nil {
		s.updateDrops()
		s.h.Close()
		s.h = nil
	}
	return nil
}

var (
	_ functions.Source  = (*Source)(nil)
	_ functions.Dropper = (*Source)(nil)
)
