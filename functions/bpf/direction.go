package bpf

import (
	"errors"

	"github.com/ffpf-go/ffpf/functions"
)

// Direction: on a live Linux capture libpcap compiles inbound and outbound
// into a load of the packet's type, an ancillary datum the kernel gives a
// socket filter (SKF_AD_PKTTYPE), compared with PACKET_OUTGOING. A packet
// in a PBuf has no such datum; what it would be is known from where the
// packet was captured: every packet of a capture of one direction (-Q in,
// -Q out) has it, and an eBPF program attached to one hook (tc ingress,
// egress, XDP) knows which it is. So the load becomes a constant there.
// A userspace filter on packets of both directions cannot tell them
// apart, and refuses to run rather than give a wrong verdict.

const (
	ldhPktType     = 0x28       // BPF_LD|BPF_H|BPF_ABS
	ldConst        = 0x00       // BPF_LD|BPF_W|BPF_IMM
	adPktType      = 0xfffff004 // SKF_AD_OFF + SKF_AD_PKTTYPE
	packetHost     = 0          // PACKET_HOST: what a received packet is, as far as libpcap's code asks
	packetOutgoing = 4          // PACKET_OUTGOING
)

// errDirection is why a userspace filter cannot run on packets of both
// directions.
var errDirection = errors.New("inbound and outbound need each packet's direction, which packets of a capture of both directions do not carry into userspace: capture one direction (-Q in, -Q out, or the capture's direction parameter), or let the filter run at an eBPF hook")

// asksDirection reports whether the program reads the packet's type.
func asksDirection(insns []Instruction) bool {
	for _, in := range insns {
		if in.Code == ldhPktType && in.K == adPktType {
			return true
		}
	}
	return false
}

// withDirection returns insns with every load of the packet's type replaced
// by the type every packet has when all of them go in the direction dir
// (functions.DirectionIn or DirectionOut); insns itself otherwise.
func withDirection(insns []Instruction, dir string) []Instruction {
	var t uint32
	switch dir {
	case functions.DirectionIn:
		t = packetHost
	case functions.DirectionOut:
		t = packetOutgoing
	default:
		return insns
	}
	if !asksDirection(insns) {
		return insns
	}
	out := make([]Instruction, len(insns))
	for i, in := range insns {
		if in.Code == ldhPktType && in.K == adPktType {
			in = Instruction{Code: ldConst, K: t}
		}
		out[i] = in
	}
	return out
}

// capturesDirection is the direction all captures share: in or out when
// every one captures only that direction, "" otherwise.
func capturesDirection(caps []functions.Capture) string {
	dir := ""
	for i, c := range caps {
		if c.File || (c.Direction != functions.DirectionIn && c.Direction != functions.DirectionOut) {
			return ""
		}
		if i > 0 && c.Direction != dir {
			return ""
		}
		dir = c.Direction
	}
	return dir
}
