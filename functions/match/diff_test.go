package match

import (
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/bpf"
	"github.com/ffpf-go/ffpf/functions/gen"
)

// trace stores a generated trace in a PBuf, one packet per slot.
func trace(t testing.TB, cfg gen.Config) *buffers.PBuf {
	t.Helper()
	g := gen.New(cfg)
	p := buffers.NewPBuf(int(cfg.Packets), 2048)
	buf := make([]byte, 2048)
	for i := range cfg.Packets {
		n, wire, ts, ok := g.Next(buf)
		if !ok {
			t.Fatalf("gen ended after %d packets", i)
		}
		p.Store(uint32(i), buf[:n], uint32(wire), ts, 0)
	}
	return p
}

// TestLibpcap compares predicates with the pcap-filter expressions that
// mean the same, compiled by libpcap, packet by packet. The traffic has
// no VLAN tags and no IPv6 extension headers, where match walks further
// than libpcap (see README), and, but for the second set, no malformed
// frames, whose bogus IPv4 headers match rejects and libpcap reads.
func TestLibpcap(t *testing.T) {
	pairs := [][2]string{
		{"tcp.dport == 443", "tcp dst port 443"},
		{"udp.sport == 53 or udp.dport == 53", "udp port 53"},
		{"ipv4.src in 10.0.0.0/8", "ip src net 10.0.0.0/8"},
		{"ipv4.dst in 198.51.100.0/24 or ipv4.dst == 8.8.8.8", "ip dst net 198.51.100.0/24 or ip dst host 8.8.8.8"},
		{"ipv6.dst in 2001:db8::/32", "ip6 dst net 2001:db8::/32"},
		{"ipv6.src in 2001:db8:1::/48 and not ipv6.src == 2001:db8:1:e857:f15f:d9c9:5c6c:7b5", "ip6 src net 2001:db8:1::/48 and not ip6 src host 2001:db8:1:e857:f15f:d9c9:5c6c:7b5"},
		{"pkt.len >= 1000", "greater 1000"},
		{"pkt.len < 100 && !tcp", "less 99 and not tcp"},
		{"ipv4 and tcp.flags & 0x12 == 0x12", "ip and tcp[13] & 0x12 == 0x12"},
		{"ipv4.ttl < 64", "ip[8] < 64"},
		{"ipv4 and (icmp.type == 0 or icmp.type == 8)", "icmp[icmptype] == icmp-echoreply or icmp[icmptype] == icmp-echo"},
		{"eth.type == 0x0806", "arp"},
		{"ipv6.hlim == 64 and ip.proto == 58", "ip6[7] == 64 and icmp6"},
		{"not tcp.dport == 80", "not tcp dst port 80"},
		{"tcp.dport != 80", "tcp and not dst port 80"},
		{"ipv4 and udp.len > 100", "ip and udp[4:2] > 100"},
		{"ip.proto == 17", "udp"},
		{"ipv4 and tcp.seq > 1M and tcp.win < 1000", "ip and tcp[4:4] > 1000000 and tcp[14:2] < 1000"},
		{"ipv4 and tcp.ack % 2 == 1", "ip and tcp[8:4] & 1 == 1"},
		{"eth.src == 02:00:00:00:00:01 or eth.dst & 0x010000000000 != 0", "ether src 02:00:00:00:00:01 or ether multicast"},
		{"ipv4.len - 20 > 1000 and ipv4.tos == 0", "ip[2:2] - 20 > 1000 and ip[1] == 0"},
		{"ipv6.nh == 17 and udp.dport == 443", "ip6 and udp dst port 443"},
		{"ipv4 and tcp.sport + tcp.dport > 60000", "ip and tcp[0:2] + tcp[2:2] > 60000"},
	}
	check(t, gen.Config{Seed: 5, Packets: 30000, IPv6: 0.3}, pairs)
	check(t, gen.Config{Seed: 6, Packets: 20000, IPv6: 0.3, VLAN: 0.1, Malformed: 0.4}, [][2]string{
		{"pkt.len > 500", "greater 501"},
		{"eth.type == 0x86dd or eth.type == 0x800", "ip6 or ip"},
		{"vlan", "vlan"},
	})
	check(t, gen.Config{Seed: 7, Packets: 20000, VLAN: 0.5}, [][2]string{
		{"vlan", "vlan"},
		{"eth.type == 0x8100", "ether proto 0x8100"},
		{"vlan and ipv4", "vlan and (ip or (vlan and ip))"},
	})
}

func check(t *testing.T, cfg gen.Config, pairs [][2]string) {
	t.Helper()
	p := trace(t, cfg)
	for _, pr := range pairs {
		m, err := Compile(pr[0], functions.LinkEthernet)
		if err != nil {
			t.Fatalf("%s: %v", pr[0], err)
		}
		prog, err := bpf.CompileAndLoad(pr[1], functions.LinkEthernet, 65535)
		if err != nil {
			t.Fatalf("%s: %v", pr[1], err)
		}
		pass, bad := 0, 0
		for i := range uint32(cfg.Packets) {
			got := m.Eval(p, i)
			want := prog.Run(p.Data(i), p.Meta(i).WireLen) != 0
			if got {
				pass++
			}
			if got != want {
				if bad++; bad <= 3 {
					t.Errorf("%q = %v, libpcap's %q = %v on packet %d: % x", pr[0], got, pr[1], want, i, p.Data(i))
				}
			}
		}
		if pass == 0 || pass == int(cfg.Packets) {
			t.Errorf("%q passes %d of %d packets: the comparison proves little", pr[0], pass, cfg.Packets)
		}
	}
}
