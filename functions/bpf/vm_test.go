package bpf

import (
	"encoding/binary"
	"math/rand"
	"strings"
	"testing"
	"time"
)

// Mnemonic opcodes for hand-written programs.
const (
	ldW   = classLD | sizeW | modeABS
	ldH   = classLD | sizeH | modeABS
	ldB   = classLD | sizeB | modeABS
	ldWX  = classLD | sizeW | modeIND
	ldHX  = classLD | sizeH | modeIND
	ldBX  = classLD | sizeB | modeIND
	ldLen = classLD | sizeW | modeLEN
	ldxLn = classLDX | sizeW | modeLEN
	ldMsh = classLDX | sizeB | modeMSH
	ldImm = classLD | modeIMM
	ldxIm = classLDX | modeIMM
	ldMem = classLD | modeMEM
	ldxMm = classLDX | modeMEM
	st    = classST
	stx   = classSTX
	ja    = classJMP | jmpJA
	jgtK  = classJMP | jmpJGT | srcK
	jgeK  = classJMP | jmpJGE | srcK
	jeqK  = classJMP | jmpJEQ | srcK
	jsetK = classJMP | jmpJSET | srcK
	jgtX  = classJMP | jmpJGT | srcX
	jgeX  = classJMP | jmpJGE | srcX
	jeqX  = classJMP | jmpJEQ | srcX
	jsetX = classJMP | jmpJSET | srcX
	retKc = classRET | retK
	retAc = classRET | retA
	tax   = classMISC | miscTAX
	txa   = classMISC | miscTXA
	neg   = classALU | aluNEG
)

func aluK(op uint16) uint16 { return classALU | op | srcK }
func aluX(op uint16) uint16 { return classALU | op | srcX }

// s and j build instructions like BPF_STMT and BPF_JUMP.
func s(code uint16, k uint32) Instruction { return Instruction{Code: code, K: k} }
func j(code uint16, k uint32, jt, jf uint8) Instruction {
	return Instruction{Code: code, Jt: jt, Jf: jf, K: k}
}

var (
	rA   = s(retAc, 0)
	back = func(n int) uint32 { return uint32(-int32(n)) } // ja k for n instructions back from the next
)

type vmCase struct {
	name string
	prog []Instruction
	pkt  []byte
	wire uint32 // 0: len(pkt)
	want uint32
}

var pkt8 = []byte{0x01, 0x02, 0x03, 0x04, 0x45, 0x86, 0xdd, 0xff}

