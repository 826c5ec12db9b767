package bpf

import (
	"fmt"
	"strings"
)

// Instruction is one classic BPF instruction, laid out like libpcap's
// struct bpf_insn and gopacket's pcap.BPFInstruction.
type Instruction struct {
	Code   uint16
	Jt, Jf uint8
	K      uint32
}

// Instruction classes, sizes, modes and operations of classic BPF
// (pcap/bpf.h).
const (
	classLD   = 0x00
	classLDX  = 0x01
	classST   = 0x02
	classSTX  = 0x03
	classALU  = 0x04
	classJMP  = 0x05
	classRET  = 0x06
	classMISC = 0x07

	sizeW = 0x00
	sizeH = 0x08
	sizeB = 0x10

	modeIMM = 0x00
	modeABS = 0x20
	modeIND = 0x40
	modeMEM = 0x60
	modeLEN = 0x80
	modeMSH = 0xa0

	aluADD = 0x00
	aluSUB = 0x10
	aluMUL = 0x20
	aluDIV = 0x30
	aluOR  = 0x40
	aluAND = 0x50
	aluLSH = 0x60
	aluRSH = 0x70
	aluNEG = 0x80
	aluMOD = 0x90
	aluXOR = 0xa0

	jmpJA   = 0x00
	jmpJEQ  = 0x10
	jmpJGT  = 0x20
	jmpJGE  = 0x30
	jmpJSET = 0x40

	srcK = 0x00
	srcX = 0x08

	retK = 0x00
	retA = 0x10

	miscTAX = 0x00
	miscTXA = 0x80
)

// MemWords is the number of 32-bit scratch memory cells (BPF_MEMWORDS).
const MemWords = 16

// MaxInstructions is the longest program Load accepts: the limit libpcap's
// own userland interpreter and validator use.
const MaxInstructions = 3060000

// Disassemble prints insns one per line exactly as `tcpdump -d` (libpcap's
// bpf_dump at level 1, bpf_image) does, each line ending in a newline.
func Disassemble(insns []Instruction) string {
	var b strings.Builder
	for i, in := range insns {
		b.WriteString(image(in, i))
		b.WriteByte('\n')
	}
	return b.String()
}

// String returns the instruction as `tcpdump -d` prints it, without the
// "(nnn)" position prefix; jump targets are relative ("jt +1").
func (in Instruction) String() string {
	op, operand := opImage(in, -1)
	if in.Code&0x07 == classJMP && in.Code&0xf0 != jmpJA {
		return fmt.Sprintf("%-8s %-16s jt +%d\tjf +%d", op, operand, in.Jt, in.Jf)
	}
	return fmt.Sprintf("%-8s %s", op, operand)
}

// image is libpcap's bpf_image for instruction n.
func image(in Instruction, n int) string {
	op, operand := opImage(in, n)
	if in.Code&0x07 == classJMP && in.Code&0xf0 != jmpJA {
		return fmt.Sprintf("(%03d) %-8s %-16s jt %d\tjf %d", n, op, operand,
			n+1+int(in.Jt), n+1+int(in.Jf))
	}
	return fmt.Sprintf("(%03d) %-8s %s", n, op, operand)
}

