package functions

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/ffpf-go/ffpf/functions/ebpfgen"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// Target is a kind of flowspace a class has an implementation for.
type Target string

const (
	TargetUser   Target = "user"   // Go, in the ffpf process
	TargetKernel Target = "kernel" // tc eBPF
	TargetXDP    Target = "xdp"    // XDP eBPF at the driver
	TargetP4     Target = "p4"     // a P4 switch
)

// Class is a function class: what an expression names in "(class,...)".
type Class struct {
	Name    string // lower case
	Summary string // one line, for 'ffpf classes'
	Params  []Param
	// State declares the state a function of the class keeps (its MBuf's
	// layout), nil for none; the flowgraph checks each function against it.
	State *State
	// Concurrency says how one function of the class may run on several
	// workers at once (stateless, mergeable); the zero value is Ordered,
	// one lock. OrderedWhen lists the parameter settings under which a
	// function runs ordered all the same (ConcurrencyOf).
	Concurrency Concurrency
	OrderedWhen []Ordering
	// MinInputs and MaxInputs bound how many functions may feed this one;
	// both are 0 for a source, MaxInputs < 0 means no limit.
	MinInputs, MaxInputs int
	// Targets are the kinds of flowspace it has an implementation for;
	// none means userspace only.
	Targets []Target
	// Runs, when set, says whether a function with these parameters can
	// run in a flowspace of target t (one of Targets): an error is the
	// reason placement passes over that flowspace.
	Runs func(t Target, p Params) error

	// Validate, when set, checks a function at populate time, once the link
	// type of its input is known (a filter compiles its expression here), so
	// that a bad request fails before anything is instantiated.
	Validate func(ctx *Context) error

	// Code, when set, gives a function's code for a target other than
	// user (Go runs through New): one hook for every target kind, so that
	// a new kind of flowspace adds no field here. The value's type is the
	// target's: an ebpfgen.Function for kernel and xdp, a p4gen.Function
	// for p4. EBPFCode and P4Code make a hook from a typed func, Codes
	// joins them into one (Code: Codes(EBPFCode(f), P4Code(g))), and
	// Class.EBPF and Class.P4 read it. An error (a filter the target
	// cannot express) keeps the function out of the flowspaces of that
	// target, with the error as the reason; ErrNoCode says the class has
	// no code for it.
	Code CodeHook

	// Produces, when set, says whether a function with these parameters
	// is a producer: its output is records it writes (link type
	// LinkRecord, or the one its Validate sets), not the packets it
	// receives (see Producer).
	Produces func(p Params) bool
	// TakesRecords says the class accepts ffpf records as input (export,
	// match, Trumpet, DTA); a class that reads packet headers does not,
	// and feeding it a producer's records fails at populate.
	TakesRecords bool

	// Annotates is how many words of each packet's annotation area
	// (buffers.AnnWords) a function of the class writes: the flowgraph
	// gives each such function its own (Context.Ann), so that forked
	// branches never overwrite each other's.
	Annotates int

	// Reads, when set, names the state a function with these parameters
	// reads (named state): "LABEL.NAME" ("nbytes.min" in a predicate reads
	// min of the function labelled nbytes), or a bare LABEL. The flowgraph
	// resolves the labels in the request, checks each NAME against the
	// writer's Readable, orders the writers first and places the reader
	// where the state is (placement rule 4).
	Reads func(p Params) ([]string, error)
	// Readable, when set, lists the names a function of the class with
	// these parameters can be read by (see Readable), so that a reader
	// asking for another fails at populate.
	Readable func(p Params) []string

	// Interface, set for a source that captures from a network interface,
	// names that interface: the source is placed where the interface's
	// packets enter the flowspace hierarchy. Other sources read in
	// userspace on the host.
	Interface func(p Params) string

	// New instantiates a function; NewSource a source. Exactly one is set.
	New       func(ctx *Context) (Function, error)
	NewSource func(ctx *Context) (Source, error)
}

// ErrNoCode is what a Code hook returns for a target it has no code for.
var ErrNoCode = errors.New("no code for this target")

// CodeHook is Class.Code: a function's code for target t.
type CodeHook func(t Target, ctx *Context) (any, error)

// Codes joins the hooks of several target kinds into a class's one Code
// hook: for a target, the first hook that has code for it (does not
// return ErrNoCode) gives it.
func Codes(hooks ...CodeHook) CodeHook {
	return func(t Target, ctx *Context) (any, error) {
		for _, h := range hooks {
			code, err := h(t, ctx)
			if !errors.Is(err, ErrNoCode) {
				return code, err
			}
		}
		return nil, ErrNoCode
	}
}