var vmCases = []vmCase{
	{"ret k", []Instruction{s(retKc, 42)}, nil, 0, 42},
	{"ret a zero", []Instruction{rA}, nil, 0, 0},
	{"ret huge", []Instruction{s(retKc, 0xffffffff)}, pkt8, 0, 0xffffffff},

	// Absolute loads at and one past the captured length.
	{"ld w", []Instruction{s(ldW, 0), rA}, pkt8, 0, 0x01020304},
	{"ld w last", []Instruction{s(ldW, 4), rA}, pkt8, 0, 0x4586ddff},
	{"ld w past", []Instruction{s(ldW, 5), s(retKc, 1)}, pkt8, 0, 0},
	{"ld w huge k", []Instruction{s(ldW, 0xfffffffe), s(retKc, 1)}, pkt8, 0, 0},
	{"ld h", []Instruction{s(ldH, 5), rA}, pkt8, 0, 0x86dd},
	{"ld h last", []Instruction{s(ldH, 6), rA}, pkt8, 0, 0xddff},
	{"ld h past", []Instruction{s(ldH, 7), s(retKc, 1)}, pkt8, 0, 0},
	{"ld h huge k", []Instruction{s(ldH, 0xffffffff), s(retKc, 1)}, pkt8, 0, 0},
	{"ld b last", []Instruction{s(ldB, 7), rA}, pkt8, 0, 0xff},
	{"ld b past", []Instruction{s(ldB, 8), s(retKc, 1)}, pkt8, 0, 0},
	{"ld b empty", []Instruction{s(ldB, 0), s(retKc, 1)}, []byte{}, 0, 0},
	{"ld past wire ok", []Instruction{s(ldB, 7), rA}, pkt8, 4, 0xff},
	{"ld past capture not wire", []Instruction{s(ldB, 8), s(retKc, 1)}, pkt8, 100, 0},

	// Indirect loads.
	{"ld [x+k] w", []Instruction{s(ldxIm, 2), s(ldWX, 2), rA}, pkt8, 0, 0x4586ddff},
	{"ld [x+k] w past", []Instruction{s(ldxIm, 2), s(ldWX, 3), s(retKc, 1)}, pkt8, 0, 0},
	{"ld [x+k] h last", []Instruction{s(ldxIm, 3), s(ldHX, 3), rA}, pkt8, 0, 0xddff},
	{"ld [x+k] h past", []Instruction{s(ldxIm, 3), s(ldHX, 4), s(retKc, 1)}, pkt8, 0, 0},
	{"ld [x+k] b last", []Instruction{s(ldxIm, 7), s(ldBX, 0), rA}, pkt8, 0, 0xff},
	{"ld [x+k] b past", []Instruction{s(ldxIm, 7), s(ldBX, 1), s(retKc, 1)}, pkt8, 0, 0},
	{"ld [x+k] wraps", []Instruction{s(ldxIm, 0xffffffff), s(ldBX, 1), s(retKc, 1)}, pkt8, 0, 0},
	{"ld [x+k] h wraps", []Instruction{s(ldxIm, 0xfffffffe), s(ldHX, 2), s(retKc, 1)}, pkt8, 0, 0},
	{"ld [x+k] w wraps", []Instruction{s(ldxIm, 0xfffffffc), s(ldWX, 4), s(retKc, 1)}, pkt8, 0, 0},

	// Lengths: len is the wire length, not the captured one.
	{"ld len", []Instruction{s(ldLen, 0), rA}, pkt8, 1500, 1500},
	{"ldx len", []Instruction{s(ldxLn, 0), s(txa, 0), rA}, pkt8, 9000, 9000},

	// ldxb 4*([k]&0xf).
	{"msh", []Instruction{s(ldMsh, 4), s(txa, 0), rA}, pkt8, 0, 20},
	{"msh last", []Instruction{s(ldMsh, 7), s(txa, 0), rA}, pkt8, 0, 60},
	{"msh past", []Instruction{s(ldMsh, 8), s(retKc, 1)}, pkt8, 0, 0},
	{"msh + ldh [x+k]", []Instruction{s(ldMsh, 4), s(ldHX, 0xfffffff2), rA}, make([]byte, 30), 0, 0},
	{"msh + ldh [x+k] last", []Instruction{s(ldMsh, 0), s(ldHX, 1), rA}, []byte{0x41, 0, 0, 0, 0, 0xab, 0xcd}, 0, 0xabcd},
	{"msh + ldh [x+k] past", []Instruction{s(ldMsh, 0), s(ldHX, 2), s(retKc, 1)}, []byte{0x41, 0, 0, 0, 0, 0xab, 0xcd}, 0, 0},

	// Immediates and scratch memory (starts at 0).
	{"ld imm", []Instruction{s(ldImm, 77), rA}, nil, 0, 77},
	{"ldx imm", []Instruction{s(ldxIm, 78), s(txa, 0), rA}, nil, 0, 78},
	{"mem starts at zero (uninitialised in libpcap 1.10)", []Instruction{s(ldMem, 5), rA}, nil, 0, 0},
	{"st ld", []Instruction{s(ldImm, 9), s(st, 15), s(ldImm, 0), s(ldMem, 15), rA}, nil, 0, 9},
	{"stx ldx", []Instruction{s(ldxIm, 11), s(stx, 0), s(ldxIm, 0), s(ldxMm, 0), s(txa, 0), rA}, nil, 0, 11},
	{"mem independent", []Instruction{s(ldImm, 1), s(st, 1), s(ldImm, 2), s(st, 2), s(ldMem, 1), rA}, nil, 0, 1},

	// ALU with K.
	{"add k wraps", []Instruction{s(ldImm, 0xffffffff), s(aluK(aluADD), 2), rA}, nil, 0, 1},
	{"sub k wraps", []Instruction{s(ldImm, 1), s(aluK(aluSUB), 2), rA}, nil, 0, 0xffffffff},
	{"mul k wraps", []Instruction{s(ldImm, 0x10000), s(aluK(aluMUL), 0x10001), rA}, nil, 0, 0x10000},
	{"div k", []Instruction{s(ldImm, 100), s(aluK(aluDIV), 7), rA}, nil, 0, 14},
	{"mod k", []Instruction{s(ldImm, 100), s(aluK(aluMOD), 7), rA}, nil, 0, 2},
	{"and k", []Instruction{s(ldImm, 0xf0f0), s(aluK(aluAND), 0xff00), rA}, nil, 0, 0xf000},
	{"or k", []Instruction{s(ldImm, 0xf0f0), s(aluK(aluOR), 0x0f00), rA}, nil, 0, 0xfff0},
	{"xor k", []Instruction{s(ldImm, 0xf0f0), s(aluK(aluXOR), 0xffff), rA}, nil, 0, 0x0f0f},
	{"lsh k", []Instruction{s(ldImm, 0x80000001), s(aluK(aluLSH), 31), rA}, nil, 0, 0x80000000},
	{"rsh k", []Instruction{s(ldImm, 0x80000000), s(aluK(aluRSH), 31), rA}, nil, 0, 1},
	{"neg", []Instruction{s(ldImm, 5), s(neg, 0), rA}, nil, 0, 0xfffffffb},
	{"neg min", []Instruction{s(ldImm, 0x80000000), s(neg, 0), rA}, nil, 0, 0x80000000},

	// ALU with X.
	{"add x", []Instruction{s(ldxIm, 3), s(ldImm, 4), s(aluX(aluADD), 0), rA}, nil, 0, 7},
	{"sub x", []Instruction{s(ldxIm, 3), s(ldImm, 4), s(aluX(aluSUB), 0), rA}, nil, 0, 1},
	{"mul x", []Instruction{s(ldxIm, 3), s(ldImm, 4), s(aluX(aluMUL), 0), rA}, nil, 0, 12},
	{"div x", []Instruction{s(ldxIm, 3), s(ldImm, 10), s(aluX(aluDIV), 0), rA}, nil, 0, 3},
	{"div x zero", []Instruction{s(ldxIm, 0), s(ldImm, 10), s(aluX(aluDIV), 0), s(retKc, 1)}, nil, 0, 0},
	{"mod x", []Instruction{s(ldxIm, 3), s(ldImm, 10), s(aluX(aluMOD), 0), rA}, nil, 0, 1},
	{"mod x zero", []Instruction{s(ldxIm, 0), s(ldImm, 10), s(aluX(aluMOD), 0), s(retKc, 1)}, nil, 0, 0},
	{"and x", []Instruction{s(ldxIm, 6), s(ldImm, 3), s(aluX(aluAND), 0), rA}, nil, 0, 2},
	{"or x", []Instruction{s(ldxIm, 6), s(ldImm, 3), s(aluX(aluOR), 0), rA}, nil, 0, 7},
	{"xor x", []Instruction{s(ldxIm, 6), s(ldImm, 3), s(aluX(aluXOR), 0), rA}, nil, 0, 5},
	{"lsh x", []Instruction{s(ldxIm, 4), s(ldImm, 3), s(aluX(aluLSH), 0), rA}, nil, 0, 48},
	{"lsh x 31", []Instruction{s(ldxIm, 31), s(ldImm, 3), s(aluX(aluLSH), 0), rA}, nil, 0, 0x80000000},
	{"lsh x 32", []Instruction{s(ldxIm, 32), s(ldImm, 3), s(aluX(aluLSH), 0), rA}, nil, 0, 0},
	{"lsh x 33", []Instruction{s(ldxIm, 33), s(ldImm, 3), s(aluX(aluLSH), 0), rA}, nil, 0, 0},
	{"rsh x", []Instruction{s(ldxIm, 4), s(ldImm, 48), s(aluX(aluRSH), 0), rA}, nil, 0, 3},
	{"rsh x 32", []Instruction{s(ldxIm, 32), s(ldImm, 0xffffffff), s(aluX(aluRSH), 0), rA}, nil, 0, 0},
	{"tax txa", []Instruction{s(ldImm, 9), s(tax, 0), s(ldImm, 1), s(txa, 0), rA}, nil, 0, 9},

	// Jumps: both branches of every comparison, with K and with X.
	{"ja", []Instruction{s(ja, 1), s(retKc, 1), s(retKc, 2)}, nil, 0, 2},
	{"jgt k t", []Instruction{s(ldImm, 5), j(jgtK, 4, 0, 1), s(retKc, 1), s(retKc, 2)}, nil, 0, 1},
	{"jgt k f", []Instruction{s(ldImm, 4), j(jgtK, 4, 0, 1), s(retKc, 1), s(retKc, 2)}, nil, 0, 2},
	{"jge k t", []Instruction{s(ldImm, 4), j(jgeK, 4, 0, 1), s(retKc, 1), s(retKc, 2)}, nil, 0, 1},
	{"jge k f", []Instruction{s(ldImm, 3), j(jgeK, 4, 0, 1), s(retKc, 1), s(retKc, 2)}, nil, 0, 2},
	{"jeq k t", []Instruction{s(ldImm, 4), j(jeqK, 4, 0, 1), s(retKc, 1), s(retKc, 2)}, nil, 0, 1},
	{"jeq k f", []Instruction{s(ldImm, 5), j(jeqK, 4, 0, 1), s(retKc, 1), s(retKc, 2)}, nil, 0, 2},
	{"jset k t", []Instruction{s(ldImm, 6), j(jsetK, 4, 0, 1), s(retKc, 1), s(retKc, 2)}, nil, 0, 1},
	{"jset k f", []Instruction{s(ldImm, 3), j(jsetK, 4, 0, 1), s(retKc, 1), s(retKc, 2)}, nil, 0, 2},
	{"jgt x t", []Instruction{s(ldxIm, 4), s(ldImm, 5), j(jgtX, 0, 0, 1), s(retKc, 1), s(retKc, 2)}, nil, 0, 1},
	{"jgt x f", []Instruction{s(ldxIm, 5), s(ldImm, 5), j(jgtX, 0, 0, 1), s(retKc, 1), s(retKc, 2)}, nil, 0, 2},
	{"jge x t", []Instruction{s(ldxIm, 5), s(ldImm, 5), j(jgeX, 0, 0, 1), s(retKc, 1), s(retKc, 2)}, nil, 0, 1},
	{"jge x f", []Instruction{s(ldxIm, 6), s(ldImm, 5), j(jgeX, 0, 0, 1), s(retKc, 1), s(retKc, 2)}, nil, 0, 2},
	{"jeq x t", []Instruction{s(ldxIm, 5), s(ldImm, 5), j(jeqX, 0, 0, 1), s(retKc, 1), s(retKc, 2)}, nil, 0, 1},
	{"jeq x f", []Instruction{s(ldxIm, 6), s(ldImm, 5), j(jeqX, 0, 0, 1), s(retKc, 1), s(retKc, 2)}, nil, 0, 2},
	{"jset x t", []Instruction{s(ldxIm, 4), s(ldImm, 5), j(jsetX, 0, 0, 1), s(retKc, 1), s(retKc, 2)}, nil, 0, 1},
	{"jset x f", []Instruction{s(ldxIm, 2), s(ldImm, 5), j(jsetX, 0, 0, 1), s(retKc, 1), s(retKc, 2)}, nil, 0, 2},
	{"jump over ja chain", []Instruction{s(ldImm, 1), j(jeqK, 1, 0, 1), s(ja, 1), s(retKc, 9), s(ja, 0), s(retKc, 7)}, nil, 0, 7},

	// Superinstructions, and jumps into the middle of one.
	{"ldh jeq t", []Instruction{s(ldH, 5), j(jeqK, 0x86dd, 0, 1), s(retKc, 1), s(retKc, 2)}, pkt8, 0, 1},
	{"ldh jeq past", []Instruction{s(ldH, 7), j(jeqK, 0x86dd, 0, 1), s(retKc, 1), s(retKc, 2)}, pkt8, 0, 0},
	{"ldb jgt", []Instruction{s(ldB, 7), j(jgtK, 0xfe, 0, 1), s(retKc, 1), s(retKc, 2)}, pkt8, 0, 1},
	{"ld jge", []Instruction{s(ldW, 0), j(jgeK, 0x01020305, 0, 1), s(retKc, 1), s(retKc, 2)}, pkt8, 0, 2},
	{"ldb jset keeps A", []Instruction{s(ldB, 4), j(jsetK, 0x40, 0, 1), rA, s(retKc, 2)}, pkt8, 0, 0x45},
	{"ldh [x+k] jeq", []Instruction{s(ldxIm, 1), s(ldHX, 4), j(jeqK, 0x86dd, 0, 1), s(retKc, 1), s(retKc, 2)}, pkt8, 0, 1},
	{"ldb [x+k] jset past", []Instruction{s(ldxIm, 1), s(ldBX, 7), j(jsetK, 1, 0, 1), s(retKc, 1), s(retKc, 2)}, pkt8, 0, 0},
	{"msh ldh jeq", []Instruction{s(ldMsh, 0), s(ldHX, 0), j(jeqK, 0xabcd, 0, 1), s(retKc, 1), s(retKc, 2)}, []byte{0x41, 0, 0, 0, 0xab, 0xcd}, 0, 1},
	{"msh ldb jset keeps X", []Instruction{s(ldMsh, 0), s(ldBX, 1), j(jsetK, 0x80, 0, 1), s(txa, 0), rA}, []byte{0x41, 0, 0, 0, 0xab, 0xcd}, 0, 4},
	{"msh ldh jgt", []Instruction{s(ldMsh, 0), s(ldHX, 0), j(jgtK, 0xabcd, 0, 1), s(retKc, 1), rA}, []byte{0x41, 0, 0, 0, 0xab, 0xcd}, 0, 0xabcd},
	{"msh ld", []Instruction{s(ldMsh, 0), s(ldWX, 0), rA}, []byte{0x41, 0, 0, 0, 1, 2, 3, 4}, 0, 0x01020304},
	{"ldh and jeq", []Instruction{s(ldH, 5), s(aluK(aluAND), 0xff00), j(jeqK, 0x8600, 0, 1), rA, s(retKc, 2)}, pkt8, 0, 0x8600},
	{"ldb and jeq f", []Instruction{s(ldB, 7), s(aluK(aluAND), 0x0f), j(jeqK, 0x0e, 0, 1), s(retKc, 1), rA}, pkt8, 0, 0x0f},
	{"jump into fused pair", []Instruction{
		s(ldImm, 0x86dd), j(jeqK, 0x86dd, 1, 0), // to the jeq of the pair with A = 0x86dd
		s(ldH, 0), j(jeqK, 0x86dd, 0, 1), s(retKc, 1), s(retKc, 2)}, pkt8, 0, 1},
	{"jump into fused triple", []Instruction{
		s(ldxIm, 2), j(jeqK, 0, 1, 0), // A = 0: to the ldh [x+k] of msh+ldh+jeq with X = 2
		s(ldMsh, 0), s(ldHX, 3), j(jeqK, 0x86dd, 0, 1), s(retKc, 1), s(retKc, 2)}, pkt8, 0, 1},
	{"jump into and+jeq", []Instruction{
		s(ldImm, 0xff), j(jeqK, 0xff, 1, 0), // to the and of ldb+and+jeq with A = 0xff
		s(ldB, 0), s(aluK(aluAND), 0xf0), j(jeqK, 0xf0, 0, 1), s(retKc, 1), s(retKc, 2)}, pkt8, 0, 1},

	// Backward jumps: a loop X = 5 … 1, A += X.
	{"loop", []Instruction{
		s(ldxIm, 5), s(ldImm, 0), s(st, 0), // X = 5, M[0] = 0
		s(ldMem, 0), s(aluX(aluADD), 0), s(st, 0), // loop: M[0] += X
		s(txa, 0), s(aluK(aluSUB), 1), s(tax, 0), // X--
		j(jeqK, 0, 1, 0), s(ja, back(8)), // while X != 0
		s(ldMem, 0), rA}, nil, 0, 15},
	{"infinite loop", []Instruction{s(ldImm, 1), s(aluK(aluADD), 1), s(ja, back(2)), rA}, nil, 0, 0},
	{"infinite loop big packet", []Instruction{s(ldImm, 1), s(aluK(aluADD), 1), s(ja, back(2)), rA}, make([]byte, 1500), 0, 0},
}

