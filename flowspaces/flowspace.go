// Package flowspaces defines the Flowspace: an execution environment with
// its own programming model (userspace Go, kernel eBPF, XDP, a P4 switch, a
// simulated board) into which the flowgraph places functions, and the
// hierarchy they form. Userspace on the host is the root; packets enter at
// the leaves and travel up, crossing each barrier at most once, through a
// bridge.
//
// A flowspace sees only the flowspaces directly beneath it, through their
// stubs (FFPF §3.1). Placement is decentralised the same way (§2.3): a
// query for a function carries a 32-bit path field down the tree through
// the stubs, and bubbles back up to the first flowspace that can run the
// function (Place). No central table knows the whole tree.
//
// The sharp edge: a flowspace never sees the whole flowgraph, only the nodes
// placed in it and, through Node.Inputs, what feeds them. Everything it
// needs to instantiate a node must be in the Node.
package flowspaces

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"

	"github.com/ffpf-go/ffpf/bridges/inproc"

	"github.com/ffpf-go/ffpf/functions"
)

// Kind is the programming model of a flowspace.
type Kind string

const (
	KindUser   Kind = "user"   // Go in the ffpf process: the root
	KindKernel Kind = "kernel" // tc/TCX eBPF in the host kernel
	KindXDP    Kind = "xdp"    // XDP eBPF at one interface's driver
	KindP4     Kind = "p4"     // a P4 switch
	KindTest   Kind = "test"   // a simulated board that runs Go, for hierarchies this machine lacks
)

// Flowspace runs the functions placed in it.
type Flowspace interface {
	// Name identifies the flowspace ("user", "kernel", "xdp:eth0").
	Name() string
	// Kind is its programming model.
	Kind() Kind
	// Target is the kind of class implementation it runs.
	Target() functions.Target

	// Level is the depth in the hierarchy: 0 at the root.
	Level() int
	// Parent is the flowspace above, nil at the root.
	Parent() Flowspace
	// Children are the stubs of the flowspaces directly beneath.
	Children() []*Stub

	// Host says why n cannot run here (no implementation of its class for
	// this target, a filter the target cannot express…), or nil if it can.
	Host(n *Node) error
	// Entry says whether packets of the network interface enter the
	// hierarchy here, so that a capture source can run here.
	Entry(iface string) Entry
	// Stores reports whether the flowspace keeps packets in PBufs; one that
	// does not (an eBPF hook) processes them in place and must hand them up
	// at once.
	Stores() bool

	// Instantiate creates n's function (or source) and buffers; nothing
	// runs until Connect puts it in the datapath. An error that wraps
	// ErrPlaceAgain says that what placement found here is gone (another
	// program took a hook since): the flowgraph places n again.
	Instantiate(n *Node) error
	// Remove takes n out of the datapath at the next Connect, which then
	// releases it.
	Remove(n *Node)
	// Connect (re)builds the datapath from the nodes instantiated here and
	// the outputs the parent asked for (through this flowspace's stub). On
	// an active flowspace the change takes effect between two batches, so
	// the functions that stay lose nothing. The flowgraph connects parents
	// before children.
	Connect() error
	// Activate starts the datapath; it returns at once.
	Activate(ctx context.Context) error
	// Wait blocks until every source here has ended (or the context given
	// to Activate is done) and returns the sources' errors.
	Wait() error
	// Stop ends the datapath (sources stop after the batch at hand) and
	// waits for it; state stays readable until Close.
	Stop()
	// Close releases everything; the first error of a function's Close is
	// returned (a sink that failed to write, say).
	Close() error

	position() *Position
}

// Receiver is a flowspace that receives packets from the flowspaces
// beneath through in-process bridges, which it builds at Connect.
type Receiver interface {
	Flowspace
	// Bridges returns the bridges from the flowspaces beneath, by the
	// child's name.
	Bridges() map[string]*inproc.Bridge
}

// ErrPlaceAgain is wrapped by the error of an Instantiate that finds gone
// what Host found at placement: the flowgraph places the node again, and
// Host then refuses it with the reason.
var ErrPlaceAgain = errors.New("placed again")

// Entry is how packets of an interface enter the hierarchy at a
// flowspace.
type Entry int

const (
	NoEntry  Entry = iota // they do not
	AnyEntry              // it can capture any interface (userspace, the tc hook)
	OwnEntry              // the interface is its own (an XDP program's, a board's port)
)

// Node is one function placed in a flowspace.
type Node struct {
	ID     string
	Class  *functions.Class
	Ctx    functions.Context // parameters, link type, snap length
	Inputs []*Node           // the nodes that feed it (none for a source)
	// Reads are the functions whose state it reads by their labels
	// (named state): they run before it, in its flowspace (rule 4).
	Reads    []*Node
	Counters functions.Counters

	// Budget is the packet limit of the stream a source starts when its
	// request has one of its own (ffpf submit -c: see Budget); nil for
	// the run's (Limited.SetBudget), or none. Set by the flowgraph.
	Budget *Budget

	// Set by placement.
	Flowspace Flowspace
	Path      Path // the route from the root to Flowspace (FFPF §2.3)

	// Set by the flowspace at instantiation.
	Function functions.Function
	Source   functions.Source

	// streamEnded is set once a source's stream has ended in the last
	// flowspace on its way up (EndStream).
	streamEnded atomic.Bool
}

