package flowgraph

import (
	"context"
	"errors"
	"fmt"
	"github.com/ffpf-go/ffpf/buffers"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/user"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/lang"
)

// DefaultSnaplen is the most bytes of a packet a PBuf slot keeps, as in
// tcpdump.
const DefaultSnaplen = 262144

// Config configures a Runtime.
type Config struct {
	Registry *functions.Registry // nil: functions.Default
	Snaplen  int                 // 0: DefaultSnaplen
	// Limit stops the run once this many packets have reached the ends of
	// the flowgraph, each once (ffpf run -c; see flowspaces.Budget); 0:
	// no limit. CaptureLimit stops it once the sources have captured this
	// many (ffpf run --capture-count). At most one of them is set.
	Limit        int64
	CaptureLimit int64
	// Hierarchy is the root of the flowspace tree the functions are placed
	// in (see flowspaces/hierarchy); nil is userspace alone.
	Hierarchy flowspaces.Flowspace
	// Workers bounds how many workers one source spreads over (a live
	// interface's ring buffers and receive queues; flowspaces.Spreader);
	// 0 is GOMAXPROCS.
	Workers int
}

// RequestOptions configure one request.
type RequestOptions struct {
	// DefaultSource is a source term, e.g. `(pcap,file="trace.pcap")`,
	// that feeds every chain starting with a function that is not a source.
	DefaultSource string
	// Unfed accepts chains that start with a non-source when there is no
	// default source, for checking an expression without running it.
	Unfed bool
	// Group is the request's flowgroup (see Flowgroup): functions, and so
	// the PBufs of sources, are shared only by requests of one group, and
	// a request can read the state of its group's functions only.
	Group string
	// Limit is a packet limit of the request's own, counted at its ends
	// (ffpf submit -c; see flowspaces.Budget), CaptureLimit one counted
	// where its sources capture (--capture-count); 0: none. At most one
	// is set, and the runtime has no limit of its own (Config.Limit).
	// Such a request shares no function, not even with an identical
	// request: its sources read from a budget of their own, its ends are
	// its alone, and once the limit is reached its sources end (Ended)
	// and its state is final, while the other requests go on.
	Limit        int64
	CaptureLimit int64
}

type phase int

const (
	populated phase = iota
	instantiated
	active
	closed
)

// Runtime is a flowgraph and the flowspaces it runs in.
type Runtime struct {
	cfg    Config
	root   flowspaces.Flowspace
	budget *flowspaces.Budget // the packet limit, nil for none

	mu       sync.Mutex
	phase    phase
	funcs    []*Function
	byKey    map[string]*Function
	perClass map[string]int
	reqs     []*Request
	annUsed  [buffers.AnnWords]bool // annotation words given to functions
	solos    int                    // requests with a packet limit of their own, so far

	start, end time.Time
	release    func() // ends the activation context (see Activate)
}

// Function is one function of the flowgraph.
type Function struct {
	ID    string
	Label string
	Pos   lang.Pos // where the first request that has it defines it
	// Reason says why placement put it where it is; PassedOver lists the
	// lower flowspaces that could not run it, and why.
	Reason     string
	PassedOver []flowspaces.Refusal

	key   string // identity (see identity)
	group string
	node  *flowspaces.Node
	// floor, when set, is a flowspace placement must not go below: a
	// reader of its state could not run beside it (see raise).
	floor    flowspaces.Path
	hasFloor bool
	floorAnn bool // the reader reads its annotation, written on a switch
	refs     int
	live     bool // instantiated (guarded by Runtime.mu)
	// ready is live for readers that do not hold Runtime.mu (State,
	// Progress): node.Function and node.Source are set before it is.
	ready atomic.Bool
}

// Class returns the function's class.
func (f *Function) Class() *functions.Class { return f.node.Class }

// Request is one populated expression.
type Request struct {
	rt    *Runtime
	Expr  string
	ast   *lang.Request
	bound map[*lang.Func]functions.Params
	funcs []*Function // in topological order
	group string
	// budget is its own packet limit (RequestOptions.Limit), nil for none.
	budget *flowspaces.Budget
}