// opImage returns the mnemonic and operand of in at position n (n < 0: a
// ja target is printed relative).
func opImage(in Instruction, n int) (op, operand string) {
	k := in.K
	switch in.Code {
	case classRET | retK:
		return "ret", fmt.Sprintf("#%d", int32(k))
	case classRET | retA:
		return "ret", ""
	case classLD | sizeW | modeABS:
		return "ld", fmt.Sprintf("[%d]", int32(k))
	case classLD | sizeH | modeABS:
		return "ldh", fmt.Sprintf("[%d]", int32(k))
	case classLD | sizeB | modeABS:
		return "ldb", fmt.Sprintf("[%d]", int32(k))
	case classLD | sizeW | modeLEN:
		return "ld", "#pktlen"
	case classLDX | sizeW | modeLEN:
		return "ldx", "#pktlen"
	case classLD | sizeW | modeIND:
		return "ld", fmt.Sprintf("[x + %d]", int32(k))
	case classLD | sizeH | modeIND:
		return "ldh", fmt.Sprintf("[x + %d]", int32(k))
	case classLD | sizeB | modeIND:
		return "ldb", fmt.Sprintf("[x + %d]", int32(k))
	case classLD | modeIMM:
		return "ld", fmt.Sprintf("#0x%x", k)
	case classLDX | modeIMM:
		return "ldx", fmt.Sprintf("#0x%x", k)
	case classLDX | sizeB | modeMSH:
		return "ldxb", fmt.Sprintf("4*([%d]&0xf)", int32(k))
	case classLD | modeMEM:
		return "ld", fmt.Sprintf("M[%d]", int32(k))
	case classLDX | modeMEM:
		return "ldx", fmt.Sprintf("M[%d]", int32(k))
	case classST:
		return "st", fmt.Sprintf("M[%d]", int32(k))
	case classSTX:
		return "stx", fmt.Sprintf("M[%d]", int32(k))
	case classJMP | jmpJA:
		if n < 0 {
			return "ja", fmt.Sprintf("%+d", int32(k))
		}
		return "ja", fmt.Sprintf("%d", int32(uint32(n)+1+k))
	case classJMP | jmpJGT | srcK:
		return "jgt", fmt.Sprintf("#0x%x", k)
	case classJMP | jmpJGE | srcK:
		return "jge", fmt.Sprintf("#0x%x", k)
	case classJMP | jmpJEQ | srcK:
		return "jeq", fmt.Sprintf("#0x%x", k)
	case classJMP | jmpJSET | srcK:
		return "jset", fmt.Sprintf("#0x%x", k)
	case classJMP | jmpJGT | srcX:
		return "jgt", "x"
	case classJMP | jmpJGE | srcX:
		return "jge", "x"
	case classJMP | jmpJEQ | srcX:
		return "jeq", "x"
	case classJMP | jmpJSET | srcX:
		return "jset", "x"
	case classALU | aluADD | srcX:
		return "add", "x"
	case classALU | aluSUB | srcX:
		return "sub", "x"
	case classALU | aluMUL | srcX:
		return "mul", "x"
	case classALU | aluDIV | srcX:
		return "div", "x"
	case classALU | aluMOD | srcX:
		return "mod", "x"
	case classALU | aluAND | srcX:
		return "and", "x"
	case classALU | aluOR | srcX:
		return "or", "x"
	case classALU | aluXOR | srcX:
		return "xor", "x"
	case classALU | aluLSH | srcX:
		return "lsh", "x"
	case classALU | aluRSH | srcX:
		return "rsh", "x"
	case classALU | aluADD | srcK:
		return "add", fmt.Sprintf("#%d", int32(k))
	case classALU | aluSUB | srcK:
		return "sub", fmt.Sprintf("#%d", int32(k))
	case classALU | aluMUL | srcK:
		return "mul", fmt.Sprintf("#%d", int32(k))
	case classALU | aluDIV | srcK:
		return "div", fmt.Sprintf("#%d", int32(k))
	case classALU | aluMOD | srcK:
		return "mod", fmt.Sprintf("#%d", int32(k))
	case classALU | aluAND | srcK:
		return "and", fmt.Sprintf("#0x%x", k)
	case classALU | aluOR | srcK:
		return "or", fmt.Sprintf("#0x%x", k)
	case classALU | aluXOR | srcK:
		return "xor", fmt.Sprintf("#0x%x", k)
	case classALU | aluLSH | srcK:
		return "lsh", fmt.Sprintf("#%d", int32(k))
	case classALU | aluRSH | srcK:
		return "rsh", fmt.Sprintf("#%d", int32(k))
	case classALU | aluNEG:
		return "neg", ""
	case classMISC | miscTAX:
		return "tax", ""
	case classMISC | miscTXA:
		return "txa", ""
	}
	return "unimp", fmt.Sprintf("0x%x", in.Code)
}
