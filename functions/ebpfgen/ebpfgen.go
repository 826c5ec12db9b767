// Package ebpfgen is how a function class runs in an eBPF flowspace (the
// kernel's tc hook, XDP): the class emits eBPF instructions for one
// function, and the flowspace chains the functions placed there into one
// program, generated at run time with cilium/ebpf's asm (no clang).
//
// A function's code sees the packet through fixed registers and ends by
// jumping to one of two labels: Pass (the packet goes on to the functions
// it feeds) or Drop (filtered). State lives in u64 slots of a per-CPU map
// that the flowspace sums into the function's MBuf fields, in order.
//
// The sharp edge: the code runs under the kernel's verifier. Every packet
// access must be bounds-checked against PacketEnd, loops are not allowed,
// and registers R6 to R9 belong to the program: a function may use R0 to
// R5 and the stack below StackOffset.
package ebpfgen

import (
	"github.com/cilium/ebpf/asm"
)

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
	// Outgoing is set in a program at an egress hook: its packets are
	// sent ones (libpcap's outbound), where others' are received.
	Outgoing bool

	Insns asm.Instructions
}

// Label returns a label private to the function.
func (e *Emitter) Label(name string) string { return e.Prefix + "_" + name }