// New returns an empty runtime.
func New(cfg Config) *Runtime {
	if cfg.Registry == nil {
		cfg.Registry = functions.Default
	}
	if cfg.Snaplen <= 0 {
		cfg.Snaplen = DefaultSnaplen
	}
	root := cfg.Hierarchy
	if root == nil {
		root = user.New(user.Options{})
	}
	rt := &Runtime{byKey: map[string]*Function{}, perClass: map[string]int{}}
	budget := flowspaces.NewBudget(cfg.Limit, flowspaces.AtEnds)
	if cfg.CaptureLimit > 0 {
		budget = flowspaces.NewBudget(cfg.CaptureLimit, flowspaces.AtCapture)
	}
	rt.budget = budget
	flowspaces.Walk(root, func(fs flowspaces.Flowspace) {
		if l, ok := fs.(flowspaces.Limited); ok {
			l.SetBudget(budget)
		}
		if s, ok := fs.(flowspaces.Spreader); ok {
			s.SetWorkers(cfg.Workers)
		}
	})
	rt.cfg, rt.root = cfg, root
	return rt
}

// Hierarchy returns the root of the flowspace tree.
func (rt *Runtime) Hierarchy() flowspaces.Flowspace { return rt.root }

// Populate parses and validates expr, binds its parameters and overlays it
// on the flowgraph. It has no side effects beyond the flowgraph: nothing is
// opened or allocated until Instantiate.
func (rt *Runtime) Populate(expr string, opts RequestOptions) (*Request, error) {
	ast, err := lang.Parse(expr)
	if err != nil {
		return nil, err
	}
	if err := lang.Check(ast, rt.cfg.Registry); err != nil {
		return nil, err
	}
	b := &builder{src: expr, reg: rt.cfg.Registry, memo: map[lang.Term]ports{},
		labels: map[string]lang.Term{}, active: map[lang.Term]bool{}, bound: map[*lang.Func]functions.Params{},
		unfed: opts.Unfed && opts.DefaultSource == ""}
	b.collectLabels(ast.Chains)
	for _, c := range ast.Chains {
		if _, err := b.chain(c); err != nil {
			return nil, err
		}
	}
	if err := b.resolveReads(); err != nil {
		return nil, err
	}
	if err := rt.feed(b, opts); err != nil {
		return nil, err
	}
	order, err := b.checkGraph()
	if err != nil {
		return nil, err
	}
	if err := b.linkTypes(order, rt.cfg.Snaplen); err != nil {
		return nil, err
	}
	budget, err := rt.ownBudget(opts)
	if err != nil {
		return nil, err
	}
	return rt.overlay(expr, ast, b.bound, order, opts.Group, budget)
}

// ownBudget returns the budget of a request's own packet limit, nil for
// none.
func (rt *Runtime) ownBudget(opts RequestOptions) (*flowspaces.Budget, error) {
	switch {
	case opts.Limit == 0 && opts.CaptureLimit == 0:
		return nil, nil
	case opts.Limit < 0 || opts.CaptureLimit < 0 || opts.Limit > flowspaces.MaxLimit || opts.CaptureLimit > flowspaces.MaxLimit:
		return nil, &InvalidError{fmt.Sprintf("a packet limit is a number of packets from 1 to %d", flowspaces.MaxLimit)}
	case opts.Limit > 0 && opts.CaptureLimit > 0:
		return nil, &InvalidError{"a request counts its packet limit at its ends or at capture, not both"}
	case rt.budget != nil:
		return nil, &InvalidError{"a request cannot have a packet limit of its own in a run that has one"}
	case opts.Limit > 0:
		return flowspaces.NewBudget(opts.Limit, flowspaces.AtEnds), nil
	}
	return flowspaces.NewBudget(opts.CaptureLimit, flowspaces.AtCapture), nil
}

