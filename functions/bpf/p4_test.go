package bpf

import (
	"testing"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/gen"
	"github.com/ffpf-go/ffpf/functions/internal/p4test"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// p4Exprs are filters a switch must run: the pcap-filter primitives that
// test header fields (protocols, hosts and nets, ports and port ranges,
// IP protocols, TCP flags, ICMP types, VLAN, lengths, MAC addresses),
// and their conjunctions, disjunctions and negations.
var p4Exprs = []string{
	"", "tcp", "udp", "icmp", "arp", "rarp", "ip", "ip6", "icmp6", "sctp", "vlan",
	"tcp and dst port 80", "tcp port 80", "src port 80", "port 53", "udp port 53",
	"tcp dst port 80 or tcp dst port 8080", "portrange 1000-2000", "tcp portrange 1-1023", "udp dst portrange 5000-6000",
	"host 10.0.0.1", "src host 10.0.0.1", "dst host 192.168.1.2", "net 10.0.0.0/8", "src net 192.168.0.0/16",
	"dst net 172.16.0.0 mask 255.240.0.0", "host 2001:db8::1", "net 2001:db8::/32", "ip6 dst host ff02::1",
	"ether host 00:11:22:33:44:55", "ether src 00:11:22:33:44:55", "ether dst ff:ff:ff:ff:ff:ff",
	"broadcast", "multicast", "ether multicast", "ip multicast", "ip6 multicast",
	"tcp[tcpflags] & tcp-syn != 0", "tcp[tcpflags] & (tcp-syn|tcp-ack) = tcp-syn", "tcp[13] = 2", "ip[8] < 64",
	"ether[0] & 1 = 1", "ip[6:2] & 0x1fff != 0", "ip proto 47", "ip6 proto 58",
	"vlan and tcp", "vlan 100", "vlan 100 and vlan 200", "vlan and vlan and udp", "vlan 200 and ip6",
	"ip6 and tcp port 443", "greater 100", "less 60", "len > 1000", "not tcp", "tcp or udp",
	"not (tcp or udp) and ip", "icmp or arp", "(tcp and port 80) or (udp and port 53)", "ip and tcp and not port 22",
	"icmp[icmptype] = icmp-echo", "icmp6 and ip6[40] = 135", "ip and ip[0] & 0xf != 5", "ip[9] = 6 and ip[0] & 0xf > 5",
	"udp[4:2] >= 28", "ip[12:4] & 0xffffff00 = 0x0a000000", "ip[1] & 0xfc = 0x28", "arp host 10.0.0.1",
	"ether proto 0x88cc", "tcp[12] & 0xf0 > 0x50", "ip[0] & 0xf > 5", "icmp[icmpcode] != 0",
	"ip[0] >> 4 = 4", "ip[0] << 2 = 0x114", "ip[2:2] / 4 > 10", "ip[8] * 4 = 256", "ip[2:2] % 8 = 4", "ip[0] >> 4 != 6 and ip[0] << 28 = 0",
	"ip[0] | 0x0f = 0x4f", "ip[1] ^ 0xfc = 0xfc", "ip[8] + 0 = 64", "ether[0] & 1 = 0 and ip[2:2] % 1 = 0",
	// Tests that a field of 0 passes: a switch that read a header the
	// frame is too short for would pass what libpcap rejects.
	"not port 80", "tcp[13] = 0", "ip[8] = 0", "not host 10.0.0.1",
}

// p4Refused are filters a switch must refuse, with the reason: they read
// payload, compute on packet bytes, loop, or ask the direction.
var p4Refused = []string{
	"protochain 6", "ip6 protochain 6", "udp[8:2] = 0x0000", "tcp[((tcp[12:1] & 0xf0) >> 2):4] = 0x47455420",
	"ip[2:2] % 3 = 1", "len - 10 > ip[0] * 2", "ip[1] - ip[0] > 3", "inbound",
}

// p4Frames are the frames of the differential tests: the bpf corpus
// (gopacket-built frames, random noise and corrupted frames), the
// adversarial frames of p4test, each cut at every length, and generated
// traffic with malformed frames, VLAN tags and IPv6, each frame once.
func p4Frames(t *testing.T) [][]byte {
	var fs [][]byte
	base := baseCorpus(t)
	for _, p := range append(base, garbage(base, 600)...) {
		fs = append(fs, p.data)
	}
	fs = append(fs, p4test.Cuts(p4test.Adversarial())...)
	for _, p := range p4test.Trace(gen.Config{Seed: 13, Packets: 1000, Malformed: 0.3, VLAN: 0.3, IPv6: 0.3}) {
		fs = append(fs, p.Data)
	}
	// Each frame once: the cuts of frames that begin alike are alike.
	seen := map[string]bool{}
	out := fs[:0]
	for _, f := range fs {
		if !seen[string(f)] {
			seen[string(f)] = true
			out = append(out, f)
		}
	}
	return out
}

// A filter on a switch gives libpcap's verdict on every frame (a switch
// sees the frame whole: its wire length is its length), however cut,
// tagged, fragmented, optioned or malformed.
func TestP4FilterEqualsLibpcap(t *testing.T) {
	frames := p4Frames(t)
	for _, expr := range p4Exprs {
		fn := p4test.Parse(t, `(bpf,"`+expr+`")`)
		code, err := fn.P4("bpf#1")
		if err != nil {
			t.Errorf("%q: refused: %v", expr, err)
			continue
		}
		p, bs, err := p4gen.Assemble("t", []p4gen.Node{{ID: "bpf#1", Fn: code}}, 1)
		if err != nil {
			t.Fatalf("%q: %v", expr, err)
		}
		insns, err := Compile(expr, functions.LinkEthernet, 0)
		if err != nil {
			t.Fatal(err)
		}
		oracle := oracleProgram(t, insns)
		p4test.Check(t, p)
		s := p4test.Install(p)
		pass, _ := p4test.RunSwitch(t, s, p4test.Packets(frames))
		passed := 0
		for i, f := range frames {
			want := oracle.Filter(f, uint32(len(f))) != 0
			if pass[i] != want {
				t.Fatalf("%q: frame % x (%d bytes): switch %v, libpcap %v\n%s", expr, f, len(f), pass[i], want, Disassemble(insns))
			}
			if want {
				passed++
			}
		}
		entries := len(p.Tables[len(p.Tables)-1].Entries)
		t.Logf("%-45q %4d entries, %3d keys; passes %d of %d", expr, entries, len(p.Tables[len(p.Tables)-1].Keys), passed, len(frames))
		_ = bs
	}
}

// A filter the switch cannot run is refused with a reason.
func TestP4FilterRefusals(t *testing.T) {
	for _, expr := range p4Refused {
		fn := p4test.Parse(t, `(bpf,"`+expr+`")`)
		if _, err := fn.P4("bpf#1"); err == nil {
			t.Errorf("%q: accepted", expr)
		} else {
			t.Logf("%q: %v", expr, err)
		}
	}
}
