// Package p4 is the P4 switch flowspace (DESIGN.md §13): functions placed
// on a switch below the host run there as one P4_16 program for v1model,
// built from the pipeline IR each class lowers a function to
// (functions/p4gen), pushed and read over P4Runtime by this process, the
// switch's controller (flowspaces/p4/controller).
//
// A switch is a flowspace below a NIC: its uplink, a port cabled to a host
// NIC that is itself a flowspace (an xdp one), or the CPU port, is the
// barrier. Packets enter at its front-panel ports, named as hierarchy
// interfaces (a capture of swp1 is placed on the switch whose port swp1
// is); the functions placed here run in the order of the flowgraph, each
// only for the packets its inputs passed (a fork sees every packet, a join
// the union), and a packet that a function the parent asked for passed
// leaves through the uplink, once; the others are dropped: the switch
// sends up only what passes. Each function counts the packets it saw and
// passed in a counter, so in = out + filtered + dropped holds for switch
// functions as for any other.
//
// Placement is by resources: a function is offered to the stage allocator
// (p4gen.Allocate) with those placed before it, and what does not fit is
// refused with a reason in the resource's terms, so that it and its
// dependants run above. Each function keeps a Go half in this process: its
// MBuf, filled from the counters and registers that hold its state (read
// every SyncEvery and at the end; with window=, the half that holds each
// window as it ends, window.go), the records it makes from that state,
// the digests its code sends (Digester), its handlers.
//
// The sharp edge: the switch reads nothing but its ports, and the state
// the Go half shows is as old as the last read. A register read is the
// model's (and a hardware switch's); bmv2's P4Runtime server does not serve
// one (p4lang/PI#376), so state that must be readable there lives in
// counters.
package p4

import (
	"fmt"
	"sort"
	"time"

	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// Options describe a switch.
type Options struct {
	// Name is the flowspace's ("tor").
	Name string
	// Address is the switch's P4Runtime address (host:port) and DeviceID
	// the device it must answer as.
	Address  string
	DeviceID uint64
	// Uplink is how packets go up to the parent: the port cabled to the
	// parent's NIC (UplinkIface, the NIC of an xdp flowspace), or, with
	// UplinkCPU, the CPU port (PacketIn over P4Runtime).
	Uplink      uint16
	UplinkIface string
	UplinkCPU   bool
	// CPUPort is the switch's CPU port number (DefaultCPUPort when 0).
	CPUPort uint16
	// Ports are the front-panel ports, by the hierarchy interface name
	// that stands for each ("swp1" → 2).
	Ports map[string]uint16
	// Profile is the pipeline's resources (p4gen.Tofino1() when zero).
	Profile p4gen.Profile
	// Timeout bounds connecting to the switch and each call.
	Timeout time.Duration
}

// DefaultCPUPort is the CPU port of a switch whose hierarchy names none,
// as bmv2 is commonly started (--cpu-port 255).
const DefaultCPUPort = 255

// SyncEvery is how often the Go halves' MBufs are read from the switch
// while it runs.
const SyncEvery = 100 * time.Millisecond

// Flowspace is a P4 switch.
type Flowspace struct {
	flowspaces.Position
	opts Options
	run  // the functions placed here and the switch's datapath (flowspace.go)
}

// New returns a switch flowspace; the profile must be valid.
func New(opts Options) (*Flowspace, error) {
	if opts.Name == "" {
		return nil, fmt.Errorf("a p4 flowspace needs a name")
	}
	if opts.Profile.Stages == 0 && opts.Profile.Registers == nil {
		opts.Profile = p4gen.Tofino1()
	}
	if err := opts.Profile.Validate(); err != nil {
		return nil, err
	}
	if opts.CPUPort == 0 {
		opts.CPUPort = DefaultCPUPort
	}
	if !opts.UplinkCPU && opts.UplinkIface == "" {
		return nil, fmt.Errorf("switch %s: its uplink port %d is cabled to no host NIC", opts.Name, opts.Uplink)
	}
	for name, port := range opts.Ports {
		if (!opts.UplinkCPU && port == opts.Uplink) || port == opts.CPUPort {
			return nil, fmt.Errorf("switch %s: port %d of %s is its uplink or CPU port", opts.Name, port, name)
		}
	}
	fs := &Flowspace{opts: opts}
	fs.run.init()
	return fs, nil
}

// Name implements flowspaces.Flowspace.
func (fs *Flowspace) Name() string { return fs.opts.Name }

// Kind implements flowspaces.Flowspace.
func (fs *Flowspace) Kind() flowspaces.Kind { return flowspaces.KindP4 }

// Target implements flowspaces.Flowspace.
func (fs *Flowspace) Target() functions.Target { return functions.TargetP4 }

// Options returns what the switch was described with.
func (fs *Flowspace) Options() Options { return fs.opts }

// Interfaces returns the front-panel ports' interface names, sorted.
func (fs *Flowspace) Interfaces() []string {
	var out []string
	for name := range fs.opts.Ports {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Entry implements flowspaces.Flowspace: the packets of a front-panel
// port enter here.
func (fs *Flowspace) Entry(iface string) flowspaces.Entry {
	if _, ok := fs.opts.Ports[iface]; ok {
		return flowspaces.OwnEntry
	}
	return flowspaces.NoEntry
}

// FramesOnly implements flowspaces.Framer: the packets a switch passes go
// up its uplink as frames, without the annotation words its functions
// wrote (a timestamp, a sample's mark), which a function above therefore
// cannot read: placement raises the writer to it.
func (fs *Flowspace) FramesOnly() bool { return true }

// Stores implements flowspaces.Flowspace: a switch keeps no packet; what
// goes up is sent out of the uplink as it passes.
func (fs *Flowspace) Stores() bool { return false }

// uplinkPort is the port packets go up through.
func (fs *Flowspace) uplinkPort() uint16 {
	if fs.opts.UplinkCPU {
		return fs.opts.CPUPort
	}
	return fs.opts.Uplink
}

// Barrier describes the crossing up, for the hierarchy's default.
func (o *Options) Barrier() string {
	if o.UplinkCPU {
		return "CPU port (P4Runtime)"
	}
	return "network link to " + o.UplinkIface
}