// overlay adds the request's nodes (in topological order) to the
// flowgraph, sharing every function that is already there, and places the
// new ones. It is all or nothing: a function that cannot be placed, or a
// file clash, leaves the flowgraph as it was. A request with a packet
// limit of its own (budget) shares nothing: its functions' identities are
// its own, and its sources read from budget.
func (rt *Runtime) overlay(expr string, ast *lang.Request, bound map[*lang.Func]functions.Params, order []*lnode, group string, budget *flowspaces.Budget) (req *Request, err error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.phase == closed {
		return nil, &InvalidError{"the flowgraph is closed"}
	}
	solo := ""
	if budget != nil {
		rt.solos++
		solo = fmt.Sprintf("limited request %d", rt.solos)
	}
	// A dry run first: what would be added, does it clash with the graph,
	// and where would it run?
	perClass := maps.Clone(rt.perClass)
	annUsed := rt.annUsed
	var added []*Function
	fresh := map[string]*Function{}
	defer func() {
		if err != nil {
			// Nothing of the request stays placed: a flowspace's state
			// budget counts only the functions placed in it.
			for _, f := range fresh {
				f.node.Flowspace = nil
			}
		}
	}()
	for _, n := range order {
		if n.fn != nil { // an existing function a sink is attached to
			continue
		}
		n.key = identity(n, group, solo)
		if f := rt.byKey[n.key]; f != nil {
			n.fn = f
			continue
		}
		if f := fresh[n.key]; f != nil {
			n.fn = f
			continue
		}
		perClass[n.class.Name]++
		id := fmt.Sprintf("%s#%d", n.class.Name, perClass[n.class.Name])
		f := &Function{key: n.key, group: group, ID: id, Label: n.label, Pos: n.pos,
			node: &flowspaces.Node{ID: id, Class: n.class, Ctx: functions.Context{
				ID: id, Params: n.params, LinkType: n.inLT, Snaplen: rt.cfg.Snaplen, Captures: n.caps,
			}}}
		if n.class.IsProducer(n.params) {
			f.node.Ctx.Output = n.lt
		}
		if n.class.IsSource() {
			f.node.Budget = budget
		}
		for _, in := range n.inputs {
			f.node.Inputs = append(f.node.Inputs, in.fn.node)
		}
		if k := n.class.Annotates; k > 0 {
			at := freeWords(&annUsed, k)
			if at < 0 {
				return nil, &lang.Error{Pos: n.pos, Src: expr, Msg: fmt.Sprintf(
					"%s writes %d annotation word(s), but the %d words of a packet's annotation area are taken by other functions",
					n.name(), k, buffers.AnnWords)}
			}
			f.node.Ctx.Ann = at
		}
		if len(n.reads) > 0 {
			byLabel := map[string]*flowspaces.Node{}
			for _, w := range n.reads {
				f.node.Reads = append(f.node.Reads, w.fn.node)
				byLabel[w.label] = w.fn.node
			}
			f.node.Ctx.StateOf = func(label string) (functions.Function, bool) {
				w := byLabel[label]
				if w == nil || w.Function == nil {
					return nil, false
				}
				return w.Function, true
			}
		}
		if err := rt.placeRaising(f, added); err != nil {
			return nil, &lang.Error{Pos: n.pos, Msg: err.Error(), Src: expr}
		}
		fresh[n.key] = f
		n.fn = f
		added = append(added, f)
	}
	var have, add []fileUse
	for _, f := range rt.funcs {
		have = append(have, filesOf(f.ID, f.node.Ctx.Params)...)
	}
	for _, f := range added {
		add = append(add, filesOf(f.ID, f.node.Ctx.Params)...)
	}
	if err := checkFiles(have, add); err != nil {
		return nil, err
	}

	rt.perClass = perClass
	rt.annUsed = annUsed
	for _, f := range added {
		rt.byKey[f.key] = f
		rt.funcs = append(rt.funcs, f)
	}
	req = &Request{rt: rt, Expr: expr, ast: ast, bound: bound, group: group, budget: budget}
	for _, n := range order {
		f := n.fn
		if !slices.Contains(req.funcs, f) {
			f.refs++
			req.funcs = append(req.funcs, f)
		}
	}
	rt.reqs = append(rt.reqs, req)
	return req, nil
}