// countLoop makes exactly n backward jumps, then returns 1.
func countLoop(n uint32) []Instruction {
	return []Instruction{
		s(ldImm, n),
		j(jeqK, 0, 2, 0), s(aluK(aluSUB), 1), s(ja, back(3)),
		s(retKc, 1),
	}
}

func runBoth(t *testing.T, name string, prog []Instruction, pkt []byte, wire uint32) uint32 {
	t.Helper()
	p, err := Load(prog)
	if err != nil {
		t.Fatalf("%s: Load: %v", name, err)
	}
	q, err := load(prog, false)
	if err != nil {
		t.Fatal(err)
	}
	got, plain := p.Run(pkt, wire), q.Run(pkt, wire)
	if got != plain {
		t.Errorf("%s: %d with superinstructions, %d without", name, got, plain)
	}
	return got
}

func TestRun(t *testing.T) {
	for _, c := range vmCases {
		wire := c.wire
		if wire == 0 {
			wire = uint32(len(c.pkt))
		}
		if got := runBoth(t, c.name, c.prog, c.pkt, wire); got != c.want {
			t.Errorf("%s: got %d (%#x), want %d (%#x)\n%s", c.name, got, got, c.want, c.want, Disassemble(c.prog))
		}
	}
}

// TestRunMatchesLibpcap runs the hand-written programs through libpcap's
// interpreter too, so that the expectations above are libpcap's.
func TestRunMatchesLibpcap(t *testing.T) {
	for _, c := range vmCases {
		if strings.HasPrefix(c.name, "infinite") || strings.Contains(c.name, "uninitialised") {
			continue // libpcap 1.10 would never return, or return garbage
		}
		wire := c.wire
		if wire == 0 {
			wire = uint32(len(c.pkt))
		}
		op := oracleProgram(t, c.prog)
		if !op.Valid() {
			t.Errorf("%s: libpcap's bpf_validate rejects the program", c.name)
		}
		if lib := op.Filter(c.pkt, wire); lib != c.want {
			t.Errorf("%s: libpcap returns %d, the test expects %d", c.name, lib, c.want)
		}
	}
}

