package bpf

import (
	"errors"
	"fmt"
)

// Program is a validated classic BPF program, pre-decoded for Run. It is
// immutable after Load and safe for concurrent use.
type Program struct {
	orig  []Instruction
	code  []insn
	back  bool // has a backward ja (libpcap's protochain)
	stats fusionStats
}

// Instructions returns the program as it was loaded. The caller must not
// modify it.
func (p *Program) Instructions() []Instruction { return p.orig }

// HasBackwardJumps reports whether the program jumps backwards (libpcap
// emits such jumps for protochain only). Such a program cannot be
// translated to eBPF by cbpfc and must run in userspace.
func (p *Program) HasBackwardJumps() bool { return p.back }

// fusionStats counts the superinstructions Load formed, for tests and
// benchmarks.
type fusionStats struct{ fused, threaded int }

// insn is the pre-decoded form of one instruction. Instruction i of the
// original program is code[i]: a superinstruction at i does the work of
// instructions i, i+1 (and i+2) and jumps where the last of them would,
// while code[i+1]… stay in place for other jumps that land on them. Jump
// targets are absolute indices.
type insn struct {
	op     uint8
	k      uint32 // offset or constant of the first instruction
	k2     uint32 // offset of the second load of a fused msh+load
	c      uint32 // constant a fused jump compares A with
	jt, jf uint32 // absolute targets
}

// Internal operations. The order matters only for the jump table: keep them
// dense.
const (
	opRetK uint8 = iota
	opRetA
	opLdAbsW
	opLdAbsH
	opLdAbsB
	opLdIndW
	opLdIndH
	opLdIndB
	opLdLen
	opLdxLen
	opLdxMsh
	opLdImm
	opLdxImm
	opLdMem
	opLdxMem
	opSt
	opStx
	opJa
	opJaBack
	opJgtK
	opJgeK
	opJeqK
	opJsetK
	opJgtX
	opJgeX
	opJeqX
	opJsetX
	opAddX
	opSubX
	opMulX
	opDivX
	opModX
	opAndX
	opOrX
	opXorX
	opLshX
	opRshX
	opAddK
	opSubK
	opMulK
	opDivK
	opModK
	opAndK
	opOrK
	opXorK
	opLshK
	opRshK
	opNeg
	opTax
	opTxa

	// Superinstructions: ld{w,h,b} [k] + j{gt,ge,eq,set} #c.
	opLdAbsWJgt
	opLdAbsWJge
	opLdAbsWJeq
	opLdAbsWJset
	opLdAbsHJgt
	opLdAbsHJge
	opLdAbsHJeq
	opLdAbsHJset
	opLdAbsBJgt
	opLdAbsBJge
	opLdAbsBJeq
	opLdAbsBJset
	// ld{w,h,b} [x+k] + j{gt,ge,eq,set} #c.
	opLdIndWJgt
	opLdIndWJge
	opLdIndWJeq
	opLdIndWJset
	opLdIndHJgt
	opLdIndHJge
	opLdIndHJeq
	opLdIndHJset
	opLdIndBJgt
	opLdIndBJge
	opLdIndBJeq
	opLdIndBJset
	// ldxb 4*([k]&0xf) + ld{w,h,b} [x+k2].
	opMshLdW
	opMshLdH
	opMshLdB
	// ldxb 4*([k]&0xf) + ld{h,b} [x+k2] + j{eq,set} #c: the transport
	// port and flag tests of every IPv4 filter.
	opMshLdHJeq
	opMshLdHJset
	opMshLdBJeq
	opMshLdBJset
	// ld{h,b} [k] + and #k2 + jeq #c: VLAN ids, masked fields.
	opLdAbsHAndJeq
	opLdAbsBAndJeq
	opNumOps
)

// Validation errors name the instruction.
var errEmpty = errors.New("bpf: empty program")

