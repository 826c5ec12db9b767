package sketch

// The classes in eBPF (kernel and XDP flowspaces). Each extracts the key
// and hashes it with the code flowkey generates (the same words, hash and
// seed as Go), then updates its structure in a map of its own that the
// flowspace merges into the MBuf with the field's merge: count-min
// counters per CPU, summed; HyperLogLog registers per CPU, their maximum;
// a Bloom filter one shared map set atomically, since the code tests it
// to pass the packets of new keys. The scalar fields are counter slots.
// With window= the flowspace double-buffers all of it by epoch parity and
// its Go half reports each window from the merged state; only cms's
// report= stays in userspace (ebpfRuns says why).

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf/asm"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/ebpfgen"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/measure"
)

// ebpfRuns refuses in eBPF what only Go does: a window too short for the
// flowspace's Go half, and what extra refuses.
func ebpfRuns(extra func(p functions.Params) error) func(functions.Target, functions.Params) error {
	return func(t functions.Target, p functions.Params) error {
		if t != functions.TargetKernel && t != functions.TargetXDP {
			return nil
		}
		if err := measure.EBPFWindow(p); err != nil {
			return err
		}
		if extra != nil {
			return extra(p)
		}
		return nil
	}
}

// ebpfKey is the key code every class starts with: the key's words on the
// stack, their hash there too; a packet without a key adds 1 to slot
// nokey and goes to noKey.
type ebpfKey struct {
	sp    *flowkey.Spec
	nokey int // counter slot
	base  int16
	hash  int16 // stack offset of the hash
	value int16 // of the value added (cms)
}

// emit generates the key code; the hash is then at k.hash.
func (k *ebpfKey) emit(e *ebpfgen.Emitter, noKey string) error {
	k.base = int16(-e.StackOffset - flowkey.EBPFStack)
	k.hash, k.value = k.base-8, k.base-16
	if k.value < -512 {
		return fmt.Errorf("no room on the stack for the key (%d bytes taken)", e.StackOffset)
	}
	missing := e.Label("nokey")
	if err := k.sp.EmitEBPF(e, functions.LinkEthernet, k.base, missing); err != nil {
		return err
	}
	k.sp.EmitHash(e, k.base, seed, asm.R0)
	e.Insns = append(e.Insns, asm.StoreMem(asm.RFP, k.hash, asm.R0, asm.DWord), asm.Ja.Label(e.Label("key")))
	e.Insns = append(e.Insns, asm.Mov.Imm(asm.R1, 1).WithSymbol(missing))
	e.Insns = append(e.Insns, e.AddState(k.nokey, asm.R1)...)
	e.Insns = append(e.Insns, asm.Ja.Label(noKey), asm.Mov.Imm(asm.R0, 0).WithSymbol(e.Label("key")))
	return nil
}

// ebpfCMS adds the packet's value to depth counters of the shared-nothing
// (per-CPU) sketch and to the total.
type ebpfCMS struct {
	key          ebpfKey
	depth, width uint32
	bytes        bool
}

func (c *ebpfCMS) StateSlots() int { return 2 } // total, nokey
func (c *ebpfCMS) MapFields() []ebpfgen.MapField {
	return []ebpfgen.MapField{{Name: "counters"}}
}

func (c *ebpfCMS) Emit(e *ebpfgen.Emitter) error {
	if err := c.key.emit(e, e.Pass); err != nil {
		return err
	}
	if c.bytes {
		e.Insns = append(e.Insns, asm.Mov.Reg(asm.R1, ebpfgen.WireLen))
	} else {
		e.Insns = append(e.Insns, asm.Mov.Imm(asm.R1, 1))
	}
	e.Insns = append(e.Insns, asm.StoreMem(asm.RFP, c.key.value, asm.R1, asm.DWord))
	e.Insns = append(e.Insns, e.AddState(0, asm.R1)...)
	for r := range c.depth {
		e.Insns = append(e.Insns, asm.LoadMem(asm.R1, asm.RFP, c.key.hash, asm.DWord))
		flowkey.EmitIndex(e, asm.R2, asm.R1, asm.R3, r, c.width)
		if r > 0 {
			e.Insns = append(e.Insns, asm.Add.Imm(asm.R2, int32(r*c.width)))
		}
		e.Insns = append(e.Insns, e.Lookup("counters", asm.R2, e.Pass)...)
		e.Insns = append(e.Insns,
			asm.LoadMem(asm.R1, asm.RFP, c.key.value, asm.DWord),
			ebpfgen.Atomic(asm.AddAtomic, asm.R0, asm.R1, asm.DWord, 0),
		)
	}
	e.Insns = append(e.Insns, asm.Ja.Label(e.Pass))
	return nil
}

// ebpfHLL raises the register the hash chooses to its rank, per CPU.
type ebpfHLL struct {
	key ebpfKey
	p   uint8
}

func (f *ebpfHLL) StateSlots() int { return 1 } // nokey
func (f *ebpfHLL) MapFields() []ebpfgen.MapField {
	return []ebpfgen.MapField{{Name: "registers"}}
}