func TestLoopBudget(t *testing.T) {
	for _, size := range []int{0, 1, 100, 1514} {
		pkt := make([]byte, size)
		budget := uint32(BackJumpBase + 2*size)
		if got := runBoth(t, "budget", countLoop(budget), pkt, uint32(size)); got != 1 {
			t.Errorf("caplen %d: %d backward jumps rejected, want allowed", size, budget)
		}
		if got := runBoth(t, "budget+1", countLoop(budget+1), pkt, uint32(size)); got != 0 {
			t.Errorf("caplen %d: %d backward jumps allowed, want rejected", size, budget+1)
		}
		// libpcap 1.10 agrees below the budget.
		if lib := oracleProgram(t, countLoop(budget)).Filter(pkt, uint32(size)); lib != 1 {
			t.Errorf("caplen %d: libpcap returns %d", size, lib)
		}
	}
	// A hostile loop on a maximal capture is cut short: after the budget
	// checked above (about 1 ms here, 100-400 ms under the race detector
	// on a loaded machine); without it, it would never return.
	prog := []Instruction{s(ldImm, 1), s(aluK(aluADD), 1), s(ja, back(2)), rA}
	p, _ := Load(prog)
	big := make([]byte, DefaultSnaplen)
	start := time.Now()
	if got := p.Run(big, uint32(len(big))); got != 0 {
		t.Fatalf("got %d", got)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("budget on %d bytes took %v", len(big), d)
	}
}