// validCode reports whether code is an opcode libpcap's interpreter
// executes (pcapint_valid_insn's list).
func validCode(code uint16) bool {
	switch code {
	case classRET | retK, classRET | retA,
		classLD | sizeW | modeABS, classLD | sizeH | modeABS, classLD | sizeB | modeABS,
		classLD | sizeW | modeLEN, classLDX | sizeW | modeLEN,
		classLD | sizeW | modeIND, classLD | sizeH | modeIND, classLD | sizeB | modeIND,
		classLDX | sizeB | modeMSH, classLD | modeIMM, classLDX | modeIMM,
		classLD | modeMEM, classLDX | modeMEM, classST, classSTX,
		classJMP | jmpJA,
		classJMP | jmpJGT | srcK, classJMP | jmpJGE | srcK, classJMP | jmpJEQ | srcK, classJMP | jmpJSET | srcK,
		classJMP | jmpJGT | srcX, classJMP | jmpJGE | srcX, classJMP | jmpJEQ | srcX, classJMP | jmpJSET | srcX,
		classALU | aluNEG, classMISC | miscTAX, classMISC | miscTXA:
		return true
	}
	// ALU operations with K or X: op | src | class covers all 8 bits.
	if code&0x07 == classALU && code <= 0xff {
		switch code & 0xf0 {
		case aluADD, aluSUB, aluMUL, aluDIV, aluMOD, aluAND, aluOR, aluXOR, aluLSH, aluRSH:
			return true
		}
	}
	return false
}

// validate checks insns the way libpcap's validator (pcapint_validate_filter
// in current libpcap) does: every opcode one the interpreter executes,
// scratch memory indices below 16, no division or modulo by constant 0, no
// constant shift by more than 31, every jump inside the program (a ja may
// go backwards, as protochain's do, but not to itself), and a return last.
func validate(insns []Instruction) error {
	n := len(insns)
	if n == 0 {
		return errEmpty
	}
	if n > MaxInstructions {
		return fmt.Errorf("bpf: program of %d instructions is longer than %d", n, MaxInstructions)
	}
	for i, in := range insns {
		bad := func(format string, a ...any) error {
			return fmt.Errorf("bpf: instruction %d (%s): %s", i, in, fmt.Sprintf(format, a...))
		}
		if !validCode(in.Code) {
			return bad("invalid opcode 0x%02x", in.Code)
		}
		switch in.Code {
		case classLD | modeMEM, classLDX | modeMEM, classST, classSTX:
			if in.K >= MemWords {
				return bad("scratch memory index %d out of range (0-%d)", in.K, MemWords-1)
			}
		case classALU | aluDIV | srcK, classALU | aluMOD | srcK:
			if in.K == 0 {
				return bad("division by constant 0")
			}
		case classALU | aluLSH | srcK, classALU | aluRSH | srcK:
			if in.K >= 32 {
				return bad("constant shift by more than 31 bits")
			}
		}
		if in.Code&0x07 != classJMP {
			continue
		}
		from := uint32(i) + 1
		if in.Code == classJMP|jmpJA {
			// uint32 arithmetic, as in libpcap: a backward jump is a k
			// that wraps around.
			if from+in.K >= uint32(n) {
				return bad("jump target out of range")
			}
			if int32(in.K) == -1 {
				return bad("jump to itself (infinite loop)")
			}
			continue
		}
		if int(from)+int(in.Jt) >= n || int(from)+int(in.Jf) >= n {
			return bad("jump target out of range")
		}
	}
	if insns[n-1].Code&0x07 != classRET {
		return fmt.Errorf("bpf: program does not end with a return (instruction %d is %s)", n-1, insns[n-1])
	}
	return nil
}

// Load validates insns like libpcap's bpf_validate and pre-decodes them
// into a Program: absolute jump targets, jumps to a forward ja threaded to
// its destination, and the most frequent instruction pairs and triples of
// libpcap's output fused into superinstructions.
func Load(insns []Instruction) (*Program, error) { return load(insns, true) }

