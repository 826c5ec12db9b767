package bpf

import (
	"fmt"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
)

func TestZZDump(t *testing.T) {
	for _, e := range []string{"tcp", "tcp port 80", "ip6 and tcp port 443", "host 10.0.0.1", "vlan 100 and tcp", "ether host 00:11:22:33:44:55", "multicast", "ip multicast", "ip6 multicast", "host 2001:db8::1", "portrange 1000-2000", "tcp[tcpflags] & tcp-syn != 0", "icmp[icmptype] = icmp-echo", "udp", "icmp6", "ip proto 47", "greater 100", "arp", "vlan", "net 10.0.0.0/8", "not tcp", "sctp", "icmp6 and ip6[40] = 135", "ip6 protochain 6"} {
		insns, err := Compile(e, functions.LinkEthernet, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("== %s\n%s\n", e, Disassemble(insns))
	}
}