func TestLoadRejects(t *testing.T) {
	cases := []struct {
		name string
		prog []Instruction
		msg  string
	}{
		{"empty", nil, "empty program"},
		{"no return", []Instruction{s(ldImm, 1)}, "does not end with a return"},
		{"bad opcode", []Instruction{s(0xff, 0), s(retKc, 0)}, "invalid opcode 0xff"},
		{"ret x", []Instruction{s(classRET|0x08, 0)}, "invalid opcode 0x0e"},
		{"ldx abs", []Instruction{s(classLDX|sizeW|modeABS, 0), s(retKc, 0)}, "invalid opcode"},
		{"ldx h msh", []Instruction{s(classLDX|sizeH|modeMSH, 0), s(retKc, 0)}, "invalid opcode"},
		{"neg x", []Instruction{s(neg|srcX, 0), s(retKc, 0)}, "invalid opcode"},
		{"alu 0xf0", []Instruction{s(classALU|0xf0, 0), s(retKc, 0)}, "invalid opcode"},
		{"jmp 0x50", []Instruction{s(classJMP|0x50, 0), s(retKc, 0)}, "invalid opcode"},
		{"st 16", []Instruction{s(st, 16), s(retKc, 0)}, "scratch memory index 16"},
		{"ld M[99]", []Instruction{s(ldMem, 99), s(retKc, 0)}, "scratch memory index 99"},
		{"ldx M[16]", []Instruction{s(ldxMm, 16), s(retKc, 0)}, "scratch memory"},
		{"stx 16", []Instruction{s(stx, 16), s(retKc, 0)}, "scratch memory"},
		{"div 0", []Instruction{s(aluK(aluDIV), 0), s(retKc, 0)}, "division by constant 0"},
		{"mod 0", []Instruction{s(aluK(aluMOD), 0), s(retKc, 0)}, "division by constant 0"},
		{"lsh 32", []Instruction{s(aluK(aluLSH), 32), s(retKc, 0)}, "shift"},
		{"rsh 99", []Instruction{s(aluK(aluRSH), 99), s(retKc, 0)}, "shift"},
		{"ja past end", []Instruction{s(ja, 1), s(retKc, 0)}, "out of range"},
		{"ja before start", []Instruction{s(retKc, 0), s(ja, back(3)), s(retKc, 0)}, "out of range"},
		{"ja self", []Instruction{s(retKc, 0), s(ja, back(1)), s(retKc, 0)}, "itself"},
		{"jeq jt past end", []Instruction{j(jeqK, 0, 1, 0), s(retKc, 0)}, "out of range"},
		{"jeq jf past end", []Instruction{j(jeqK, 0, 0, 1), s(retKc, 0)}, "out of range"},
		{"jset x jf 255", []Instruction{j(jsetX, 0, 0, 255), s(retKc, 0)}, "out of range"},
	}
	for _, c := range cases {
		_, err := Load(c.prog)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: err = %v, want it to mention %q", c.name, err, c.msg)
		}
	}
	if _, err := Load(make([]Instruction, MaxInstructions+1)); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("oversized program: %v", err)
	}
	// Boundaries that are fine.
	for _, prog := range [][]Instruction{
		{s(st, 15), s(ldMem, 15), s(retKc, 0)},
		{s(aluK(aluLSH), 31), s(aluK(aluDIV), 1), s(retKc, 0)},
		{j(jeqK, 0, 0, 0), s(retKc, 0)},
		{s(retKc, 0), s(ja, back(2)), s(retKc, 0)}, // to the start
		{rA},
	} {
		if _, err := Load(prog); err != nil {
			t.Errorf("%s: %v", Disassemble(prog), err)
		}
	}
}