// load is Load; with optimize false it decodes one to one (the tests run
// both forms, so that every plain operation is checked on real programs).
func load(insns []Instruction, optimize bool) (*Program, error) {
	if err := validate(insns); err != nil {
		return nil, err
	}
	p := &Program{orig: append([]Instruction(nil), insns...), code: make([]insn, len(insns))}
	for i, in := range insns {
		p.code[i] = decode(in, uint32(i))
		if in.Code == classJMP|jmpJA && int32(in.K) < 0 {
			p.back = true
		}
	}
	if optimize {
		p.thread()
		p.fuse()
	}
	return p, nil
}

// decode translates instruction i one to one.
func decode(in Instruction, i uint32) insn {
	d := insn{k: in.K, jt: i + 1 + uint32(in.Jt), jf: i + 1 + uint32(in.Jf)}
	switch in.Code {
	case classRET | retK:
		d.op = opRetK
	case classRET | retA:
		d.op = opRetA
	case classLD | sizeW | modeABS:
		d.op = opLdAbsW
	case classLD | sizeH | modeABS:
		d.op = opLdAbsH
	case classLD | sizeB | modeABS:
		d.op = opLdAbsB
	case classLD | sizeW | modeIND:
		d.op = opLdIndW
	case classLD | sizeH | modeIND:
		d.op = opLdIndH
	case classLD | sizeB | modeIND:
		d.op = opLdIndB
	case classLD | sizeW | modeLEN:
		d.op = opLdLen
	case classLDX | sizeW | modeLEN:
		d.op = opLdxLen
	case classLDX | sizeB | modeMSH:
		d.op = opLdxMsh
	case classLD | modeIMM:
		d.op = opLdImm
	case classLDX | modeIMM:
		d.op = opLdxImm
	case classLD | modeMEM:
		d.op = opLdMem
	case classLDX | modeMEM:
		d.op = opLdxMem
	case classST:
		d.op = opSt
	case classSTX:
		d.op = opStx
	case classJMP | jmpJA:
		d.jt = i + 1 + in.K // wraps for a backward jump
		d.jf = d.jt
		d.op = opJa
		if int32(in.K) < 0 {
			d.op = opJaBack
		}
	case classJMP | jmpJGT | srcK:
		d.op = opJgtK
	case classJMP | jmpJGE | srcK:
		d.op = opJgeK
	case classJMP | jmpJEQ | srcK:
		d.op = opJeqK
	case classJMP | jmpJSET | srcK:
		d.op = opJsetK
	case classJMP | jmpJGT | srcX:
		d.op = opJgtX
	case classJMP | jmpJGE | srcX:
		d.op = opJgeX
	case classJMP | jmpJEQ | srcX:
		d.op = opJeqX
	case classJMP | jmpJSET | srcX:
		d.op = opJsetX
	case classALU | aluNEG:
		d.op = opNeg
	case classMISC | miscTAX:
		d.op = opTax
	case classMISC | miscTXA:
		d.op = opTxa
	default: // ALU with K or X (validated)
		base := opAddK
		if in.Code&srcX != 0 {
			base = opAddX
		}
		d.op = base + aluIndex[in.Code>>4]
	}
	return d
}

// aluIndex maps an ALU operation (code>>4) to its place in the
// opAddK…opRshK and opAddX…opRshX runs.
var aluIndex = [16]uint8{
	aluADD >> 4: 0, aluSUB >> 4: 1, aluMUL >> 4: 2, aluDIV >> 4: 3, aluMOD >> 4: 4,
	aluAND >> 4: 5, aluOR >> 4: 6, aluXOR >> 4: 7, aluLSH >> 4: 8, aluRSH >> 4: 9,
}

// isCond reports whether op is a conditional jump.
func isCond(op uint8) bool { return op >= opJgtK && op <= opJsetX }

