// Package ebpfgen is how a function class runs in an eBPF flowspace (the
// kernel's tc hook, XDP): the class emits eBPF instructions for one
// function, and the flowspace chains the functions placed there into one
// program, generated at run time with cilium/ebpf's asm (no clang).
//
// A function's code sees the packet through fixed registers and ends by
// jumping to one of two labels: Pass (the packet goes on to the functions
// it feeds) or Drop (filtered). Scalar state lives in u64 slots of a
// per-CPU map that the flowspace sums into the function's first MBuf
// fields, in order. Larger state (a sketch's counters, a table) lives in
// maps of the function's own (Mapped): one array map per MBuf field, one
// u64 element per value, per-CPU or shared as the class declares the
// field's merge, which the flowspace applies when it copies the map into
// the MBuf (sum, max, or; shared: as it is). A function with window= is
// the same code, emitted twice by the flowspace: once on the maps and
// slots of the even epochs, once on those of the odd.
//
// The sharp edge: the code runs under the kernel's verifier. Every packet
// access must be bounds-checked against PacketEnd, loops are not allowed,
// and registers R6 to R9 belong to the program: a function may use R0 to
// R5 and the stack below StackOffset.
package ebpfgen

import (
	"time"

	"github.com/cilium/ebpf/asm"
)

// MinWindow is the shortest window= a function keeps in eBPF: the
// flowspace's Go half closes each window, and sweeps its half of the
// state, within the next window (DESIGN.md §11); shorter ones run in
// userspace.
const MinWindow = 100 * time.Millisecond

// The registers the program keeps for its functions.
const (
	Ctx         = asm.R6 // the program's context (xdp_md, __sk_buff)
	PacketStart = asm.R7 // first byte of the packet
	PacketEnd   = asm.R8 // one past its last directly readable byte
	WireLen     = asm.R9 // its length on the wire, in bytes
)

// Function is one function's eBPF code.
type Function interface {
	// Emit appends the function's code to e.Insns.
	Emit(e *Emitter) error
	// StateSlots is how many u64 state slots it keeps; slot i is summed
	// over CPUs into the i-th field of the function's MBuf.
	StateSlots() int
}

// Timed is a Function that reads the packet's time (Emitter.Time).
type Timed interface {
	Function
	Timed() bool
}

// Mapped is a Function that keeps state fields in maps of its own.
type Mapped interface {
	Function
	// MapFields are the fields of the function's MBuf each kept in an
	// array map of its own, with one u64 element per value of the field
	// (a u8 or u32 field holds its values widened). The slots' fields
	// come first, so a map field is none of them.
	MapFields() []MapField
}

// Drained is a Function that keeps an entry per flow in a hash map of its
// own, one per epoch parity: the code, emitted once per parity, updates
// the entry of the packet's flow in the map of the packet's epoch
// (Emitter.FlowMap, Epoch, Clock), and the function's Go half
// (functions.Drainer) reads that map once the epoch has ended, while the
// packets of the next write the other. A value's first u64 is the epoch
// it holds: the code resets an entry of another epoch, and an entry no
// CPU wrote in the epoch drained is deleted then (its flow had no packet
// in that epoch: the entry was last written two or more epochs before). A map is read and pruned only between its epochs, so no
// update is lost to a deletion that races a packet, as deleting the idle
// entries of one shared map would; an LRU map would evict flows silently.
type Drained interface {
	Function
	FlowMap() FlowMap
}

// FlowMap describes a Drained function's maps.
type FlowMap struct {
	Epoch     time.Duration // the period its Go half drains at
	KeySize   int           // bytes
	ValueSize int           // bytes, a multiple of 8
	Entries   int           // entries of a map: its epoch's flows and those its last drain kept
	PerCPU    bool          // one value per CPU, merged by the Go half
}

// MapField is a field of a function's MBuf kept in a map. The map is
// per-CPU unless the class declares the field's merge shared or Shared is
// set: a structure the code itself tests (a Bloom filter that passes the
// packets of new keys) must see every CPU's updates, made atomically.
type MapField struct {
	Name   string
	Shared bool
}