// P4Code makes a Code hook from a class's P4 code (TargetP4): the
// function lowered to the pipeline IR of a switch.
func P4Code(f func(ctx *Context) (p4gen.Function, error)) CodeHook {
	return func(t Target, ctx *Context) (any, error) {
		if t != TargetP4 {
			return nil, ErrNoCode
		}
		fn, err := f(ctx)
		if err != nil {
			return nil, err
		}
		return fn, nil
	}
}

// P4 returns a function's P4 code, from the class's Code hook.
func (c *Class) P4(ctx *Context) (p4gen.Function, error) {
	code, err := c.code(TargetP4, ctx, "P4")
	if err != nil {
		return nil, err
	}
	fn, ok := code.(p4gen.Function)
	if !ok || fn == nil {
		return nil, fmt.Errorf("class %s gives no P4 code", c.Name)
	}
	return fn, nil
}

// code runs the class's Code hook for t, naming the kind of code in an
// error.
func (c *Class) code(t Target, ctx *Context, kind string) (any, error) {
	if c.Code == nil {
		return nil, fmt.Errorf("class %s has no %s code", c.Name, kind)
	}
	code, err := c.Code(t, ctx)
	if errors.Is(err, ErrNoCode) {
		return nil, fmt.Errorf("class %s has no %s code for %s", c.Name, kind, t)
	}
	return code, err
}

// EBPFCode makes a Code hook from a class's eBPF code, which serves both
// eBPF targets (kernel and xdp).
func EBPFCode(f func(ctx *Context) (ebpfgen.Function, error)) CodeHook {
	return func(t Target, ctx *Context) (any, error) {
		if t != TargetKernel && t != TargetXDP {
			return nil, ErrNoCode
		}
		fn, err := f(ctx)
		if err != nil {
			return nil, err
		}
		return fn, nil
	}
}

// EBPF returns a function's eBPF code for t (kernel or xdp), from the
// class's Code hook.
func (c *Class) EBPF(t Target, ctx *Context) (ebpfgen.Function, error) {
	code, err := c.code(t, ctx, "eBPF")
	if err != nil {
		return nil, err
	}
	fn, ok := code.(ebpfgen.Function)
	if !ok || fn == nil {
		return nil, fmt.Errorf("class %s gives no eBPF code for %s", c.Name, t)
	}
	return fn, nil
}

// IsSource reports whether the class brings packets into the graph.
func (c *Class) IsSource() bool { return c.NewSource != nil }

// Param returns the parameter named name.
func (c *Class) Param(name string) (*Param, bool) {
	for i := range c.Params {
		if c.Params[i].Name == name {
			return &c.Params[i], true
		}
	}
	return nil, false
}

// CanRun reports why a function of the class with parameters p cannot run
// in a flowspace of target t, or nil when it can.
func (c *Class) CanRun(t Target, p Params) error {
	if !c.Supports(t) {
		return nil // the flowspace states this reason itself
	}
	if c.Runs != nil {
		return c.Runs(t, p)
	}
	return nil
}

// Supports reports whether the class has an implementation for t.
func (c *Class) Supports(t Target) bool {
	for _, x := range c.Targets {
		if x == t {
			return true
		}
	}
	return false
}

// Context is what a class gets when it is instantiated.
type Context struct {
	ID        string   // the function's id, for messages
	Params    Params   // bound and validated parameters
	LinkType  LinkType // link type of the packets that reach the function
	Snaplen   int      // most bytes a PBuf slot holds
	Flowspace string   // where it runs
	// Ann is the first of the annotation words the function writes (see
	// Class.Annotates).
	Ann int
	// StateOf returns, from instantiation on, the function labelled label
	// whose state this one reads (see Class.Reads), already instantiated.
	StateOf func(label string) (Function, bool)
	// Output is the link type of a producer's records: the flowgraph
	// presets LinkRecord, and a producer of other frames (DTA's Ethernet
	// reports) sets its own in Validate.
	Output LinkType
	// Target is what the function is instantiated for: the Go function of
	// one placed in an eBPF flowspace only holds the state of the eBPF
	// code (kernel, xdp), of one placed on a switch the state its
	// registers and counters hold (p4); empty is userspace.
	Target Target
	// Memory, when set, gives the memory of the function's state
	// (Context.NewMBuf): a plugin's state lives in memory shared with
	// ffpf, which reads it without asking the plugin.
	Memory func(size int) ([]byte, error)
	// Captures are the distinct captures whose packets reach the function
	// (a source's Validate sets its own; the flowgraph gives a function the
	// union of its inputs'). Empty when checking without a source.
	Captures []Capture
}

// StateTarget is the target whose layout the function's state takes
// (State.NewMBuf): Target, or user when it is empty.
func (ctx *Context) StateTarget() Target {
	if ctx.Target == "" {
		return TargetUser
	}
	return ctx.Target
}

