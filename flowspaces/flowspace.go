// Package flowspaces defines the Flowspace: an execution environment with
// its own programming model (userspace Go, kernel eBPF, XDP, a P4 switch)
// into which the flowgraph places functions. Flowspaces form a tree whose
// root is userspace on the host; packets enter at the leaves and travel up,
// crossing each barrier at most once, through a bridge.
//
// This package holds what every flowspace shares: the interface, and Node,
// a placed function as a flowspace sees it. One package per flowspace kind
// lives beneath it (user, and later kernel, xdp, p4).
//
// The sharp edge: a flowspace never sees the whole flowgraph, only the nodes
// placed in it and their inputs. Everything it needs to instantiate a node
// must be in the Node.
package flowspaces

import (
	"context"

	"github.com/ffpf-go/ffpf/functions"
)

// Flowspace runs the functions placed in it.
type Flowspace interface {
	// Name identifies the flowspace instance ("user", "xdp:eth0").
	Name() string
	// Target is the kind of implementation it runs.
	Target() functions.Target
	// Instantiate creates the nodes' functions and buffers. It is all or
	// nothing: on error, whatever it created is released.
	Instantiate(nodes []*Node) error
	// Activate starts the datapath; it returns at once.
	Activate(ctx context.Context) error
	// Wait blocks until every source has ended (or the context given to
	// Activate is done) and returns the sources' errors.
	Wait() error
	// Stop ends the datapath (sources stop after the batch at hand) and
	// waits for it; state stays readable until Close.
	Stop()
	// Close releases everything; the first error of a function's Close is
	// returned (a sink that failed to write, say).
	Close() error
}

// Node is one function placed in a flowspace.
type Node struct {
	ID       string
	Class    *functions.Class
	Ctx      functions.Context // parameters, link type, snap length
	Inputs   []*Node           // the nodes that feed it (none for a source)
	Counters functions.Counters

	// Set by the flowspace at instantiation.
	Function functions.Function
	Source   functions.Source
}

// State returns the node's persistent state decoded from its MBuf, or nil
// when the function keeps none.
func (n *Node) State() map[string]any {
	if s, ok := n.Function.(functions.Stateful); ok {
		return s.MBuf().Snapshot()
	}
	return nil
}