// feed gives every function without inputs that is not a source the
// request's default source.
func (rt *Runtime) feed(b *builder, opts RequestOptions) error {
	var src *lnode
	for _, n := range append([]*lnode(nil), b.nodes...) {
		if len(n.inputs) > 0 || n.class.IsSource() {
			continue
		}
		if opts.DefaultSource == "" {
			if opts.Unfed {
				continue
			}
			return b.errorf(n.pos, "%s has no input: start the chain with a source such as (pcap,file=F), or give one with -r FILE or -i IFACE", n.class.Name)
		}
		if src == nil {
			var err error
			if src, err = rt.defaultSource(b, opts.DefaultSource); err != nil {
				return err
			}
		}
		n.inputs = append(n.inputs, src)
	}
	return nil
}

func (rt *Runtime) defaultSource(b *builder, expr string) (*lnode, error) {
	n, err := rt.singleFunc(&builder{src: expr, reg: b.reg, bound: map[*lang.Func]functions.Params{}}, expr)
	if err != nil {
		return nil, err
	}
	if !n.class.IsSource() {
		return nil, &InvalidError{fmt.Sprintf("default source %s: class %s is not a source", expr, n.class.Name)}
	}
	b.nodes = append(b.nodes, n)
	return n, nil
}

// singleFunc parses expr, which must be one function term, into an lnode.
func (rt *Runtime) singleFunc(b *builder, expr string) (*lnode, error) {
	ast, err := lang.Parse(expr)
	if err == nil {
		err = lang.Check(ast, rt.cfg.Registry)
	}
	if err != nil {
		return nil, &InvalidError{fmt.Sprintf("%s: %v", expr, err)}
	}
	f, ok := ast.Chains[0].Terms[0].(*lang.Func)
	if len(ast.Chains) != 1 || len(ast.Chains[0].Terms) != 1 || !ok {
		return nil, &InvalidError{fmt.Sprintf("%s is not a single function", expr)}
	}
	n, err := b.fn(f)
	if err != nil {
		return nil, &InvalidError{fmt.Sprintf("%s: %v", expr, err)}
	}
	return n, nil
}

// Instantiate creates every function, buffer and bridge of the flowgraph
// that does not exist yet and connects them: on a running flowgraph, the
// new functions join the datapath between two batches and the running ones
// keep counting. It is all or nothing: on error, what it created is
// released and the flowgraph runs on as before.
func (rt *Runtime) Instantiate() error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.phase == closed {
		return errors.New("flowgraph: Instantiate after Close")
	}
	if len(rt.funcs) == 0 {
		return &InvalidError{"nothing to instantiate: populate a request first"}
	}
	if rt.phase == populated {
		rt.keepOrder()
	}
	var done []*Function
	var err error
	again := 0
	for _, f := range rt.funcs {
		if f.live {
			continue
		}
		err = f.node.Flowspace.Instantiate(f.node)
		for err != nil && errors.Is(err, flowspaces.ErrPlaceAgain) && again < maxPlaceAgain {
			// What placement found is gone (another capture took the XDP
			// hook since): place f again, and what depends on it.
			again++
			if err = rt.placeAgain(f); err == nil {
				err = f.node.Flowspace.Instantiate(f.node)
			}
		}
		if err != nil {
			err = fmt.Errorf("%s: %w", f.ID, err)
			break
		}
		done = append(done, f)
		if err = f.node.CheckState(); err != nil {
			err = fmt.Errorf("%s: %w", f.ID, err)
			break
		}
		f.live = true
		f.ready.Store(true)
	}
	if err == nil {
		err = rt.connect()
		if err == nil {
			if rt.phase == populated {
				rt.phase = instantiated
			}
			return nil
		}
	}
	// Undo: take out and release what this call created.
	for _, f := range done {
		f.node.Flowspace.Remove(f.node)
		f.live = false
		f.ready.Store(false)
	}
	return errors.Join(err, rt.connect())
}

