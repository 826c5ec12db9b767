package functions

import (
	"errors"
	"fmt"
	"slices"

	"github.com/ffpf-go/ffpf/buffers"
)

// Concurrency is a class's contract for one function that several workers
// reach at once (several sources, the receive queues of one interface):
// whether its Process may run on them concurrently, and how (DESIGN.md
// §15). It is declared statically, like State, so that 'ffpf classes' and
// 'ffpf place' say it and a flowspace decides before anything runs.
type Concurrency uint8

const (
	// Ordered is one lock: Process, Tick, Flush and the handlers run one
	// at a time, in the order the workers take the lock. It is the zero
	// value: a class that declares nothing is ordered.
	Ordered Concurrency = iota
	// Stateless keeps nothing from one packet to the next: each worker
	// runs its own instance, without a lock, with its own counters.
	Stateless
	// Mergeable keeps state whose fields combine by their declared Merge
	// (sum, max, or): each worker runs its own instance on a shard of the
	// MBuf, and whoever reads the state (--json, handlers, the end of the
	// run) sees the shards merged, as an eBPF flowspace merges its per-CPU
	// maps. The merged state equals what one worker would have left.
	Mergeable
)

// String returns the kind's name: ordered, stateless, mergeable.
func (k Concurrency) String() string {
	switch k {
	case Ordered:
		return "ordered"
	case Stateless:
		return "stateless"
	case Mergeable:
		return "mergeable"
	}
	return fmt.Sprintf("Concurrency(%d)", uint8(k))
}

// Ordering is a setting of a class's parameters under which a function
// runs ordered although its class declares another kind: a cms with
// report= lists the heaviest keys of each window as its packets came.
type Ordering struct {
	When string            // the setting, for 'ffpf classes': "report=", "pass=new or member"
	If   func(Params) bool // whether p has the setting
	Why  string            // why that needs one lock, for 'ffpf place'
}

// ConcurrencyOf returns how a function of the class with parameters p runs
// on several workers: the declared kind, or Ordered with the reason when
// one of the class's Orderings applies.
func (c *Class) ConcurrencyOf(p Params) (Concurrency, string) {
	if c.Concurrency == Ordered {
		return Ordered, ""
	}
	for _, o := range c.OrderedWhen {
		if o.If(p) {
			return Ordered, o.Why
		}
	}
	return c.Concurrency, ""
}

// checkConcurrency refuses a declared kind that the class's state, in one
// of its targets, cannot honour: a stateless class that keeps state where
// each worker would need its own copy, a mergeable one with a field whose
// copies do not combine exactly.
func (c *Class) checkConcurrency() error {
	switch c.Concurrency {
	case Ordered, Stateless, Mergeable:
	default:
		return fmt.Errorf("class %s declares an unknown concurrency %v", c.Name, c.Concurrency)
	}
	for _, o := range c.OrderedWhen {
		if o.If == nil || o.When == "" || o.Why == "" {
			return fmt.Errorf("class %s: an ordering must say when (When, If) and why (Why)", c.Name)
		}
	}
	if c.Concurrency == Ordered {
		if len(c.OrderedWhen) > 0 {
			return fmt.Errorf("class %s is ordered whatever its parameters: it needs no OrderedWhen", c.Name)
		}
		return nil
	}
	if c.IsSource() {
		return fmt.Errorf("source class %s declares a concurrency: a source is read by one worker of its own", c.Name)
	}
	if c.State == nil {
		if c.Concurrency == Mergeable {
			return fmt.Errorf("class %s is mergeable but declares no state to merge: declare it stateless", c.Name)
		}
		return nil
	}
	for _, t := range c.Targets {
		if err := honours(t, c); err != nil {
			return fmt.Errorf("class %s cannot be %v in %s: %v", c.Name, c.Concurrency, t, err)
		}
	}
	return nil
}

// honours says why a flowspace of target t cannot run the class as its
// declared kind promises. Every target runs a function on several workers
// or CPUs at once, each with its own copy of the state, so the state must
// combine: a stateless function keeps none, except in eBPF, whose per-CPU
// maps merge as declared (a filter's verdict counts); a mergeable
// function's fields combine exactly whatever the order the packets came
// in; a field shared by every worker needs the one lock of an ordered
// function.
func honours(t Target, c *Class) error {
	if c.Concurrency == Mergeable && c.State.order() != buffers.Native {
		return fmt.Errorf("its state is %s, not in the byte order the workers merge in", c.State.OrderName())
	}
	var shared []string
	for i := range c.State.Fields {
		f := &c.State.Fields[i]
		if !f.In(t) {
			continue
		}
		if c.Concurrency == Stateless && t != TargetKernel && t != TargetXDP {
			return fmt.Errorf("it keeps state (%s)", f.Name)
		}
		switch {
		case f.Merge == MergeShared:
			shared = append(shared, f.Name)
		case f.Merge == MergeSum && f.Type == buffers.F64:
			return fmt.Errorf("state field %s: sums of floating-point values depend on their order", f.Name)
		case f.Merge == MergeMax && (f.Type == buffers.I64 || f.Type == buffers.F64):
			return fmt.Errorf("state field %s: a merge by max starts from zero, which is not the least %v", f.Name, f.Type)
		}
	}
	// A shared field is one value that every worker would update (a keyed
	// counter's table): the class must run ordered where it uses it.
	if len(shared) > 0 && len(c.OrderedWhen) == 0 {
		return fmt.Errorf("state field %s is shared by every worker, and no setting makes the class ordered", shared[0])
	}
	return nil
}

// Fold merges the state of src, another worker's shard of a function of
// the class with parameters p that runs in a flowspace of target t, into
// dst, field by field as the class declares (sum, max, or), and zeroes src:
// afterwards dst holds what both held, and src starts again from nothing.
// The caller holds both shards still. A shared field (which the class
// leaves untouched where it runs mergeable) adds up.
func (c *Class) Fold(t Target, dst, src *buffers.MBuf) error {
	if c.State == nil {
		return nil
	}
	if len(dst.Bytes()) != len(src.Bytes()) {
		return errors.New("functions: folding MBufs of different sizes")
	}
	for _, mf := range dst.Fields() {
		i := slices.IndexFunc(c.State.Fields, func(f StateField) bool { return f.Name == mf.Name })
		if i < 0 {
			return fmt.Errorf("class %s does not declare the state field %s", c.Name, mf.Name)
		}
		if !c.State.Fields[i].In(t) {
			continue
		}
		fold(c.State.Fields[i].Merge, mf, dst, src)
	}
	return nil
}

// fold merges field f of src into dst by m, value by value, and zeroes the
// values of src.
func fold(m Merge, f buffers.Field, dst, src *buffers.MBuf) {
	switch f.Type {
	case buffers.U8:
		foldValues(m, dst.Uint8s(f), src.Uint8s(f))
	case buffers.U32:
		foldValues(m, dst.Uint32s(f), src.Uint32s(f))
	default: // U64, I64 (sums wrap alike), F64 (or only)
		foldValues(m, dst.Uint64s(f), src.Uint64s(f))
	}
}

func foldValues[T uint8 | uint32 | uint64](m Merge, dst, src []T) {
	for i, v := range src {
		switch m {
		case MergeMax:
			dst[i] = max(dst[i], v)
		case MergeOr:
			dst[i] |= v
		default:
			dst[i] += v
		}
		src[i] = 0
	}
}