// thread redirects every jump whose target is a forward ja to where that ja
// goes (a forward ja changes no state). Backward ja are left alone: they
// are what the loop budget counts.
func (p *Program) thread() {
	final := func(t uint32) uint32 {
		for p.code[t].op == opJa {
			t = p.code[t].jt
			p.stats.threaded++
		}
		return t
	}
	for i := range p.code {
		d := &p.code[i]
		if isCond(d.op) || d.op == opJa || d.op == opJaBack {
			d.jt, d.jf = final(d.jt), final(d.jf)
		}
	}
}

// fuse turns common sequences into superinstructions. It works backwards so
// that a fused pair at i+1 is visible when i is considered, and it leaves
// code[i+1…] in place: only the entry at i changes.
func (p *Program) fuse() {
	c := p.code
	n := len(c)
	for i := n - 2; i >= 0; i-- {
		b := c[i+1]
		switch c[i].op {
		case opLdAbsW, opLdAbsH, opLdAbsB, opLdIndW, opLdIndH, opLdIndB:
			if isCondK(b.op) {
				c[i] = insn{op: loadJmpOp(c[i].op, b.op), k: c[i].k, c: b.k, jt: b.jt, jf: b.jf}
				p.stats.fused++
				continue
			}
			if (c[i].op == opLdAbsH || c[i].op == opLdAbsB) && b.op == opAndK && i+2 < n && c[i+2].op == opJeqK {
				j := c[i+2]
				op := opLdAbsHAndJeq
				if c[i].op == opLdAbsB {
					op = opLdAbsBAndJeq
				}
				c[i] = insn{op: op, k: c[i].k, k2: b.k, c: j.k, jt: j.jt, jf: j.jf}
				p.stats.fused++
			}
		case opLdxMsh:
			switch b.op {
			case opLdIndW, opLdIndH, opLdIndB:
				c[i] = insn{op: opMshLdW + (b.op - opLdIndW), k: c[i].k, k2: b.k}
				p.stats.fused++
			case opLdIndHJeq, opLdIndHJset, opLdIndBJeq, opLdIndBJset:
				op := map[uint8]uint8{opLdIndHJeq: opMshLdHJeq, opLdIndHJset: opMshLdHJset,
					opLdIndBJeq: opMshLdBJeq, opLdIndBJset: opMshLdBJset}[b.op]
				c[i] = insn{op: op, k: c[i].k, k2: b.k, c: b.c, jt: b.jt, jf: b.jf}
				p.stats.fused++
			case opLdIndWJgt, opLdIndWJge, opLdIndWJeq, opLdIndWJset,
				opLdIndHJgt, opLdIndHJge, opLdIndBJgt, opLdIndBJge:
				// msh + the plain load; the fused load+jump at i+1 runs next.
				c[i] = insn{op: opMshLdW + (loadOfFused(b.op) - opLdIndW), k: c[i].k, k2: b.k}
				p.stats.fused++
			}
		}
	}
}

// isCondK reports whether op compares A with a constant.
func isCondK(op uint8) bool { return op >= opJgtK && op <= opJsetK }

// loadJmpOp returns the superinstruction for load op ld followed by the
// conditional jump j (both plain).
func loadJmpOp(ld, j uint8) uint8 {
	var base uint8
	switch ld {
	case opLdAbsW:
		base = opLdAbsWJgt
	case opLdAbsH:
		base = opLdAbsHJgt
	case opLdAbsB:
		base = opLdAbsBJgt
	case opLdIndW:
		base = opLdIndWJgt
	case opLdIndH:
		base = opLdIndHJgt
	case opLdIndB:
		base = opLdIndBJgt
	}
	return base + (j - opJgtK)
}

// loadOfFused returns the plain indirect load a fused indirect load+jump
// starts with.
func loadOfFused(op uint8) uint8 {
	return opLdIndW + (op-opLdIndWJgt)/4
}
