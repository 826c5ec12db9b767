package bpf

import (
	"fmt"

	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcap"

	"github.com/ffpf-go/ffpf/functions"
)

// DefaultSnaplen is the snap length Compile uses when given 0 or less:
// libpcap's MAXIMUM_SNAPLEN, what tcpdump uses by default. It is the value
// a compiled filter returns for a packet that passes.
const DefaultSnaplen = 262144

// Compile compiles a pcap-filter(7) expression for packets of link type lt
// with libpcap (pcap_compile on a pcap_open_dead handle, optimizer on, as
// tcpdump does), giving the same instructions as `tcpdump -dd`. The
// program returns snaplen for a packet that passes (DefaultSnaplen if
// snaplen ≤ 0) and 0 for one that does not.
//
// A bad expression gives libpcap's own message, e.g.
//
//	bad filter expression "tcp and dest 80": syntax error in filter expression
func Compile(expr string, lt functions.LinkType, snaplen int) ([]Instruction, error) {
	dlt := linkTypeToDLT(lt)
	if dlt > 255 {
		// gopacket's pcap binding carries link types in a byte.
		return nil, fmt.Errorf("bad filter expression %q: cannot compile filters for link type %s (%d): only link types up to 255 are supported", expr, lt, uint32(lt))
	}
	if snaplen <= 0 {
		snaplen = DefaultSnaplen
	}
	raw, err := pcap.CompileBPFFilter(layers.LinkType(dlt), snaplen, expr)
	if err != nil {
		return nil, fmt.Errorf("bad filter expression %q: %v", expr, err)
	}
	insns := make([]Instruction, len(raw))
	for i, r := range raw {
		insns[i] = Instruction{Code: r.Code, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return insns, nil
}

// linkTypeToDLT maps a LINKTYPE_ value (what pcap files and ffpf carry) to
// the DLT_ value pcap_open_dead wants, as libpcap's linktype_to_dlt does on
// Linux: they differ for a handful of old types, LINKTYPE_RAW (101) being
// the one that matters (DLT_RAW is 12).
func linkTypeToDLT(lt functions.LinkType) functions.LinkType {
	switch lt {
	case 100: // LINKTYPE_ATM_RFC1483
		return 11
	case 101: // LINKTYPE_RAW
		return 12
	case 102: // LINKTYPE_SLIP_BSDOS
		return 15
	case 103: // LINKTYPE_PPP_BSDOS
		return 16
	case 106: // LINKTYPE_ATM_CLIP
		return 19
	}
	return lt
}

// CompileAndLoad compiles expr (see Compile) and loads the result.
func CompileAndLoad(expr string, lt functions.LinkType, snaplen int) (*Program, error) {
	insns, err := Compile(expr, lt, snaplen)
	if err != nil {
		return nil, err
	}
	p, err := Load(insns)
	if err != nil {
		// libpcap produced a program our validator refuses: a bug on one
		// side or the other, worth a precise message.
		return nil, fmt.Errorf("filter expression %q: libpcap's program does not load: %v", expr, err)
	}
	return p, nil
}