// EndStream records that the stream of source n has ended in the highest
// flowspace it reaches: its last packets are processed there, and the
// functions no other stream reaches are flushed. The flowspace that runs
// the source tells a service so (Ender) only then.
func (n *Node) EndStream() { n.streamEnded.Store(true) }

// StreamEnded reports whether EndStream was called.
func (n *Node) StreamEnded() bool { return n.streamEnded.Load() }

// Producer reports whether the node outputs records it writes rather than
// the packets it receives: its dependents are reached by its own stream.
func (n *Node) Producer() bool { return n.Class.IsProducer(n.Ctx.Params) }

// Concurrency is how a flowspace runs n when several workers reach it
// (DESIGN.md §15): its class's kind for its parameters
// (functions.Class.ConcurrencyOf), or ordered, with the reason, when n
// emits records (in time order), reads the state of another function by
// its label, or is read so by one of nodes: a reader needs the one state
// as the writer left it after each packet.
func (n *Node) Concurrency(nodes []*Node) (functions.Concurrency, string) {
	k, why := n.Class.ConcurrencyOf(n.Ctx.Params)
	if k == functions.Ordered {
		return k, why
	}
	switch {
	case n.Producer():
		return functions.Ordered, "it emits records, in time order"
	case len(n.Reads) > 0:
		return functions.Ordered, "it reads the state of " + n.Reads[0].ID + " after each packet"
	}
	if k != functions.Mergeable {
		return k, "" // a stateless function has no state to read: its readers read the packets' annotations
	}
	for _, r := range nodes {
		if slices.Contains(r.Reads, n) {
			return functions.Ordered, r.ID + " reads its state after each packet"
		}
	}
	return k, ""
}

// Merger is a flowspace that may run a function on several workers at
// once, each on a shard of its state (functions.Mergeable): Merged folds
// the shards into the function itself (n.Function) and runs f while they
// are held still. It reports false, without running f, when n runs as one.
type Merger interface {
	Merged(n *Node, f func()) bool
}

// State returns the node's persistent state decoded from its MBuf, or nil
// when the function keeps none; the shards of a function that several
// workers run are merged first (Merger).
func (n *Node) State() map[string]any {
	if m, ok := n.Flowspace.(Merger); ok {
		var st map[string]any
		if m.Merged(n, func() { st = n.state() }) {
			return st
		}
	}
	return n.state()
}

func (n *Node) state() map[string]any {
	if s, ok := n.Function.(functions.Summarizer); ok {
		return s.Summary()
	}
	if s, ok := n.Function.(functions.Stateful); ok {
		return s.MBuf().Snapshot()
	}
	if s, ok := n.Source.(functions.Stateful); ok {
		return s.MBuf().Snapshot()
	}
	return nil
}

// CheckState reports whether the node's function (or source), as its
// flowspace instantiated it, keeps the state its class declares for the
// flowspace's target (see functions.Class.CheckState).
func (n *Node) CheckState() error {
	var x any = n.Function
	if n.Class.IsSource() {
		x = n.Source
	}
	return n.Class.CheckState(n.Flowspace.Target(), n.Ctx.Params, x)
}

// Locker is a flowspace that can hold a function still between two
// batches: Lock returns once the function's lock, the one Process runs
// under, is held, and the function to release it. Handlers run so.
type Locker interface {
	Lock(n *Node) (unlock func())
}

// Ender is a flowspace that tells when one of its sources has ended (a
// file read to its end, a generator done): a service reports a request
// whose sources have all ended as ended, with its final state. err is what
// the source reported (a truncated file), nil at a clean end.
type Ender interface {
	SourceEnded(n *Node) (ended bool, err error)
}

// Framer is a flowspace whose packets reach its parent as frames alone
// (a switch's network link or CPU port): the annotation words its
// functions write do not travel up with them, so a function above that
// reads one reads it as state (placement's rule 4 applies).
type Framer interface {
	Flowspace
	FramesOnly() bool
}

// AnnotationsStay reports whether annotations written in fs stay there:
// its packets go up as frames alone.
func AnnotationsStay(fs Flowspace) bool {
	f, ok := fs.(Framer)
	return ok && f.FramesOnly()
}

// Spreader is a flowspace that can spread the packets of one source over
// several workers (DESIGN.md §15): an eBPF flowspace over a ring buffer
// per CPU and its AF_XDP sockets, a Go flowspace over a reader per lane of
// a bridge from beneath. SetWorkers bounds how many (ffpf run --workers;
// 0 is GOMAXPROCS); the flowgraph calls it on every flowspace of a run
// before anything is instantiated.
type Spreader interface {
	Flowspace
	SetWorkers(n int)
}