// keepOrder keeps one lane for the captures whose packets reach an
// ordered function (DESIGN.md §15): its result depends on the order the
// packets arrive in (export writes them in it, Trumpet's epochs and a
// producer's records follow it), and the lanes of one interface (a ring
// buffer per CPU, an AF_XDP socket per queue) keep each lane's order but
// not the interface's. The eBPF flowspace that captures such a source is
// told to spread over one worker before it makes its rings. A request
// overlaid on a running flowgraph finds the lanes as they were made.
func (rt *Runtime) keepOrder() {
	nodes := make([]*flowspaces.Node, len(rt.funcs))
	for i, f := range rt.funcs {
		nodes[i] = f.node
	}
	seen := map[*flowspaces.Node]bool{}
	var up func(n *flowspaces.Node)
	up = func(n *flowspaces.Node) {
		if seen[n] {
			return
		}
		seen[n] = true
		if n.Class.IsSource() {
			for fs := n.Flowspace; fs != nil && fs.Target() != functions.TargetUser; fs = fs.Parent() {
				if s, ok := fs.(flowspaces.Spreader); ok {
					s.SetWorkers(1)
				}
			}
		}
		for _, in := range n.Inputs {
			up(in)
		}
	}
	for _, n := range nodes {
		if n.Class.IsSource() {
			continue
		}
		if k, _ := n.Concurrency(nodes); k == functions.Ordered {
			up(n)
		}
	}
}

// maxPlaceAgain bounds how often one Instantiate places functions again
// (hooks taken by other programs meanwhile, one after the other).
const maxPlaceAgain = 8

// placeAgain places f again, and every function not yet instantiated that
// depends on it, in order: Instantiate found gone what placement found
// where f was placed. rt.mu is held.
func (rt *Runtime) placeAgain(f *Function) error {
	moved := map[*flowspaces.Node]bool{f.node: true}
	isMoved := func(n *flowspaces.Node) bool { return moved[n] }
	for _, g := range rt.funcs { // inputs before the functions they feed
		after := slices.ContainsFunc(g.node.Inputs, isMoved) || slices.ContainsFunc(g.node.Reads, isMoved)
		if g != f && (g.live || !after) {
			continue
		}
		if err := rt.place(g); err != nil {
			return err
		}
		moved[g.node] = true
	}
	return nil
}

// connect rebuilds the datapath of every flowspace, parents first: a
// parent asks its children, through their stubs, for the outputs it needs
// before they connect. It stops at the first flowspace that fails.
func (rt *Runtime) connect() error {
	for _, fs := range rt.all() {
		if err := fs.Connect(); err != nil {
			return fmt.Errorf("flowspace %s: %w", fs.Name(), err)
		}
	}
	return nil
}

// all returns every flowspace, parents first.
func (rt *Runtime) all() []flowspaces.Flowspace {
	var out []flowspaces.Flowspace
	flowspaces.Walk(rt.root, func(fs flowspaces.Flowspace) { out = append(out, fs) })
	return out
}

// Remove takes the request out of the flowgraph: the functions no other
// request uses leave the datapath (between two batches, on a running
// flowgraph) and are released; shared ones stay, with their counts intact.
func (rt *Runtime) Remove(req *Request) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	i := slices.Index(rt.reqs, req)
	if i < 0 {
		return errors.New("flowgraph: the request is not in this flowgraph")
	}
	rt.reqs = slices.Delete(rt.reqs, i, i+1)
	var gone []*Function
	for _, f := range req.funcs {
		if f.refs--; f.refs == 0 {
			gone = append(gone, f)
		}
	}
	for _, f := range gone {
		for i := range f.node.Class.Annotates {
			rt.annUsed[f.node.Ctx.Ann+i] = false
		}
		delete(rt.byKey, f.key)
		rt.funcs = slices.DeleteFunc(rt.funcs, func(g *Function) bool { return g == f })
		if f.live {
			f.node.Flowspace.Remove(f.node)
		}
	}
	if rt.phase == populated {
		return nil
	}
	return rt.connect()
}

