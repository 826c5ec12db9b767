package bpf

import (
	"encoding/binary"
	"unsafe"

	"github.com/ffpf-go/ffpf/buffers"
)

// Loop guard. libpcap's protochain walks IPv6 extension headers (and IPv4
// AH headers) with a backward ja. For IPv6 extension headers X grows by at
// least 8 per iteration, but the code libpcap generates for AH sets X to
// (length+2)·4 instead of adding it, so a crafted packet (an AH header that
// leads back to itself) makes the loop spin forever: libpcap 1.10's
// interpreter hangs on it; current libpcap gives up after 64 backward
// jumps and rejects the packet.
//
// Run allows BackJumpBase + 2·caplen backward jumps per packet and rejects
// the packet (returns 0) when they are used up. Forward execution is
// bounded by the program's length, so this bounds every run. The budget
// grows with the capture so that no packet libpcap 1.10 accepts is
// rejected here (a chain of more than 64 extension headers is legal): at
// the top of protochain's loop the whole state is the pair (X, next
// header), X a multiple of 4 inside the capture and the next header one of
// five values, so a walk that terminates makes at most 1.25·caplen+1
// backward jumps. Only hand-written programs can tell the difference.
const BackJumpBase = 64

// be16 and be32 read big-endian values at p+off; the caller has checked
// that the bytes are inside the capture.
func be16(p unsafe.Pointer, off uint64) uint32 {
	b := (*[2]byte)(unsafe.Add(p, off))
	return uint32(b[0])<<8 | uint32(b[1])
}

func be32(p unsafe.Pointer, off uint64) uint32 {
	return binary.BigEndian.Uint32((*[4]byte)(unsafe.Add(p, off))[:])
}

func be8(p unsafe.Pointer, off uint64) uint32 { return uint32(*(*byte)(unsafe.Add(p, off))) }

