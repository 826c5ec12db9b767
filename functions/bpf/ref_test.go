package bpf

import (
	"encoding/binary"
	"testing"

	xbpf "golang.org/x/net/bpf"

	"github.com/ffpf-go/ffpf/functions/bpf/internal/pcaporacle"
)

// refRun is a transcription of libpcap's bpf_filter (bpf_filter.c) over
// the original instructions: no pre-decoding, no superinstructions. The
// tests use it to tell whether a packet exhausts the loop budget (libpcap
// 1.10 would hang on it, so it must not reach the oracle) and as a second
// opinion that needs no cgo.
func refRun(insns []Instruction, p []byte, wirelen uint32) (ret uint32, exhausted bool) {
	buflen := uint32(len(p))
	budget := uint64(BackJumpBase) + 2*uint64(len(p))
	var A, X uint32
	var mem [MemWords]uint32
	for pc := 0; ; pc++ {
		in := insns[pc]
		k := in.K
		switch in.Code {
		case classRET | retK:
			return k, false
		case classRET | retA:
			return A, false
		case classLD | sizeW | modeABS:
			if k > buflen || 4 > buflen-k {
				return 0, false
			}
			A = binary.BigEndian.Uint32(p[k:])
		case classLD | sizeH | modeABS:
			if k > buflen || 2 > buflen-k {
				return 0, false
			}
			A = uint32(binary.BigEndian.Uint16(p[k:]))
		case classLD | sizeB | modeABS:
			if k >= buflen {
				return 0, false
			}
			A = uint32(p[k])
		case classLD | sizeW | modeLEN:
			A = wirelen
		case classLDX | sizeW | modeLEN:
			X = wirelen
		case classLD | sizeW | modeIND:
			kk := X + k
			if k > buflen || X > buflen-k || 4 > buflen-kk {
				return 0, false
			}
			A = binary.BigEndian.Uint32(p[kk:])
		case classLD | sizeH | modeIND:
			kk := X + k
			if X > buflen || k > buflen-X || 2 > buflen-kk {
				return 0, false
			}
			A = uint32(binary.BigEndian.Uint16(p[kk:]))
		case classLD | sizeB | modeIND:
			kk := X + k
			if k >= buflen || X >= buflen-k {
				return 0, false
			}
			A = uint32(p[kk])
		case classLDX | sizeB | modeMSH:
			if k >= buflen {
				return 0, false
			}
			X = uint32(p[k]&0xf) << 2
		case classLD | modeIMM:
			A = k
		case classLDX | modeIMM:
			X = k
		case classLD | modeMEM:
			A = mem[k]
		case classLDX | modeMEM:
			X = mem[k]
		case classST:
			mem[k] = A
		case classSTX:
			mem[k] = X
		case classJMP | jmpJA:
			if int32(k) < 0 {
				if budget == 0 {
					return 0, true
				}
				budget--
			}
			pc += int(int32(k))
		case classJMP | jmpJGT | srcK:
			pc += cond(A > k, in)
		case classJMP | jmpJGE | srcK:
			pc += cond(A >= k, in)
		case classJMP | jmpJEQ | srcK:
			pc += cond(A == k, in)
		case classJMP | jmpJSET | srcK:
			pc += cond(A&k != 0, in)
		case classJMP | jmpJGT | srcX:
			pc += cond(A > X, in)
		case classJMP | jmpJGE | srcX:
			pc += cond(A >= X, in)
		case classJMP | jmpJEQ | srcX:
			pc += cond(A == X, in)
		case classJMP | jmpJSET | srcX:
			pc += cond(A&X != 0, in)
		case classALU | aluADD | srcX:
			A += X
		case classALU | aluSUB | srcX:
			A -= X
		case classALU | aluMUL | srcX:
			A *= X
		case classALU | aluDIV | srcX:
			if X == 0 {
				return 0, false
			}
			A /= X
		case classALU | aluMOD | srcX:
			if X == 0 {
				return 0, false
			}
			A %= X
		case classALU | aluAND | srcX:
			A &= X
		case classALU | aluOR | srcX:
			A |= X
		case classALU | aluXOR | srcX:
			A ^= X
		case classALU | aluLSH | srcX:
			if X < 32 {
				A <<= X
			} else {
				A = 0
			}
		case classALU | aluRSH | srcX:
			if X < 32 {
				A >>= X
			} else {
				A = 0
			}
		case classALU | aluADD | srcK:
			A += k
		case classALU | aluSUB | srcK:
			A -= k
		case classALU | aluMUL | srcK:
			A *= k
		case classALU | aluDIV | srcK:
			A /= k
		case classALU | aluMOD | srcK:
			A %= k
		case classALU | aluAND | srcK:
			A &= k
		case classALU | aluOR | srcK:
			A |= k
		case classALU | aluXOR | srcK:
			A ^= k
		case classALU | aluLSH | srcK:
			A <<= k
		case classALU | aluRSH | srcK:
			A >>= k
		case classALU | aluNEG:
			A = 0 - A
		case classMISC | miscTAX:
			X = A
		case classMISC | miscTXA:
			A = X
		default:
			panic("refRun: invalid opcode")
		}
	}
}

func cond(c bool, in Instruction) int {
	if c {
		return int(in.Jt)
	}
	return int(in.Jf)
}

// oracleProgram copies insns into C memory for libpcap's interpreter.
func oracleProgram(tb testing.TB, insns []Instruction) *pcaporacle.Program {
	tb.Helper()
	c := make([]pcaporacle.Insn, len(insns))
	for i, in := range insns {
		c[i] = pcaporacle.Insn{Code: in.Code, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	op, err := pcaporacle.New(c)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(op.Free)
	return op
}

// xnetVM loads insns into golang.org/x/net/bpf's VM, or returns nil when
// that VM does not take the program.
func xnetVM(insns []Instruction) *xbpf.VM {
	raw := make([]xbpf.RawInstruction, len(insns))
	for i, in := range insns {
		raw[i] = xbpf.RawInstruction{Op: in.Code, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	prog, ok := xbpf.Disassemble(raw)
	if !ok {
		return nil
	}
	vm, err := xbpf.NewVM(prog)
	if err != nil {
		return nil
	}
	return vm
}