// Activate starts the datapath. It returns at once; Wait waits for the
// sources to end. Cancelling ctx stops them.
//
// The flowspaces are activated children first, and they see ctx's
// cancellation only once all of them are active: a flowspace beneath may
// have started sending up (the reader of an eBPF flowspace's ring buffer
// sends what it read before it stops), and only the flowspace above,
// once active, reads its bridge until it is closed. Cancelled in between
// (^C during set-up), the one beneath would wait for ever. For the same
// reason a flowspace that fails to activate does not keep those above
// from being activated; then the run is cancelled and the errors returned.
func (rt *Runtime) Activate(ctx context.Context) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.phase != instantiated {
		return errors.New("flowgraph: Activate needs an instantiated, inactive flowgraph")
	}
	rt.start = time.Now()
	rt.phase = active
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	fss := rt.all()
	var errs []error
	for i := len(fss) - 1; i >= 0; i-- {
		if err := fss[i].Activate(actx); err != nil {
			errs = append(errs, fmt.Errorf("flowspace %s: %w", fss[i].Name(), err))
		}
	}
	stop := context.AfterFunc(ctx, cancel)
	rt.release = func() { stop(); cancel() }
	if len(errs) > 0 {
		cancel()
		return errors.Join(errs...)
	}
	return nil
}

// Wait blocks until every source has ended or the activation context is
// done, and returns what the sources reported (a truncated file, say).
func (rt *Runtime) Wait() error {
	rt.mu.Lock()
	if rt.phase < active {
		rt.mu.Unlock()
		return errors.New("flowgraph: Wait before Activate")
	}
	rt.mu.Unlock()
	var errs []error
	for _, fs := range rt.all() {
		errs = append(errs, fs.Wait())
	}
	rt.mu.Lock()
	rt.end = time.Now()
	rt.mu.Unlock()
	return errors.Join(errs...)
}

// Stop ends the datapath: every source stops after the batch at hand. The
// functions' state stays readable until Close.
func (rt *Runtime) Stop() {
	rt.mu.Lock() // not while requests are instantiated or removed
	defer rt.mu.Unlock()
	if rt.phase != active {
		return
	}
	rt.stopAll()
	if rt.end.IsZero() && !rt.start.IsZero() {
		rt.end = time.Now()
	}
}

// stopAll stops the flowspaces children first, so that what is in flight
// upwards is counted where it stops.
func (rt *Runtime) stopAll() {
	fss := rt.all()
	for i := len(fss) - 1; i >= 0; i-- {
		fss[i].Stop()
	}
}

// Close stops the datapath and releases everything. It returns the first
// error a function reported on release (a sink that could not write).
func (rt *Runtime) Close() error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.phase == closed {
		return nil
	}
	was := rt.phase
	rt.phase = closed
	if was == populated {
		return nil
	}
	if rt.end.IsZero() {
		rt.end = time.Now()
	}
	rt.stopAll()
	if rt.release != nil {
		rt.release()
	}
	var errs []error
	fss := rt.all()
	for i := len(fss) - 1; i >= 0; i-- {
		errs = append(errs, fss[i].Close())
	}
	return errors.Join(errs...)
}

// Elapsed is the time from activation to the end of the sources (or now).
func (rt *Runtime) Elapsed() time.Duration {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	switch {
	case rt.start.IsZero():
		return 0
	case rt.end.IsZero():
		return time.Since(rt.start)
	}
	return rt.end.Sub(rt.start)
}

// Packets returns how many packets the sources brought into the graph.
func (rt *Runtime) Packets() uint64 {
	var n uint64
	for _, f := range rt.snapshotFuncs() {
		if f.node.Class.IsSource() {
			n += f.node.Counters.Out.Load()
		}
	}
	return n
}

// Progress estimates how far the run is, from 0 to 1: how far through
// their input the sources are (a file's bytes, gen's packets; the mean over
// sources), or how much of the packet limit is counted, whichever is further.
// known is false when neither can be told (a live interface, no limit).
func (rt *Runtime) Progress() (frac float64, known bool) {
	sum, n, all := 0.0, 0, true
	for _, f := range rt.snapshotFuncs() {
		if !f.node.Class.IsSource() {
			continue
		}
		if !f.ready.Load() {
			all = false
			continue
		}
		p, ok := f.node.Source.(functions.Progresser)
		if !ok {
			all = false
			continue
		}
		if d, t := p.Progress(); t > 0 {
			sum += min(float64(d)/float64(t), 1)
			n++
		} else {
			all = false
		}
	}
	if all && n > 0 {
		frac, known = sum/float64(n), true
	}
	if l := rt.budget.Limit(); l > 0 {
		frac, known = max(frac, min(float64(rt.budget.Counted())/float64(l), 1)), true
	}
	return frac, known
}

