// Package kernel holds the eBPF flowspaces of the host: the kernel's
// traffic-control hook (kind kernel: TCX ingress, every interface) and one
// XDP flowspace per interface (kind xdp: at the driver). Their functions
// are eBPF programs generated at run time; a class runs here only if it
// has an implementation for the target (functions.TargetKernel or
// functions.TargetXDP). The hierarchy includes these flowspaces only where
// the machine can load such programs (see flowspaces/hierarchy).
//
// The sharp edge: a class with no eBPF implementation makes placement move
// the function up, and the plan says so; no class has one yet, so today
// these flowspaces take part in placement but host nothing.
package kernel

import (
	"context"
	"fmt"

	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
)

// Options describe an eBPF flowspace.
type Options struct {
	Kind      flowspaces.Kind // KindKernel or KindXDP
	Interface string          // for KindXDP: the interface whose driver runs it
	Name      string          // defaults to "kernel" or "xdp:<interface>"
}

// Flowspace is an eBPF flowspace.
type Flowspace struct {
	flowspaces.Position
	opts   Options
	target functions.Target
}

// New returns an eBPF flowspace.
func New(opts Options) (*Flowspace, error) {
	fs := &Flowspace{opts: opts}
	switch opts.Kind {
	case flowspaces.KindKernel:
		fs.target = functions.TargetKernel
		if fs.opts.Name == "" {
			fs.opts.Name = "kernel"
		}
	case flowspaces.KindXDP:
		if opts.Interface == "" {
			return nil, fmt.Errorf("an xdp flowspace needs an interface")
		}
		fs.target = functions.TargetXDP
		if fs.opts.Name == "" {
			fs.opts.Name = "xdp:" + opts.Interface
		}
	default:
		return nil, fmt.Errorf("kind %q is not an eBPF flowspace", opts.Kind)
	}
	return fs, nil
}

// Name implements flowspaces.Flowspace.
func (fs *Flowspace) Name() string { return fs.opts.Name }

// Kind implements flowspaces.Flowspace.
func (fs *Flowspace) Kind() flowspaces.Kind { return fs.opts.Kind }

// Target implements flowspaces.Flowspace.
func (fs *Flowspace) Target() functions.Target { return fs.target }

// Interface returns the XDP flowspace's interface ("" for the kernel).
func (fs *Flowspace) Interface() string { return fs.opts.Interface }

// Entry implements flowspaces.Flowspace: the tc hook sees every
// interface, an XDP program only its own.
func (fs *Flowspace) Entry(iface string) flowspaces.Entry {
	switch {
	case iface == fs.opts.Interface:
		return flowspaces.OwnEntry
	case fs.opts.Kind == flowspaces.KindKernel:
		return flowspaces.AnyEntry
	}
	return flowspaces.NoEntry
}

// Stores implements flowspaces.Flowspace: eBPF programs work on the packet
// where the kernel holds it.
func (fs *Flowspace) Stores() bool { return false }

// Host implements flowspaces.Flowspace.
func (fs *Flowspace) Host(n *flowspaces.Node) error {
	if !n.Class.Supports(fs.target) {
		return fmt.Errorf("class %s has no %s (eBPF) implementation", n.Class.Name, fs.target)
	}
	return fmt.Errorf("eBPF code generation for %s is not available in this build", fs.target)
}

// Instantiate implements flowspaces.Flowspace.
func (fs *Flowspace) Instantiate(n *flowspaces.Node) error { return fs.Host(n) }

// Remove implements flowspaces.Flowspace.
func (fs *Flowspace) Remove(*flowspaces.Node) {}

// Connect implements flowspaces.Flowspace.
func (fs *Flowspace) Connect() error { return nil }

// Activate implements flowspaces.Flowspace.
func (fs *Flowspace) Activate(context.Context) error { return nil }

// Wait implements flowspaces.Flowspace.
func (fs *Flowspace) Wait() error { return nil }

// Stop implements flowspaces.Flowspace.
func (fs *Flowspace) Stop() {}

// Close implements flowspaces.Flowspace.
func (fs *Flowspace) Close() error { return nil }