// randomProgram returns a random program Load accepts, with backward jumps
// when back is set.
func randomProgram(rng *rand.Rand, back bool) []Instruction {
	var codes []uint16
	for c := 0; c < 0x100; c++ {
		if validCode(uint16(c)) && c&0x07 != classRET {
			codes = append(codes, uint16(c))
		}
	}
	n := 2 + rng.Intn(24)
	prog := make([]Instruction, n)
	for i := 0; i < n-1; i++ {
		in := Instruction{Code: codes[rng.Intn(len(codes))]}
		switch {
		case in.Code == ldMem || in.Code == ldxMm || in.Code == st || in.Code == stx:
			in.K = uint32(rng.Intn(MemWords))
		case in.Code == aluK(aluLSH) || in.Code == aluK(aluRSH):
			in.K = uint32(rng.Intn(32))
		case in.Code&0x07 == classALU && in.Code&srcX == 0 && (in.Code&0xf0 == aluDIV || in.Code&0xf0 == aluMOD):
			in.K = uint32(1 + rng.Intn(9))
		case in.Code == ja:
			if back && i > 0 && rng.Intn(2) == 0 {
				in.K = uint32(int32(rng.Intn(i) - (i + 1))) // to an earlier instruction
			} else {
				in.K = uint32(rng.Intn(n - i - 1))
			}
		case in.Code&0x07 == classJMP:
			in.Jt, in.Jf = uint8(rng.Intn(n-i-1)), uint8(rng.Intn(n-i-1))
			in.K = randK(rng)
		case in.Code&0xe0 == modeABS || in.Code&0xe0 == modeIND || in.Code == ldMsh:
			in.K = uint32(rng.Intn(24))
			if rng.Intn(20) == 0 {
				in.K = 0xffffffff - uint32(rng.Intn(4))
			}
		default:
			in.K = randK(rng)
		}
		prog[i] = in
	}
	if rng.Intn(2) == 0 {
		prog[n-1] = s(retAc, 0)
	} else {
		prog[n-1] = s(retKc, randK(rng))
	}
	// libpcap 1.10 leaves scratch memory uninitialised (we, like current
	// libpcap, start it at 0): write every cell first, with A = 0.
	init := make([]Instruction, MemWords)
	for i := range init {
		init[i] = s(st, uint32(i))
	}
	return append(init, prog...)
}