// Capture describes where a stream's packets were captured, as libpcap
// needs to know it to compile a filter the way tcpdump does: for a capture
// file (tcpdump -r) libpcap compiles differently than for a live interface
// (DLT_NULL's address families, the byte order the file was written in,
// "inbound" refused, "ip broadcast" with netmask 0).
type Capture struct {
	// File is set for packets read from a capture file.
	File bool
	// LinkTypeField is the link type as the file's header stores it:
	// the LINKTYPE_ value in the low 16 bits and, above, the FCS length
	// (pcap-savefile(5)); for a live capture, the link type.
	LinkTypeField uint32
	// Swapped is set for a file written in the other byte order than
	// this machine's.
	Swapped bool
	// Snaplen is the file header's snap length (0 when unknown or live).
	Snaplen uint32
	// Direction is, for a live capture, the packets it captures:
	// DirectionIn, DirectionOut or DirectionInOut ("" is unknown, or both).
	// libpcap's inbound and outbound ask it.
	Direction string
}

// Directions of a live capture (tcpdump's -Q).
const (
	DirectionIn    = "in"
	DirectionOut   = "out"
	DirectionInOut = "inout"
)

// LiveCapture is the capture of packets of link type lt from an interface.
func LiveCapture(lt LinkType) Capture { return Capture{LinkTypeField: uint32(lt)} }

// Registry holds function classes by name.
type Registry struct {
	mu      sync.RWMutex
	classes map[string]*Class
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{classes: map[string]*Class{}} }

// Default is the registry the class packages register into.
var Default = NewRegistry()

// Register adds c to the default registry; class packages call it from init.
func Register(c *Class) {
	if err := Default.Register(c); err != nil {
		panic(err)
	}
}

// Register adds a class. The name must be new and the class well formed.
func (r *Registry) Register(c *Class) error {
	if c.Name == "" || c.Name != strings.ToLower(c.Name) {
		return fmt.Errorf("functions: class name %q must be non-empty lower case", c.Name)
	}
	if (c.New == nil) == (c.NewSource == nil) {
		return fmt.Errorf("functions: class %s must set exactly one of New and NewSource", c.Name)
	}
	if c.IsSource() && (c.MinInputs != 0 || c.MaxInputs != 0) {
		return fmt.Errorf("functions: source class %s cannot have inputs", c.Name)
	}
	if len(c.Targets) == 0 {
		c.Targets = []Target{TargetUser}
	}
	if err := c.checkConcurrency(); err != nil {
		return fmt.Errorf("functions: %v", err)
	}
	seen := map[string]bool{}
	for _, p := range c.Params {
		if seen[p.Name] {
			return fmt.Errorf("functions: class %s declares parameter %q twice", c.Name, p.Name)
		}
		seen[p.Name] = true
		if p.Default != "" {
			if _, err := p.parse(literalRaw(p.Default)); err != nil {
				return fmt.Errorf("functions: class %s parameter %s: bad default: %v", c.Name, p.Name, err)
			}
		}
	}
	for _, p := range c.Params {
		if p.With != "" && (!seen[p.With] || p.With == p.Name) {
			return fmt.Errorf("functions: class %s parameter %s has an effect with %q, which it does not declare", c.Name, p.Name, p.With)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.classes[c.Name]; dup {
		return fmt.Errorf("functions: class %s registered twice", c.Name)
	}
	r.classes[c.Name] = c
	return nil
}

// Remove takes the class named name out of the registry (a plugin's, when
// its process stops).
func (r *Registry) Remove(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.classes, strings.ToLower(name))
}

// With returns a registry of r's classes in which cs take the place of
// the classes of their names, or join them. Only cs are checked: r's were
// when they were registered, and a run that binds two classes to its
// streams (the CLI) need not check every class again.
func (r *Registry) With(cs ...*Class) (*Registry, error) {
	out := NewRegistry()
	r.mu.RLock()
	for name, c := range r.classes {
		out.classes[name] = c
	}
	r.mu.RUnlock()
	for _, c := range cs {
		delete(out.classes, c.Name)
		if err := out.Register(c); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Lookup returns the class named name (case-insensitive).
func (r *Registry) Lookup(name string) (*Class, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c, ok := r.classes[strings.ToLower(name)]
	return c, ok
}

// All returns the classes sorted by name.
func (r *Registry) All() []*Class {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*Class, 0, len(r.classes))
	for _, c := range r.classes {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Class returns the parameter names of a class in declaration order; with
// Classes it lets the expression checker (lang.Schema) suggest names.
func (r *Registry) Class(name string) ([]string, bool) {
	c, ok := r.Lookup(name)
	if !ok {
		return nil, false
	}
	names := make([]string, len(c.Params))
	for i, p := range c.Params {
		names[i] = p.Name
	}
	return names, true
}

// Classes returns the class names, sorted.
func (r *Registry) Classes() []string {
	all := r.All()
	names := make([]string, len(all))
	for i, c := range all {
		names[i] = c.Name
	}
	return names
}
