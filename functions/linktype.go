package functions

import "fmt"

// LinkType is a link-layer header type (a LINKTYPE_/DLT_ value as in pcap
// files), which decides how a filter reads a packet.
type LinkType uint32

// Link types ffpf names; any other value is carried through unchanged.
const (
	LinkNull     LinkType = 0
	LinkEthernet LinkType = 1
	LinkRaw      LinkType = 101
	LinkLoop     LinkType = 108
	LinkLinuxSLL LinkType = 113
	LinkIPv4     LinkType = 228
	LinkIPv6     LinkType = 229
	LinkSLL2     LinkType = 276
)

var linkNames = map[LinkType]string{
	LinkNull: "NULL", LinkEthernet: "EN10MB", LinkRaw: "RAW", LinkLoop: "LOOP",
	LinkLinuxSLL: "LINUX_SLL", LinkIPv4: "IPV4", LinkIPv6: "IPV6", LinkSLL2: "LINUX_SLL2",
}

// String returns tcpdump's name for the link type ("EN10MB").
func (l LinkType) String() string {
	if s, ok := linkNames[l]; ok {
		return s
	}
	return fmt.Sprintf("LINKTYPE_%d", uint32(l))
}