// Emitter is what a function's code is generated into.
type Emitter struct {
	// Prefix is unique to the function: its labels must start with it.
	Prefix string
	// Pass and Drop are the labels to end at.
	Pass, Drop string
	// StackOffset is how many bytes below the frame pointer are taken;
	// the function may use the stack below that, to at most 512 bytes.
	StackOffset int
	// AddState returns code that adds register r to the function's state
	// slot i (it may clobber R0 to R5, r included).
	AddState func(i int, r asm.Register) asm.Instructions
	// Map returns the file descriptor of the map that keeps field, one of
	// the function's MapFields.
	Map func(field string) int
	// KeySlot is the stack offset of 4 bytes of scratch memory beside the
	// function's own, for map keys (Lookup uses it).
	KeySlot int16
	// Outgoing is set in a program at an egress hook: its packets are
	// sent ones (libpcap's outbound), where others' are received.
	Outgoing bool

	// Ann returns the stack offset of the packet's annotation word w
	// (0 ≤ w < buffers.AnnWords), a u64: a function that annotates
	// (Class.Annotates) writes its words (Context.Ann on) there, and the
	// program carries them up to the flowspace above in the packet's
	// record, into the slot's annotation area. Nil for a function that
	// writes none.
	Ann func(w int) int16
	// Time is the stack offset of the packet's time, a u64 of
	// bpf_ktime_get_ns (CLOCK_MONOTONIC) that the program reads once per
	// packet, for a Timed function (0 otherwise); ClockOffset added to it
	// gives ns since the Unix epoch, on the time base of the packet
	// clock above: the time the packet's record carries up.
	Time        int16
	ClockOffset int64
	// For a Drained function: FlowMap is the file descriptor of the map
	// of the epoch parity the code is emitted for; Epoch and Clock are the
	// stack offsets of the packet's epoch number and of its time on the
	// packet clock (ns since the Unix epoch), u64s the program computed.
	FlowMap      int
	Epoch, Clock int16

	Insns asm.Instructions
}

// Lookup returns code that sets R0 to the address of element idx (a
// register) of the map that keeps field, and goes to miss when there is
// none (idx beyond the field). It clobbers R1 to R5; idx may be one of them.
func (e *Emitter) Lookup(field string, idx asm.Register, miss string) asm.Instructions {
	return asm.Instructions{
		asm.StoreMem(asm.RFP, e.KeySlot, idx, asm.Word),
		asm.LoadMapPtr(asm.R1, e.Map(field)),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, int32(e.KeySlot)),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, miss),
	}
}

// Label returns a label private to the function.
func (e *Emitter) Label(name string) string { return e.Prefix + "_" + name }

// Atomic returns the atomic operation op on *(size *)(dst + off) with src
// (src receives the old value with a fetch; CmpXchg compares with R0 and
// returns the old value there). The kernel reads the operation from the
// instruction's immediate, which cilium/ebpf's AtomicOp.Mem leaves 0 (an
// add): it is set here.
func Atomic(op asm.AtomicOp, dst, src asm.Register, size asm.Size, off int16) asm.Instruction {
	ins := op.Mem(dst, src, size, off)
	ins.Constant = int64(op >> 8)
	return ins
}

// MaxPacketOffset bounds an offset into the packet that LoadPacket takes
// from a register, for the verifier: the furthest a header field can be
// is the ports after 4 VLAN tags, 40 bytes of IPv6 and 8 extension
// headers of at most 2048 bytes, about 16.5 KB.
const MaxPacketOffset = 0x7fff

// LoadPacket returns code that reads size bytes (1, 2, 4 or 8) at offset
// off (a register holding a scalar, or asm.RFP for offset 0) plus k,
// big-endian, into dst, and goes to bad when off passes MaxPacketOffset or
// the bytes pass the packet's end. It clobbers R4 and R5; dst is neither,
// nor is off.
func LoadPacket(dst, off asm.Register, k int, size asm.Size, bad string) asm.Instructions {
	var in asm.Instructions
	if off != asm.RFP {
		in = append(in, asm.JGT.Imm(off, MaxPacketOffset, bad))
	}
	in = append(in, asm.Mov.Reg(asm.R5, PacketStart))
	if off != asm.RFP {
		in = append(in, asm.Add.Reg(asm.R5, off))
	}
	in = append(in,
		asm.Mov.Reg(asm.R4, asm.R5),
		asm.Add.Imm(asm.R4, int32(k+size.Sizeof())),
		asm.JGT.Reg(asm.R4, PacketEnd, bad),
		asm.LoadMem(dst, asm.R5, int16(k), size),
	)
	if size != asm.Byte {
		in = append(in, asm.HostTo(asm.BE, dst, size))
	}
	return in
}

// Blur returns code that keeps the value of r (below mask+1) but makes the
// verifier forget it (r ^= x; r ^= x, x unknown): the paths that reach
// this point with different offsets (after 0 to 4 tags, after each IPv6
// extension header) become one state, and what follows is verified once
// rather than once per path. It clobbers R4.
func Blur(r asm.Register, mask int32) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R4, PacketEnd),
		asm.Sub.Reg(asm.R4, PacketStart),
		asm.And.Imm(asm.R4, mask),
		asm.Xor.Reg(r, asm.R4),
		asm.Xor.Reg(r, asm.R4),
	}
}