func (f *ebpfHLL) Emit(e *ebpfgen.Emitter) error {
	if err := f.key.emit(e, e.Pass); err != nil {
		return err
	}
	p := int32(f.p)
	e.Insns = append(e.Insns,
		asm.LoadMem(asm.R1, asm.RFP, f.key.hash, asm.DWord),
		asm.Mov.Reg(asm.R2, asm.R1), asm.RSh.Imm(asm.R2, 64-p), // j
		asm.LSh.Imm(asm.R1, p), asm.Or.Imm(asm.R1, 1<<(p-1)), // w: the guard bit caps ρ
	)
	// ρ = leading zeros of w + 1, by a binary search (w is not 0).
	e.Insns = append(e.Insns, asm.Mov.Imm(asm.R3, 1))
	for _, s := range []int32{32, 16, 8, 4, 2, 1} {
		skip := e.Label(fmt.Sprintf("clz%d", s))
		e.Insns = append(e.Insns,
			asm.Mov.Reg(asm.R4, asm.R1), asm.RSh.Imm(asm.R4, 64-s),
			asm.JNE.Imm(asm.R4, 0, skip),
			asm.Add.Imm(asm.R3, s), asm.LSh.Imm(asm.R1, s),
			asm.Mov.Imm(asm.R4, 0).WithSymbol(skip),
		)
	}
	e.Insns = append(e.Insns, asm.StoreMem(asm.RFP, f.key.value, asm.R3, asm.DWord))
	e.Insns = append(e.Insns, e.Lookup("registers", asm.R2, e.Pass)...)
	e.Insns = append(e.Insns,
		asm.LoadMem(asm.R3, asm.RFP, f.key.value, asm.DWord),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.JGE.Reg(asm.R1, asm.R3, e.Pass),
		asm.StoreMem(asm.R0, 0, asm.R3, asm.DWord),
		asm.Ja.Label(e.Pass),
	)
	return nil
}

// ebpfBloom sets the key's k bits in one shared map, atomically, and
// passes the packets pass= asks for; inserted counts the keys that were
// not in the set.
type ebpfBloom struct {
	key  ebpfKey
	m, k uint32
	pass string
}

func (f *ebpfBloom) StateSlots() int { return 2 } // inserted, nokey
func (f *ebpfBloom) MapFields() []ebpfgen.MapField {
	return []ebpfgen.MapField{{Name: "bits", Shared: true}}
}

func (f *ebpfBloom) Emit(e *ebpfgen.Emitter) error {
	noKey := e.Drop
	if f.pass == "all" {
		noKey = e.Pass
	}
	if err := f.key.emit(e, noKey); err != nil {
		return err
	}
	// value: 1 while every bit was set before (present).
	e.Insns = append(e.Insns, asm.Mov.Imm(asm.R1, 1), asm.StoreMem(asm.RFP, f.key.value, asm.R1, asm.DWord))
	for i := range f.k {
		set := e.Label(fmt.Sprintf("set%d", i))
		e.Insns = append(e.Insns, asm.LoadMem(asm.R1, asm.RFP, f.key.hash, asm.DWord))
		flowkey.EmitIndex(e, asm.R2, asm.R1, asm.R3, i, f.m)
		e.Insns = append(e.Insns,
			asm.Mov.Reg(asm.R3, asm.R2), asm.And.Imm(asm.R3, 63),
			asm.Mov.Imm(asm.R1, 1), asm.LSh.Reg(asm.R1, asm.R3),
			asm.StoreMem(asm.RFP, f.key.base, asm.R1, asm.DWord), // the mask (the key words are not needed now)
			asm.RSh.Imm(asm.R2, 6),
		)
		e.Insns = append(e.Insns, e.Lookup("bits", asm.R2, e.Pass)...)
		e.Insns = append(e.Insns,
			asm.LoadMem(asm.R1, asm.RFP, f.key.base, asm.DWord),
			asm.LoadMem(asm.R2, asm.R0, 0, asm.DWord),
			asm.And.Reg(asm.R2, asm.R1),
			asm.JNE.Imm(asm.R2, 0, set),
			asm.StoreMem(asm.RFP, f.key.value, asm.R2, asm.DWord), // absent: R2 is 0
			ebpfgen.Atomic(asm.OrAtomic, asm.R0, asm.R1, asm.DWord, 0),
			asm.Mov.Imm(asm.R0, 0).WithSymbol(set),
		)
	}
	present, kept := e.Label("present"), e.Pass
	e.Insns = append(e.Insns,
		asm.LoadMem(asm.R1, asm.RFP, f.key.value, asm.DWord),
		asm.JNE.Imm(asm.R1, 0, present),
		asm.Mov.Imm(asm.R1, 1),
	)
	e.Insns = append(e.Insns, e.AddState(0, asm.R1)...)
	switch f.pass {
	case "new", "all":
		e.Insns = append(e.Insns, asm.Ja.Label(kept))
	case "member":
		e.Insns = append(e.Insns, asm.Ja.Label(e.Drop))
	}
	if f.pass == "new" {
		kept = e.Drop
	}
	e.Insns = append(e.Insns, asm.Ja.Label(kept).WithSymbol(present))
	return nil
}

