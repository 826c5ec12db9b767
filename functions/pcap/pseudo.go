package pcap

import (
	"encoding/binary"
	"math/bits"
)

// Some link types begin with a pseudo-header whose fields the capturing
// host wrote in its own byte order. libpcap (pcap-util.c,
// swap_pseudo_headers) converts them to the reading host's order when it
// reads a file written in the other byte order, so that its filters load
// the fields as a live capture on this host would give them; the reader
// does the same, to the same bounds, before any function sees the record.
// The record is changed in place: a file that needs it is never mapped.

// link types whose pseudo-header has host-order fields
const (
	linkLinuxSLL         = 113
	linkPFLog            = 117
	linkUSBLinux         = 189
	linkUSBLinuxMMapped  = 220
	linkNFLog            = 239
	linkLinuxSLL2        = 276
	linkDBus             = 231
	linkUSBPcap          = 249
	linkEBHSCR           = 279
	sllHeaderLen         = 16
	sll2HeaderLen        = 20
	sllProtoCAN          = 0x000c
	sllProtoCANFD        = 0x000d
	usbIsochronous       = 0
	nflogHeaderLen       = 4
	nflogTLVHeaderLen    = 4
	pflogUIDOffset       = 44 // after length, af, action, reason, ifname[16], ruleset[16], rulenr, subrulenr
	pflogFieldsAfterUIDs = 4  // uid, pid, rule_uid, rule_pid
)

// hostBig is the byte order of this machine.
var hostBig = binary.NativeEndian.Uint16([]byte{0, 1}) == 1

// swapsPseudoHeader reports whether records of link type lt need their
// pseudo-header converted when the file's byte order is not this host's.
func swapsPseudoHeader(lt uint32) bool {
	switch lt {
	case linkLinuxSLL, linkPFLog, linkUSBLinux, linkUSBLinuxMMapped, linkNFLog, linkLinuxSLL2:
		return true
	}
	return false
}

// maxSnaplenFor is libpcap's max_snaplen_for_dlt: the longest record a
// file of link type lt may hold.
func maxSnaplenFor(lt uint32) uint32 {
	switch lt {
	case linkDBus:
		return 128 << 20
	case linkEBHSCR:
		return 8 << 20
	case linkUSBPcap:
		return 1 << 20
	}
	return MaxRecordLen
}

// AdjustSnapshot is libpcap's pcap_adjust_snapshot: the snapshot of a
// file whose header gives snaplen for link type lt (the low 16 bits of
// the link-type field). A snap length of 0 or above INT_MAX is replaced
// by the link type's maximum.
func AdjustSnapshot(lt, snaplen uint32) uint32 {
	if snaplen == 0 || snaplen > 1<<31-1 {
		return maxSnaplenFor(lt)
	}
	return snaplen
}

// swapPseudoHeader converts the pseudo-header at the start of data (the
// record's captured bytes; wire is its wire length) of link type lt from
// the other byte order, as swap_pseudo_headers does.
func swapPseudoHeader(lt uint32, data []byte, wire uint32) {
	switch lt {
	case linkPFLog:
		swapPFLog(data, wire)
	case linkLinuxSLL:
		swapSLLCAN(data, wire, sllHeaderLen, 14)
	case linkLinuxSLL2:
		swapSLLCAN(data, wire, sll2HeaderLen, 0)
	case linkUSBLinux:
		swapUSB(data, false)
	case linkUSBLinuxMMapped:
		swapUSB(data, true)
	case linkNFLog:
		swapNFLog(data, wire)
	}
}

func swap16(b []byte) { b[0], b[1] = b[1], b[0] }

func swap32(b []byte) {
	binary.LittleEndian.PutUint32(b, bits.ReverseBytes32(binary.LittleEndian.Uint32(b)))
}

func swap64(b []byte) {
	binary.LittleEndian.PutUint64(b, bits.ReverseBytes64(binary.LittleEndian.Uint64(b)))
}

// swapPFLog swaps uid, pid, rule_uid and rule_pid, each only when the
// captured bytes, the wire length and the header's own length cover it.
func swapPFLog(data []byte, wire uint32) {
	if len(data) < 1 {
		return
	}
	hlen := uint32(data[0])
	for i := range pflogFieldsAfterUIDs {
		end := uint32(pflogUIDOffset + 4*(i+1))
		if uint32(len(data)) < end || wire < end || hlen < end {
			return
		}
		swap32(data[end-4 : end])
	}
}

// swapSLLCAN swaps the CAN ID of a SocketCAN frame in a Linux cooked
// header (protoOff: where the header's protocol field is).
func swapSLLCAN(data []byte, wire uint32, hlen, protoOff int) {
	if len(data) < hlen || wire < uint32(hlen) {
		return
	}
	if p := binary.BigEndian.Uint16(data[protoOff:]); p != sllProtoCAN && p != sllProtoCANFD {
		return
	}
	if len(data) < hlen+4 || wire < uint32(hlen+4) {
		return
	}
	swap32(data[hlen : hlen+4])
}

// swapUSB swaps the fields of a Linux USB header (48 bytes, or 64 with the
// memory-mapped header's four more words and isochronous descriptors).
// Each field is swapped only when the captured bytes cover it.
func swapUSB(data []byte, mmapped bool) {
	n := len(data)
	field := func(off, size int) bool { // swap data[off:off+size] if captured
		if n < off+size {
			return false
		}
		switch size {
		case 2:
			swap16(data[off:])
		case 4:
			swap32(data[off:])
		case 8:
			swap64(data[off:])
		}
		return true
	}
	if !field(0, 8) || !field(12, 2) || !field(16, 8) || !field(24, 4) || !field(28, 4) || !field(32, 4) || !field(36, 4) {
		return // id, bus_id, ts_sec, ts_usec, status, urb_len, data_len
	}
	iso := data[9] == usbIsochronous // transfer_type
	if iso && (!field(40, 4) || !field(44, 4)) {
		return // error_count, numdesc
	}
	if !mmapped {
		return
	}
	if !field(48, 4) || !field(52, 4) || !field(56, 4) || !field(60, 4) {
		return // interval, start_frame, xfer_flags, ndesc
	}
	if !iso {
		return
	}
	ndesc := binary.NativeEndian.Uint32(data[60:]) // now in this host's order
	off := 64
	for range ndesc {
		// status, offset, len, then 4 bytes of padding
		if !field(off, 4) || !field(off+4, 4) || !field(off+8, 4) {
			return
		}
		off += 16
	}
}

// swapNFLog swaps the type and length of every TLV after the NFLOG header.
func swapNFLog(data []byte, wire uint32) {
	capl := uint32(len(data))
	if capl < nflogHeaderLen || wire < nflogHeaderLen || data[1] != 0 { // version 0 only
		return
	}
	capl -= nflogHeaderLen
	wire -= nflogHeaderLen
	p := data[nflogHeaderLen:]
	for capl >= nflogTLVHeaderLen {
		swap16(p[0:])
		swap16(p[2:])
		// tlv_length, now in this host's order, rounded up to 4 in 16
		// bits as libpcap does (0xfffd and up wrap to a size below 4)
		size := binary.NativeEndian.Uint16(p)
		if size%4 != 0 {
			size += 4 - size%4
		}
		if size < nflogTLVHeaderLen || capl < uint32(size) || wire < uint32(size) {
			return
		}
		capl -= uint32(size)
		wire -= uint32(size)
		p = p[size:]
	}
}