func (rt *Runtime) snapshotFuncs() []*Function {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return append([]*Function(nil), rt.funcs...)
}

// Requests returns the populated requests.
func (rt *Runtime) Requests() []*Request {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return append([]*Request(nil), rt.reqs...)
}

// Functions returns the state of every function of the flowgraph, in the
// order they were created (inputs before the functions they feed).
func (rt *Runtime) Functions() []FunctionState {
	fs := rt.snapshotFuncs()
	out := make([]FunctionState, len(fs))
	for i, f := range fs {
		out[i] = f.State()
	}
	return out
}

// Functions returns the state of the request's functions, shared ones
// included.
func (r *Request) Functions() []FunctionState {
	out := make([]FunctionState, len(r.funcs))
	for i, f := range r.funcs {
		out[i] = f.State()
	}
	return out
}

// FunctionState is a function's identity, counters and state, as the CLI
// prints them.
type FunctionState struct {
	ID        string         `json:"id"`
	Label     string         `json:"label"`
	Class     string         `json:"class"`
	Flowspace string         `json:"flowspace"`
	Params    map[string]any `json:"params"`
	In        uint64         `json:"in"`
	Out       uint64         `json:"out"`
	Filtered  uint64         `json:"filtered"`
	Dropped   uint64         `json:"dropped"`
	// Records is how many records a producer emitted (its output is
	// records, not the packets it received: those are all filtered).
	Records uint64         `json:"records,omitempty"`
	State   map[string]any `json:"state"`
}

// State reads the function's counters and state.
func (f *Function) State() FunctionState {
	n := f.node
	s := FunctionState{ID: f.ID, Label: f.Label, Class: n.Class.Name, Flowspace: n.Ctx.Flowspace,
		Params: map[string]any{}, State: map[string]any{}}
	if s.Flowspace == "" {
		s.Flowspace = "user"
	}
	n.Ctx.Params.Each(func(name string, v functions.Value) { s.Params[name] = v.JSON() })
	s.In, s.Out, s.Filtered, s.Dropped = n.Counters.Snapshot()
	if p, ok := n.Function.(functions.Producer); ok && f.ready.Load() {
		s.Records = p.Records()
	}
	if f.ready.Load() && (n.Function != nil || n.Source != nil) {
		if st := n.State(); st != nil {
			s.State = st
		}
	}
	return s
}

// Canonical returns the request in canonical form: classes in lower case,
// every argument as key=value, parameters at their default left out.
// Parsing it gives the same flowgraph.
func (r *Request) Canonical() string {
	if r.ast == nil {
		return r.Expr
	}
	return lang.Format(&lang.Request{Chains: r.canonChains(r.ast.Chains)})
}

func (r *Request) canonChains(cs []*lang.Chain) []*lang.Chain {
	out := make([]*lang.Chain, len(cs))
	for i, c := range cs {
		nc := &lang.Chain{Terms: make([]lang.Term, len(c.Terms))}
		for j, t := range c.Terms {
			switch t := t.(type) {
			case *lang.Func:
				nc.Terms[j] = &lang.Func{Label: t.Label, Class: strings.ToLower(t.Class), Args: canonArgs(r.bound[t])}
			case *lang.Group:
				nc.Terms[j] = &lang.Group{Label: t.Label, Chains: r.canonChains(t.Chains)}
			default:
				nc.Terms[j] = t
			}
		}
		out[i] = nc
	}
	return out
}

func canonArgs(p functions.Params) []*lang.Arg {
	var args []*lang.Arg
	c := p.Class()
	p.Each(func(name string, v functions.Value) {
		par, _ := c.Param(name)
		if d, ok := par.DefaultValue(); ok && d.String() == v.String() {
			return
		}
		args = append(args, &lang.Arg{Key: name, Value: canonValue(v)})
	})
	return args
}

func canonValue(v functions.Value) lang.Value {
	s := v.String()
	switch v.Type {
	case functions.Int, functions.Size, functions.Duration, functions.Float:
		i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' && r != '-' })
		if i < 0 {
			i = len(s)
		}
		return lang.Value{Kind: lang.Number, Text: s[:i], Unit: s[i:]}
	case functions.String:
		return lang.Value{Kind: lang.Word, Text: s}
	}
	return lang.Value{Kind: lang.Word, Text: s}
}

