// Package pcaporacle runs classic BPF programs in libpcap's own interpreter
// (pcap_offline_filter) and validator (bpf_validate), through cgo. The bpf
// package's tests use it as the oracle its engine must agree with; it is not
// for the datapath (each call crosses into C).
//
// The sharp edge: libpcap 1.10's interpreter has no loop guard, so a program
// with a backward jump can run forever on a hostile packet (see the bpf
// package's notes on protochain). Callers must not feed it such pairs.
package pcaporacle

/*
#cgo linux LDFLAGS: -lpcap
#include <stdlib.h>
#include <string.h>
#include <pcap/pcap.h>

static unsigned char oracle_empty[1];

static unsigned int oracle_filter(const struct bpf_program *prog, const unsigned char *pkt,
		unsigned int wirelen, unsigned int caplen) {
	struct pcap_pkthdr h;
	memset(&h, 0, sizeof h);
	h.caplen = caplen;
	h.len = wirelen;
	if (pkt == NULL)
		pkt = oracle_empty;
	return (unsigned int)pcap_offline_filter(prog, &h, pkt);
}
*/
import "C"

import (
	"errors"
	"unsafe"
)

// Insn is one classic BPF instruction, laid out as struct bpf_insn.
type Insn struct {
	Code   uint16
	Jt, Jf uint8
	K      uint32
}

// Program is a program copied into C memory. Free releases it.
type Program struct {
	prog C.struct_bpf_program
}

// New copies insns into C memory without validating them.
func New(insns []Insn) (*Program, error) {
	if len(insns) == 0 {
		return nil, errors.New("pcaporacle: empty program")
	}
	n := len(insns)
	mem := (*C.struct_bpf_insn)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.struct_bpf_insn{}))))
	if mem == nil {
		return nil, errors.New("pcaporacle: out of memory")
	}
	cs := unsafe.Slice(mem, n)
	for i, in := range insns {
		cs[i].code = C.u_short(in.Code)
		cs[i].jt = C.u_char(in.Jt)
		cs[i].jf = C.u_char(in.Jf)
		cs[i].k = C.bpf_u_int32(in.K)
	}
	p := &Program{}
	p.prog.bf_len = C.u_int(n)
	p.prog.bf_insns = mem
	return p, nil
}

// Free releases the C memory.
func (p *Program) Free() {
	if p.prog.bf_insns != nil {
		C.free(unsafe.Pointer(p.prog.bf_insns))
		p.prog.bf_insns = nil
	}
}

// Valid reports whether libpcap's bpf_validate accepts the program.
func (p *Program) Valid() bool {
	return C.bpf_validate(p.prog.bf_insns, C.int(p.prog.bf_len)) != 0
}

// Filter runs the program on pkt (the captured bytes) with the given wire
// length through pcap_offline_filter and returns what the program returned.
func (p *Program) Filter(pkt []byte, wireLen uint32) uint32 {
	var ptr *C.uchar
	if len(pkt) > 0 {
		ptr = (*C.uchar)(unsafe.Pointer(&pkt[0]))
	}
	return uint32(C.oracle_filter(&p.prog, ptr, C.uint(wireLen), C.uint(len(pkt))))
}
