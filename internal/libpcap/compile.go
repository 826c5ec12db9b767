package libpcap

/*
#cgo LDFLAGS: -l:libpcap.a
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pcap/pcap.h>

// ffpf_compile compiles expr on a handle opened on the 24-byte savefile
// header hdr (when hdr is not NULL) or on a dead handle of link type dlt
// and snap length snaplen. On success the program is in *out (the caller
// frees it with pcap_freecode); on failure errbuf holds libpcap's message.
// Everything else it opens it closes: pcap_close closes the FILE of a
// savefile handle, fclose the one pcap_fopen_offline refused.
static int ffpf_compile(const unsigned char *hdr, int dlt, int snaplen, const char *expr,
		bpf_u_int32 netmask, struct bpf_program *out, char *errbuf) {
	unsigned char buf[24];
	pcap_t *p;
	int rc;

	errbuf[0] = '\0';
	if (hdr != NULL) {
		FILE *fp;

		memcpy(buf, hdr, sizeof buf);
		fp = fmemopen(buf, sizeof buf, "r");
		if (fp == NULL) {
			snprintf(errbuf, PCAP_ERRBUF_SIZE, "fmemopen: %s", strerror(errno));
			return -1;
		}
		p = pcap_fopen_offline(fp, errbuf);
		if (p == NULL) {
			fclose(fp);
			return -1;
		}
	} else {
		p = pcap_open_dead(dlt, snaplen);
		if (p == NULL) {
			snprintf(errbuf, PCAP_ERRBUF_SIZE, "pcap_open_dead failed");
			return -1;
		}
	}
	rc = pcap_compile(p, out, expr, 1, netmask);
	if (rc < 0) {
		strncpy(errbuf, pcap_geterr(p), PCAP_ERRBUF_SIZE - 1);
		errbuf[PCAP_ERRBUF_SIZE - 1] = '\0';
	}
	pcap_close(p);
	return rc;
}
*/
import "C"

import (
	"errors"
	"sync"
	"unsafe"
)

// NetmaskUnknown is PCAP_NETMASK_UNKNOWN: "ip broadcast" is refused.
const NetmaskUnknown = 0xffffffff

// Insn is one classic BPF instruction, laid out as struct bpf_insn.
type Insn struct {
	Code   uint16
	Jt, Jf uint8
	K      uint32
}

// mu serialises pcap_compile: libpcap before 1.8 keeps the compiler's
// state in globals, and the savefile and dead handles are cheap enough
// that holding the lock over the whole open–compile–close costs nothing.
var mu sync.Mutex

// CompileFile compiles expr as libpcap does for a capture file whose
// header is hdr (a classic pcap file header as written, in the file's
// byte order), with the given netmask (tcpdump -r passes 0).
func CompileFile(expr string, hdr [24]byte, netmask uint32) ([]Insn, error) {
	return compile(expr, &hdr, 0, 0, netmask)
}

// CompileDead compiles expr as libpcap does on pcap_open_dead(dlt,
// snaplen): for a live capture of that DLT_ link type.
func CompileDead(expr string, dlt, snaplen int, netmask uint32) ([]Insn, error) {
	return compile(expr, nil, dlt, snaplen, netmask)
}

func compile(expr string, hdr *[24]byte, dlt, snaplen int, netmask uint32) ([]Insn, error) {
	cexpr := C.CString(expr)
	defer C.free(unsafe.Pointer(cexpr))
	var chdr *C.uchar
	if hdr != nil {
		chdr = (*C.uchar)(C.CBytes(hdr[:]))
		defer C.free(unsafe.Pointer(chdr))
	}
	errbuf := (*C.char)(C.calloc(C.PCAP_ERRBUF_SIZE, 1))
	defer C.free(unsafe.Pointer(errbuf))
	var prog C.struct_bpf_program

	mu.Lock()
	rc := C.ffpf_compile(chdr, C.int(dlt), C.int(snaplen), cexpr, C.bpf_u_int32(netmask), &prog, errbuf)
	mu.Unlock()
	if rc < 0 {
		return nil, errors.New(C.GoString(errbuf))
	}
	defer C.pcap_freecode(&prog)
	n := int(prog.bf_len)
	insns := make([]Insn, n)
	if n > 0 {
		for i, in := range unsafe.Slice(prog.bf_insns, n) {
			insns[i] = Insn{Code: uint16(in.code), Jt: uint8(in.jt), Jf: uint8(in.jf), K: uint32(in.k)}
		}
	}
	return insns, nil
}

// Version is the version of the libpcap that compiles filters
// (pcap_lib_version).
func Version() string { return C.GoString(C.pcap_lib_version()) }