// Run executes the program on one packet: pkt holds the captured bytes and
// wireLen is the packet's length on the wire (what "len" and "greater"
// see). It returns what the program returns, libpcap's snap length: 0
// rejects the packet.
//
// The semantics are libpcap's bpf_filter: loads are big-endian, a load that
// reaches past the captured bytes rejects the packet, division or modulo by
// X = 0 rejects it, a shift by X ≥ 32 gives 0, scratch memory starts at 0.
// Run never panics on a program Load accepted, whatever pkt holds.
func (p *Program) Run(pkt []byte, wireLen uint32) uint32 {
	// Load guarantees every jump target and fall-through is inside code,
	// so the dispatch indexes it without a bounds check.
	code := unsafe.Pointer(unsafe.SliceData(p.code))
	n := uint64(len(pkt))
	base := unsafe.Pointer(unsafe.SliceData(pkt))
	budget := BackJumpBase + 2*n
	var A, X uint32
	var mem [MemWords]uint32
	pc := uint32(0)
	for {
		in := (*insn)(unsafe.Add(code, uintptr(pc)*unsafe.Sizeof(insn{})))
		switch in.op {
		case opRetK:
			return in.k
		case opRetA:
			return A
		case opLdAbsW:
			k := uint64(in.k)
			if k+4 > n {
				return 0
			}
			A = be32(base, k)
			pc++
		case opLdAbsH:
			k := uint64(in.k)
			if k+2 > n {
				return 0
			}
			A = be16(base, k)
			pc++
		case opLdAbsB:
			k := uint64(in.k)
			if k+1 > n {
				return 0
			}
			A = be8(base, k)
			pc++
		case opLdIndW:
			k := uint64(X) + uint64(in.k)
			if k+4 > n {
				return 0
			}
			A = be32(base, k)
			pc++
		case opLdIndH:
			k := uint64(X) + uint64(in.k)
			if k+2 > n {
				return 0
			}
			A = be16(base, k)
			pc++
		case opLdIndB:
			k := uint64(X) + uint64(in.k)
			if k+1 > n {
				return 0
			}
			A = be8(base, k)
			pc++
		case opLdLen:
			A = wireLen
			pc++
		case opLdxLen:
			X = wireLen
			pc++
		case opLdxMsh:
			k := uint64(in.k)
			if k >= n {
				return 0
			}
			X = (be8(base, k) & 0xf) << 2
			pc++
		case opLdImm:
			A = in.k
			pc++
		case opLdxImm:
			X = in.k
			pc++
		case opLdMem:
			A = mem[in.k%MemWords]
			pc++
		case opLdxMem:
			X = mem[in.k%MemWords]
			pc++
		case opSt:
			mem[in.k%MemWords] = A
			pc++
		case opStx:
			mem[in.k%MemWords] = X
			pc++
		case opJa:
			pc = in.jt
		case opJaBack:
			if budget == 0 {
				return 0
			}
			budget--
			pc = in.jt
		case opJgtK:
			if A > in.k {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opJgeK:
			if A >= in.k {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opJeqK:
			if A == in.k {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opJsetK:
			if A&in.k != 0 {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opJgtX:
			if A > X {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opJgeX:
			if A >= X {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opJeqX:
			if A == X {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opJsetX:
			if A&X != 0 {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opAddX:
			A += X
			pc++
		case opSubX:
			A -= X
			pc++
		case opMulX:
			A *= X
			pc++
		case opDivX:
			if X == 0 {
				return 0
			}
			A /= X
			pc++
		case opModX:
			if X == 0 {
				return 0
			}
			A %= X
			pc++
		case opAndX:
			A &= X
			pc++
		case opOrX:
			A |= X
			pc++
		case opXorX:
			A ^= X
			pc++
		case opLshX:
			// Go defines a shift by 32 or more as 0, as libpcap does.
			A <<= X
			pc++
		case opRshX:
			// Go defines a shift by 32 or more as 0, as libpcap does.
			A >>= X
			pc++
		case opAddK:
			A += in.k
			pc++
		case opSubK:
			A -= in.k
			pc++
		case opMulK:
			A *= in.k
			pc++
		case opDivK:
			A /= in.k
			pc++
		case opModK:
			A %= in.k
			pc++
		case opAndK:
			A &= in.k
			pc++
		case opOrK:
			A |= in.k
			pc++
		case opXorK:
			A ^= in.k
			pc++
		case opLshK:
			A <<= in.k
			pc++
		case opRshK:
			A >>= in.k
			pc++
		case opNeg:
			A = -A
			pc++
		case opTax:
			X = A
			pc++
		case opTxa:
			A = X
			pc++
		case opLdAbsWJgt:
			k := uint64(in.k)
			if k+4 > n {
				return 0
			}
			A = be32(base, k)
			if A > in.c {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opLdAbsWJge:
			k := uint64(in.k)
			if k+4 > n {
				return 0
			}
			A = be32(base, k)
			if A >= in.c {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opLdAbsWJeq:
			k := uint64(in.k)
			if k+4 > n {
				return 0
			}
			A = be32(base, k)
			if A == in.c {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opLdAbsWJset:
			k := uint64(in.k)
			if k+4 > n {
				return 0
			}
			A = be32(base, k)
			if A&in.c != 0 {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opLdAbsHJgt:
			k := uint64(in.k)
			if k+2 > n {
				return 0
			}
			A = be16(base, k)
			if A > in.c {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opLdAbsHJge:
			k := uint64(in.k)
			if k+2 > n {
				return 0
			}
			A = be16(base, k)
			if A >= in.c {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opLdAbsHJeq:
			k := uint64(in.k)
			if k+2 > n {
				return 0
			}
			A = be16(base, k)
			if A == in.c {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opLdAbsHJset:
			k := uint64(in.k)
			if k+2 > n {
				return 0
			}
			A = be16(base, k)
			if A&in.c != 0 {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opLdAbsBJgt:
			k := uint64(in.k)
			if k+1 > n {
				return 0
			}
			A = be8(base, k)
			if A > in.c {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opLdAbsBJge:
			k := uint64(in.k)
			if k+1 > n {
				return 0
			}
			A = be8(base, k)
			if A >= in.c {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opLdAbsBJeq:
			k := uint64(in.k)
			if k+1 > n {
				return 0
			}
			A = be8(base, k)
			if A == in.c {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opLdAbsBJset:
			k := uint64(in.k)
			if k+1 > n {
				return 0
			}
			A = be8(base, k)
			if A&in.c != 0 {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opLdIndWJgt:
			k := uint64(X) + uint64(in.k)
			if k+4 > n {
				return 0
			}
			A = be32(base, k)
			if A > in.c {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opLdIndWJge:
			k := uint64(X) + uint64(in.k)
			if k+4 > n {
				return 0
			}
			A = be32(base, k)
			if A >= in.c {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opLdIndWJeq:
			k := uint64(X) + uint64(in.k)
			if k+4 > n {
				return 0
			}
			A = be32(base, k)
			if A == in.c {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opLdIndWJset:
			k := uint64(X) + uint64(in.k)
			if k+4 > n {
				return 0
			}
			A = be32(base, k)
			if A&in.c != 0 {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opLdIndHJgt:
			k := uint64(X) + uint64(in.k)
			if k+2 > n {
				return 0
			}
			A = be16(base, k)
			if A > in.c {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opLdIndHJge:
			k := uint64(X) + uint64(in.k)
			if k+2 > n {
				return 0
			}
			A = be16(base, k)
			if A >= in.c {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opLdIndHJeq:
			k := uint64(X) + uint64(in.k)
			if k+2 > n {
				return 0
			}
			A = be16(base, k)
			if A == in.c {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opLdIndHJset:
			k := uint64(X) + uint64(in.k)
			if k+2 > n {
				return 0
			}
			A = be16(base, k)
			if A&in.c != 0 {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opLdIndBJgt:
			k := uint64(X) + uint64(in.k)
			if k+1 > n {
				return 0
			}
			A = be8(base, k)
			if A > in.c {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opLdIndBJge:
			k := uint64(X) + uint64(in.k)
			if k+1 > n {
				return 0
			}
			A = be8(base, k)
			if A >= in.c {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opLdIndBJeq:
			k := uint64(X) + uint64(in.k)
			if k+1 > n {
				return 0
			}
			A = be8(base, k)
			if A == in.c {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opLdIndBJset:
			k := uint64(X) + uint64(in.k)
			if k+1 > n {
				return 0
			}
			A = be8(base, k)
			if A&in.c != 0 {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opMshLdW:
			k := uint64(in.k)
			if k >= n {
				return 0
			}
			X = (be8(base, k) & 0xf) << 2
			k = uint64(X) + uint64(in.k2)
			if k+4 > n {
				return 0
			}
			A = be32(base, k)
			pc += 2
		case opMshLdH:
			k := uint64(in.k)
			if k >= n {
				return 0
			}
			X = (be8(base, k) & 0xf) << 2
			k = uint64(X) + uint64(in.k2)
			if k+2 > n {
				return 0
			}
			A = be16(base, k)
			pc += 2
		case opMshLdB:
			k := uint64(in.k)
			if k >= n {
				return 0
			}
			X = (be8(base, k) & 0xf) << 2
			k = uint64(X) + uint64(in.k2)
			if k+1 > n {
				return 0
			}
			A = be8(base, k)
			pc += 2
		case opMshLdHJeq:
			k := uint64(in.k)
			if k >= n {
				return 0
			}
			X = (be8(base, k) & 0xf) << 2
			k = uint64(X) + uint64(in.k2)
			if k+2 > n {
				return 0
			}
			A = be16(base, k)
			if A == in.c {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opMshLdHJset:
			k := uint64(in.k)
			if k >= n {
				return 0
			}
			X = (be8(base, k) & 0xf) << 2
			k = uint64(X) + uint64(in.k2)
			if k+2 > n {
				return 0
			}
			A = be16(base, k)
			if A&in.c != 0 {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opMshLdBJeq:
			k := uint64(in.k)
			if k >= n {
				return 0
			}
			X = (be8(base, k) & 0xf) << 2
			k = uint64(X) + uint64(in.k2)
			if k+1 > n {
				return 0
			}
			A = be8(base, k)
			if A == in.c {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opMshLdBJset:
			k := uint64(in.k)
			if k >= n {
				return 0
			}
			X = (be8(base, k) & 0xf) << 2
			k = uint64(X) + uint64(in.k2)
			if k+1 > n {
				return 0
			}
			A = be8(base, k)
			if A&in.c != 0 {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opLdAbsHAndJeq:
			k := uint64(in.k)
			if k+2 > n {
				return 0
			}
			A = be16(base, k) & in.k2
			if A == in.c {
				pc = in.jt
			} else {
				pc = in.jf
			}
		case opLdAbsBAndJeq:
			k := uint64(in.k)
			if k+1 > n {
				return 0
			}
			A = be8(base, k) & in.k2
			if A == in.c {
				pc = in.jt
			} else {
				pc = in.jf
			}
		default:
			// Unreachable: Load emits only the operations above.
			return 0
		}
	}
}

// Filter runs the program over the batch's packets and keeps, in place and
// in order, the entries of those it accepts; b.N becomes their number. An
// entry's Class is left as it was: a filter passes or drops, it does not
// classify (the value the program returns, a snap length, is not applied
// either: the PBuf slot is shared with other functions). Filter never
// drops by error, so b.Dropped is not touched, and it does not allocate.
func (p *Program) Filter(b *buffers.Batch) {
	pb := b.PBuf
	n := 0
	for _, e := range b.E[:b.N] {
		if p.Run(pb.Data(e.Slot), pb.Meta(e.Slot).WireLen) != 0 {
			b.E[n] = e
			n++
		}
	}
	b.N = n
}