func ebpfKeyOf(ctx *functions.Context, nokey int) (ebpfKey, error) {
	if ctx.LinkType != functions.LinkEthernet {
		return ebpfKey{}, fmt.Errorf("flow keys in eBPF read Ethernet frames, not %v", ctx.LinkType)
	}
	return ebpfKey{sp: measure.Spec(ctx.Params), nokey: nokey}, nil
}

func ebpfCMSCode(ctx *functions.Context) (ebpfgen.Function, error) {
	k, err := ebpfKeyOf(ctx, 1)
	if err != nil {
		return nil, err
	}
	d, w := cmsDims(ctx.Params)
	return &ebpfCMS{key: k, depth: uint32(d), width: uint32(w), bytes: measure.Bytes(ctx.Params)}, nil
}

func ebpfHLLCode(ctx *functions.Context) (ebpfgen.Function, error) {
	k, err := ebpfKeyOf(ctx, 0)
	if err != nil {
		return nil, err
	}
	return &ebpfHLL{key: k, p: uint8(ctx.Params.Int("precision"))}, nil
}

func ebpfBloomCode(ctx *functions.Context) (ebpfgen.Function, error) {
	k, err := ebpfKeyOf(ctx, 1)
	if err != nil {
		return nil, err
	}
	return &ebpfBloom{key: k, m: uint32(ctx.Params.Int("bits")), k: uint32(ctx.Params.Int("hashes")), pass: ctx.Params.Str("pass")}, nil
}

// cmsRuns: report= stays in userspace. Go tracks the heaviest keys as
// each packet updates the sketch (a key is a candidate when its estimate
// is among the K largest at its update), so the keys reported depend on
// the packets' order, which CPUs do not keep; an eBPF table of candidates
// would report other keys than Go on the same packets.
func cmsRuns(p functions.Params) error {
	if measure.Reports(p) {
		return errCMSReport
	}
	if valueExpr(p) {
		return errors.New("a cms whose value= is a packet's number runs in userspace (or on a switch)")
	}
	return nil
}

var errCMSReport = errors.New("report= of cms runs in userspace: Go tracks the heaviest keys packet by packet, in an order that per-CPU eBPF updates do not keep")

// bloomRuns: a counting filter stays in userspace.
func bloomRuns(p functions.Params) error {
	if counting(p) {
		return errors.New("a counting Bloom filter runs in userspace")
	}
	return nil
}

// ebpfPCSA sets, in the bitmap the hash's high half chooses, the bit of
// its low half's trailing zeros (at most 31), per CPU.
type ebpfPCSA struct {
	key ebpfKey
	m   uint32
}

func (f *ebpfPCSA) StateSlots() int { return 1 } // nokey
func (f *ebpfPCSA) MapFields() []ebpfgen.MapField {
	return []ebpfgen.MapField{{Name: "bitmaps"}}
}

func (f *ebpfPCSA) Emit(e *ebpfgen.Emitter) error {
	if err := f.key.emit(e, e.Pass); err != nil {
		return err
	}
	e.Insns = append(e.Insns,
		asm.LoadMem(asm.R1, asm.RFP, f.key.hash, asm.DWord),
		asm.Mov.Reg(asm.R2, asm.R1), asm.RSh.Imm(asm.R2, 32),
		asm.LoadImm(asm.R3, int64(f.m), asm.DWord), asm.Mul.Reg(asm.R2, asm.R3), asm.RSh.Imm(asm.R2, 32), // j
		asm.Mov.Reg32(asm.R1, asm.R1),
		asm.Mov.Imm(asm.R3, 0),
	)
	// Trailing zeros of the low half by a binary search; 0 gives 31.
	for _, s := range []int32{16, 8, 4, 2, 1} {
		skip := e.Label(fmt.Sprintf("ctz%d", s))
		e.Insns = append(e.Insns,
			asm.Mov.Reg(asm.R4, asm.R1), asm.And.Imm(asm.R4, 1<<s-1),
			asm.JNE.Imm(asm.R4, 0, skip),
			asm.Add.Imm(asm.R3, s), asm.RSh.Imm(asm.R1, s),
			asm.Mov.Imm(asm.R4, 0).WithSymbol(skip),
		)
	}
	e.Insns = append(e.Insns, asm.Mov.Imm(asm.R1, 1), asm.LSh.Reg(asm.R1, asm.R3),
		asm.StoreMem(asm.RFP, f.key.value, asm.R1, asm.DWord))
	e.Insns = append(e.Insns, e.Lookup("bitmaps", asm.R2, e.Pass)...)
	e.Insns = append(e.Insns,
		asm.LoadMem(asm.R1, asm.RFP, f.key.value, asm.DWord),
		ebpfgen.Atomic(asm.OrAtomic, asm.R0, asm.R1, asm.DWord, 0),
		asm.Ja.Label(e.Pass),
	)
	return nil
}

func ebpfPCSACode(ctx *functions.Context) (ebpfgen.Function, error) {
	k, err := ebpfKeyOf(ctx, 0)
	if err != nil {
		return nil, err
	}
	return &ebpfPCSA{key: k, m: uint32(ctx.Params.Int("bitmaps"))}, nil
}
