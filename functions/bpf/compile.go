package bpf

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/internal/libpcap"
)

// DefaultSnaplen is the snap length Compile uses when given 0 or less:
// libpcap's MAXIMUM_SNAPLEN, what tcpdump uses by default. It is the value
// a compiled filter returns for a packet that passes.
const DefaultSnaplen = 262144

// Compile compiles a pcap-filter(7) expression for a live capture of link
// type lt with libpcap (pcap_compile on a pcap_open_dead handle, optimizer
// on, netmask unknown, as tcpdump -d does), giving the same instructions
// as `tcpdump -y TYPE -dd`. Every link type libpcap knows can be compiled,
// those above 255 (LINUX_SLL2, PKTAP, DSA tags) included. The program
// returns snaplen for a packet that passes (DefaultSnaplen if snaplen ≤ 0)
// and 0 for one that does not.
//
// A bad expression gives libpcap's own message, e.g.
//
//	bad filter expression "tcp and dest 80": syntax error in filter expression
func Compile(expr string, lt functions.LinkType, snaplen int) ([]Instruction, error) {
	return CompileFor(expr, functions.LiveCapture(lt), snaplen)
}

// CompileFor compiles expr the way tcpdump does for capture c. For a live
// capture, as Compile. For a capture file, as `tcpdump -r` does: on a
// handle libpcap opened on a file header carrying the file's byte order,
// snap length and whole link-type field (FCS bits included), with netmask
// 0. libpcap compiles differently for a file: on DLT_NULL captures "ip6"
// matches the three BSD address families (24, 28, 30) and the family is
// compared in the file's byte order, "inbound" and "ifindex" are refused,
// "ip broadcast" compiles. The program then returns the file's snap length
// (snaplen when c.Snaplen is 0) for a packet that passes.
func CompileFor(expr string, c functions.Capture, snaplen int) ([]Instruction, error) {
	if snaplen <= 0 {
		snaplen = DefaultSnaplen
	}
	var raw []libpcap.Insn
	var err error
	if c.File {
		raw, err = libpcap.CompileFile(expr, fileHeader(c, snaplen), 0)
	} else {
		dlt := linkTypeToDLT(functions.LinkType(c.LinkTypeField & 0xffff))
		raw, err = libpcap.CompileDead(expr, int(dlt), snaplen, libpcap.NetmaskUnknown)
	}
	if err != nil {
		return nil, fmt.Errorf("bad filter expression %q: %v", expr, err)
	}
	insns := make([]Instruction, len(raw))
	for i, r := range raw {
		insns[i] = Instruction{Code: r.Code, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return insns, nil
}

// CompileCaptures compiles expr for the captures whose packets reach a
// filter (for a live capture of link type lt when there are none). The
// program must be the same for all of them, for one filter runs on all
// their packets: if libpcap compiles it differently for two of them
// (files written in different byte orders, a file and a live capture), it
// fails with a sentence saying why. Programs that differ only in the
// value they return for a packet that passes (the snap length) select the
// same packets; the first capture's is used.
func CompileCaptures(expr string, lt functions.LinkType, caps []functions.Capture, snaplen int) ([]Instruction, error) {
	if len(caps) == 0 {
		return Compile(expr, lt, snaplen)
	}
	first, err := CompileFor(expr, caps[0], snaplen)
	if err != nil {
		return nil, err
	}
	for _, c := range caps[1:] {
		insns, err := CompileFor(expr, c, snaplen)
		if err != nil {
			return nil, err
		}
		if !sameVerdicts(first, insns) {
			return nil, fmt.Errorf("filter expression %q selects different packets in the captures that reach it, because %s: filter each capture on its own", expr, whyDifferent(caps[0], c))
		}
	}
	return first, nil
}

// sameVerdicts reports whether a and b are the same program but for the
// non-zero values they return.
func sameVerdicts(a, b []Instruction) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Code == y.Code && x.Code == classRET|retK && x.K != 0 && y.K != 0 {
			continue
		}
		if x != y {
			return false
		}
	}
	return true
}

// whyDifferent names what distinguishes two captures for libpcap's
// compiler, for the message of CompileCaptures.
func whyDifferent(a, b functions.Capture) string {
	var why []string
	switch {
	case a.File != b.File:
		why = append(why, "one is a capture file and one a live capture")
	case a.File && a.Swapped != b.Swapped:
		why = append(why, "the files were written in different byte orders")
	}
	if a.LinkTypeField != b.LinkTypeField {
		why = append(why, fmt.Sprintf("their link-type fields differ (%#x and %#x)", a.LinkTypeField, b.LinkTypeField))
	}
	if len(why) == 0 {
		return "libpcap compiles it differently for their headers"
	}
	return strings.Join(why, " and ")
}

// fileHeader is the pcap file header (pcap-savefile(5)) of capture c as its
// writer wrote it: microsecond magic, version 2.4, the snap length and the
// whole link-type field, in the writer's byte order. Only the header
// matters to libpcap's compiler.
func fileHeader(c functions.Capture, snaplen int) [24]byte {
	var h [24]byte
	var o binary.ByteOrder = binary.NativeEndian
	if c.Swapped {
		if binary.NativeEndian.Uint16([]byte{1, 0}) == 1 {
			o = binary.BigEndian
		} else {
			o = binary.LittleEndian
		}
	}
	sl := c.Snaplen
	if sl == 0 {
		sl = uint32(snaplen)
	}
	o.PutUint32(h[0:], 0xa1b2c3d4)
	o.PutUint16(h[4:], 2)
	o.PutUint16(h[6:], 4)
	o.PutUint32(h[16:], sl)
	o.PutUint32(h[20:], c.LinkTypeField)
	return h
}

// linkTypeToDLT maps a LINKTYPE_ value (what pcap files and ffpf carry) to
// the DLT_ value pcap_open_dead wants, as libpcap's linktype_to_dlt does on
// Linux: they differ for a handful of old types, LINKTYPE_RAW (101) being
// the one that matters (DLT_RAW is 12). (For a file, libpcap maps the
// header's value itself.)
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

// CompileAndLoad compiles expr for a live capture (see Compile) and loads
// the result.
func CompileAndLoad(expr string, lt functions.LinkType, snaplen int) (*Program, error) {
	return CompileCapturesAndLoad(expr, lt, nil, snaplen)
}

// CompileCapturesAndLoad compiles expr for the captures that reach a
// filter (see CompileCaptures) and loads the result.
func CompileCapturesAndLoad(expr string, lt functions.LinkType, caps []functions.Capture, snaplen int) (*Program, error) {
	insns, err := CompileCaptures(expr, lt, caps, snaplen)
	if err != nil {
		return nil, err
	}
	insns = withDirection(insns, capturesDirection(caps))
	p, err := Load(insns)
	if err != nil {
		// libpcap produced a program our validator refuses: a bug on one
		// side or the other, worth a precise message.
		return nil, fmt.Errorf("filter expression %q: libpcap's program does not load: %v", expr, err)
	}
	return p, nil
}