func randK(rng *rand.Rand) uint32 {
	switch rng.Intn(4) {
	case 0:
		return uint32(rng.Intn(4))
	case 1:
		return uint32(rng.Intn(256))
	case 2:
		return 0xffffffff - uint32(rng.Intn(3))
	}
	return rng.Uint32()
}

// TestRandomPrograms compares the engine with libpcap on random programs
// (every opcode, random layouts, so random superinstruction boundaries) and
// random packets.
func TestRandomPrograms(t *testing.T) {
	rng := rand.New(rand.NewSource(99))
	programs, compared, looped := 0, 0, 0
	pkts := make([][]byte, 64)
	for i := range pkts {
		pkts[i] = make([]byte, rng.Intn(32))
		rng.Read(pkts[i])
	}
	for programs < 3000 {
		prog := randomProgram(rng, rng.Intn(4) == 0)
		p, err := Load(prog)
		if err != nil {
			t.Fatalf("%v\n%s", err, Disassemble(prog))
		}
		q, _ := load(prog, false)
		op := oracleProgram(t, prog)
		if !op.Valid() {
			t.Fatalf("libpcap rejects a program we load:\n%s", Disassemble(prog))
		}
		programs++
		for _, pkt := range pkts {
			wire := uint32(len(pkt) + rng.Intn(3)*50)
			ours := p.Run(pkt, wire)
			if plain := q.Run(pkt, wire); plain != ours {
				t.Fatalf("fused %d, plain %d\n%s", ours, plain, Disassemble(prog))
			}
			ref, loop := refRun(prog, pkt, wire)
			if ref != ours {
				t.Fatalf("ours %d, reference %d on % x\n%s", ours, ref, pkt, Disassemble(prog))
			}
			if loop {
				looped++
				continue
			}
			if lib := op.Filter(pkt, wire); lib != ours {
				t.Fatalf("ours %d, libpcap %d on % x (wire %d)\n%s", ours, lib, pkt, wire, Disassemble(prog))
			}
			compared++
		}
	}
	t.Logf("%d random programs, %d runs compared with libpcap, %d loops cut by the budget", programs, compared, looped)
}