// AttachSink adds the function term expr (e.g. `(export,file="out.pcap")`)
// fed by every end of the flowgraph: each function that feeds no other.
// Because a join sees each packet once, the sink gets every packet that
// reaches an end exactly once. Call it after the requests are populated.
func (rt *Runtime) AttachSink(expr string) (*Request, error) {
	rt.mu.Lock()
	funcs := append([]*Function(nil), rt.funcs...)
	rt.mu.Unlock()
	return rt.attachSink(expr, funcs)
}

// AttachSink adds the function term expr fed by every end of the request:
// each of its functions that feeds no other of its functions. The sink is
// a request of its own, in the request's flowgroup (shared, as any
// function, with an identical sink of an identical request); removing it
// is the caller's. A service attaches one so that an application reads
// what the request exports.
func (r *Request) AttachSink(expr string) (*Request, error) {
	return r.rt.attachSink(expr, r.funcs)
}

// attachSink adds the sink expr fed by the ends of funcs.
func (rt *Runtime) attachSink(expr string, funcs []*Function) (*Request, error) {
	rt.mu.Lock()
	fed := map[*flowspaces.Node]bool{}
	for _, f := range funcs {
		for _, in := range f.node.Inputs {
			fed[in] = true
		}
	}
	b := &builder{src: expr, reg: rt.cfg.Registry, bound: map[*lang.Func]functions.Params{}}
	var ends []*lnode
	for _, f := range funcs {
		if !fed[f.node] {
			lt := f.node.Ctx.LinkType
			if f.node.Producer() {
				lt = f.node.Ctx.Output
			}
			ends = append(ends, &lnode{class: f.node.Class, fn: f, lt: lt, caps: f.node.Ctx.Captures, key: f.key})
		}
	}
	rt.mu.Unlock()
	if len(ends) == 0 {
		return nil, &InvalidError{"no flowgraph to attach " + expr + " to"}
	}
	sink, err := rt.singleFunc(b, expr)
	if err != nil {
		return nil, err
	}
	if sink.class.IsSource() {
		return nil, &InvalidError{fmt.Sprintf("%s is a source, not a sink", expr)}
	}
	sink.inputs = ends
	if err := b.linkTypes([]*lnode{sink}, rt.cfg.Snaplen); err != nil {
		return nil, err
	}
	return rt.overlay(expr, nil, b.bound, []*lnode{sink}, ends[0].fn.group, nil)
}

// Budget returns the request's own packet limit (RequestOptions.Limit or
// CaptureLimit): how many packets it counts, where, and how many it has
// counted. nil for none.
func (r *Request) Budget() *flowspaces.Budget { return r.budget }

// Ended reports whether every source of the request has ended (files read
// to their ends, generators done, its own packet limit reached) and what
// reached them is flushed: its state is final. A source in a flowspace that does not tell
// (flowspaces.Ender), a live capture, never ends. err joins what the
// sources reported. A request without a source of its own (a sink
// attached to another) reports false.
func (r *Request) Ended() (ended bool, err error) {
	var errs []error
	n := 0
	for _, f := range r.funcs {
		if !f.node.Class.IsSource() {
			continue
		}
		n++
		if !f.ready.Load() {
			return false, nil
		}
		e, ok := f.node.Flowspace.(flowspaces.Ender)
		if !ok {
			return false, nil
		}
		done, err := e.SourceEnded(f.node)
		if !done {
			return false, nil
		}
		errs = append(errs, err)
	}
	return n > 0, errors.Join(errs...)
}

// freeWords takes k consecutive free annotation words and returns the
// first, or -1.
func freeWords(used *[buffers.AnnWords]bool, k int) int {
	for at := 0; at+k <= len(used); at++ {
		ok := true
		for i := at; i < at+k; i++ {
			ok = ok && !used[i]
		}
		if ok {
			for i := at; i < at+k; i++ {
				used[i] = true
			}
			return at
		}
	}
	return -1
}