// TestValidateMatchesLibpcap compares Load with libpcap's bpf_validate on
// random instruction words. Load is stricter than libpcap 1.10's
// validator in exactly three ways, all of which current libpcap shares:
// opcodes its interpreter does not execute, constant shifts by 32 or more,
// and "ja -1".
func TestValidateMatchesLibpcap(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	accepted, stricter := 0, 0
	for i := 0; i < 20000; i++ {
		n := 1 + rng.Intn(4)
		prog := make([]Instruction, n)
		for k := range prog {
			prog[k] = Instruction{Code: uint16(rng.Intn(0x100)), Jt: uint8(rng.Intn(4)), Jf: uint8(rng.Intn(4)), K: uint32(rng.Intn(40))}
			if rng.Intn(8) == 0 {
				prog[k].K = -uint32(rng.Intn(4))
			}
		}
		if rng.Intn(2) == 0 {
			prog[n-1].Code = classRET | uint16(rng.Intn(2))*retA
		}
		_, err := Load(prog)
		lib := oracleProgram(t, prog).Valid()
		switch {
		case err == nil && !lib:
			t.Fatalf("we load what libpcap rejects:\n%s", Disassemble(prog))
		case err == nil:
			accepted++
		case lib:
			stricter++
			msg := err.Error()
			if !strings.Contains(msg, "invalid opcode") && !strings.Contains(msg, "shift") && !strings.Contains(msg, "itself") {
				t.Fatalf("we reject what libpcap accepts, for another reason: %v\n%s", err, Disassemble(prog))
			}
		}
	}
	if accepted < 500 {
		t.Fatalf("only %d random programs accepted", accepted)
	}
	t.Logf("%d accepted by both; %d accepted by libpcap 1.10 only (invalid opcodes, shifts ≥ 32, ja -1)", accepted, stricter)
}

func TestProgramInfo(t *testing.T) {
	p, err := CompileAndLoad("ip6 protochain 6", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !p.HasBackwardJumps() {
		t.Error("protochain: no backward jumps")
	}
	q, err := CompileAndLoad("tcp and dst port 80", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if q.HasBackwardJumps() {
		t.Error("tcp and dst port 80: backward jumps")
	}
	if q.stats.fused == 0 {
		t.Error("tcp and dst port 80: no superinstructions")
	}
	if len(q.Instructions()) != 16 {
		t.Errorf("tcp and dst port 80: %d instructions, want 16", len(q.Instructions()))
	}
}

// FuzzRun checks, on arbitrary programs and packets, that the engine (with
// and without superinstructions) agrees with the reference interpreter and
// never panics. libpcap itself is compared in TestRandomPrograms.
func FuzzRun(f *testing.F) {
	enc := func(insns []Instruction) []byte {
		b := make([]byte, 0, 8*len(insns))
		for _, in := range insns {
			b = binary.BigEndian.AppendUint16(b, in.Code)
			b = append(b, in.Jt, in.Jf)
			b = binary.BigEndian.AppendUint32(b, in.K)
		}
		return b
	}
	for _, expr := range []string{"tcp and dst port 80", "protochain 6", "vlan 100", "ip[0] = -ip[1]"} {
		insns, err := Compile(expr, 1, 0)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(enc(insns), pkt8, uint32(8))
	}
	for _, c := range vmCases {
		f.Add(enc(c.prog), c.pkt, c.wire)
	}
	f.Fuzz(func(t *testing.T, code, pkt []byte, wire uint32) {
		insns := make([]Instruction, len(code)/8)
		for i := range insns {
			b := code[8*i:]
			insns[i] = Instruction{Code: binary.BigEndian.Uint16(b), Jt: b[2], Jf: b[3], K: binary.BigEndian.Uint32(b[4:])}
		}
		p, err := Load(insns)
		if err != nil {
			return
		}
		q, _ := load(insns, false)
		ref, _ := refRun(insns, pkt, wire)
		if got := p.Run(pkt, wire); got != ref {
			t.Fatalf("ours %d, reference %d\n%s", got, ref, Disassemble(insns))
		}
		if got := q.Run(pkt, wire); got != ref {
			t.Fatalf("plain %d, reference %d\n%s", got, ref, Disassemble(insns))
		}
	})
}
