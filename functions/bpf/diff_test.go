package bpf

import (
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcap"

	"github.com/ffpf-go/ffpf/functions"
)

// diffExprs are the expressions of the differential test, on EN10MB.
var diffExprs = []string{
	"",
	"tcp", "udp", "icmp", "arp", "ip", "ip6", "icmp6", "rarp",
	"tcp and dst port 80", "tcp port 80", "src port 80", "port 53", "udp port 53",
	"tcp dst port 80 or tcp dst port 8080",
	"portrange 1000-2000", "tcp portrange 1-1023", "udp dst portrange 5000-6000",
	"host 10.0.0.1", "src host 10.0.0.1", "dst host 192.168.1.2",
	"net 10.0.0.0/8", "src net 192.168.0.0/16", "dst net 172.16.0.0 mask 255.240.0.0",
	"host 2001:db8::1", "net 2001:db8::/32", "ip6 dst host ff02::1",
	"ether host 00:11:22:33:44:55", "ether src 00:11:22:33:44:55", "ether dst ff:ff:ff:ff:ff:ff",
	"broadcast", "multicast", "ether multicast", "ip multicast", "ip6 multicast",
	"tcp[tcpflags] & tcp-syn != 0", "tcp[tcpflags] & (tcp-syn|tcp-ack) = tcp-syn",
	"tcp[13] = 2", "ip[8] < 64", "ether[0] & 1 = 1",
	"ip[6:2] & 0x1fff != 0", "ip[6:2] & 0x3fff != 0", "ip proto 47", "ip6 proto 58",
	"vlan", "vlan and tcp", "vlan 100", "vlan 100 and vlan 200", "vlan and vlan and udp", "vlan 200 and ip6",
	"ip6 and tcp port 443", "greater 100", "less 60", "len > 1000",
	"not tcp", "tcp or udp", "not (tcp or udp) and ip", "icmp or arp",
	"(tcp and port 80) or (udp and port 53)", "ip and tcp and not port 22",
	"protochain 6", "ip6 protochain 6", "ip protochain 6", "ip6 protochain 17",
	"icmp[icmptype] = icmp-echo", "icmp6 and ip6[40] = 135", "udp[8:2] = 0x0000",
	"tcp[((tcp[12:1] & 0xf0) >> 2):4] = 0x47455420",
	"ip[2:2] % 3 = 1", "ip[2:2] / 4 > 10", "len - 10 > ip[0] * 2",
	"ip[0] ^ 3 = 1 or ip[1] | 2 = 2 or ip[0] >> ip[1] = 0", "ip[0] << ip[1] = 0",
	"ip[1] - ip[0] > 3", "ip[1] & ip[0] != 0", "ip[0] = -ip[1]", "0 - ip[0] = 0xfffffffb",
	"ip[len - 60] = 1", "ip[0] & 0xf > 5", "ip6 and ip6[6] = 0", "ip6[6] = 44",
	"ether proto 0x88cc", "stp", "llc", "mpls", "mpls and ip", "geneve", "geneve and tcp",
	"ether[12:2] = 0x8100", "ip and ip[0] & 0xf != 5", "ip[9] = 6 and ip[0] & 0xf > 5",
	"tcp[0:4] > 0x9c400000", "udp[4:2] >= 28", "ip[12:4] & 0xffffff00 = 0x0a000000",
	"ip[1] & 0xfc = 0x28", "ip[6:2] & 0xe000 = 0x4000", "ip[12] & 0xf0 = 0xc0",
}

// otherLinkExprs are checked on raw-IP link types.
var otherLinkExprs = []string{
	"", "ip", "ip6", "tcp and dst port 80", "udp", "icmp", "net 10.0.0.0/8",
	"ip6 and tcp port 443", "protochain 6", "ip[6:2] & 0x1fff != 0", "greater 100",
	"tcp[tcpflags] & tcp-syn != 0", "ip6 multicast",
}

// diffStats counts what a differential run compared.
type diffStats struct {
	exprs, packets, compared, xnet, xnetSkipped, looped int
}

// diffOne compares our engine with libpcap's interpreter (value), gopacket's
// pcap.BPF matcher (verdict), the reference interpreter and x/net/bpf (when
// it takes the program and wire = captured) on every packet.
func diffOne(t *testing.T, expr string, lt functions.LinkType, snaplen int, pkts []testPacket, st *diffStats) {
	t.Helper()
	insns, err := Compile(expr, lt, snaplen)
	if err != nil {
		t.Fatalf("compile %q: %v", expr, err)
	}
	p, err := Load(insns)
	if err != nil {
		t.Fatalf("load %q: %v\n%s", expr, err, Disassemble(insns))
	}
	plain, err := load(insns, false)
	if err != nil {
		t.Fatal(err)
	}
	oracle := oracleProgram(t, insns)
	matcher, err := pcap.NewBPF(layers.LinkType(linkTypeToDLT(lt)), snaplen, expr)
	if err != nil {
		t.Fatalf("pcap.NewBPF %q: %v", expr, err)
	}
	vm := xnetVM(insns)
	st.exprs++
	fails, passed := 0, 0
	defer func() {
		if passed == 0 || (passed == len(pkts) && expr != "" && lt == functions.LinkEthernet) {
			t.Errorf("%q on %s: %d of %d packets pass: the corpus does not exercise it", expr, lt, passed, len(pkts))
		}
	}()
	for _, pk := range pkts {
		ours := p.Run(pk.data, pk.wire)
		if ours != 0 {
			passed++
		}
		ref, looped := refRun(insns, pk.data, pk.wire)
		if ours != ref {
			t.Errorf("%q on %s (cap %d wire %d): ours %d, reference %d", expr, pk.name, len(pk.data), pk.wire, ours, ref)
			fails++
		}
		if got := plain.Run(pk.data, pk.wire); got != ours {
			t.Errorf("%q on %s (cap %d wire %d): without superinstructions %d, with %d", expr, pk.name, len(pk.data), pk.wire, got, ours)
			fails++
		}
		if looped {
			// libpcap 1.10 would spin forever here.
			st.looped++
			if ours != 0 {
				t.Errorf("%q on %s: budget exhausted but returned %d", expr, pk.name, ours)
			}
			continue
		}
		lib := oracle.Filter(pk.data, pk.wire)
		st.compared++
		if ours != lib {
			t.Errorf("%q on %s (cap %d wire %d): ours %d, libpcap %d\n% x", expr, pk.name, len(pk.data), pk.wire, ours, lib, pk.data)
			fails++
		}
		if len(pk.data) > 0 {
			ci := gopacket.CaptureInfo{Timestamp: time.Unix(1, 0), CaptureLength: len(pk.data), Length: int(pk.wire)}
			if m := matcher.Matches(ci, pk.data); m != (lib != 0) {
				t.Errorf("%q on %s: pcap.BPF.Matches %v, pcap_offline_filter %d", expr, pk.name, m, lib)
				fails++
			}
		}
		if vm != nil && int(pk.wire) == len(pk.data) {
			if got, err := vm.Run(pk.data); err == nil {
				st.xnet++
				if uint32(got) != lib {
					t.Errorf("%q on %s: x/net/bpf %d, libpcap %d", expr, pk.name, got, lib)
					fails++
				}
			} else {
				st.xnetSkipped++
			}
		} else {
			st.xnetSkipped++
		}
		if fails > 10 {
			t.Fatalf("%q: too many differences", expr)
		}
	}
}

// TestDifferentialLibpcap is the main correctness test of the engine:
// libpcap is the oracle, on an adversarial corpus of well-formed,
// malformed, truncated and random packets.
func TestDifferentialLibpcap(t *testing.T) {
	pkts := fullCorpus(t)
	var st diffStats
	for _, expr := range diffExprs {
		diffOne(t, expr, functions.LinkEthernet, DefaultSnaplen, pkts, &st)
	}
	st.packets = len(pkts)
	if len(diffExprs) < 45 {
		t.Fatalf("only %d expressions", len(diffExprs))
	}
	t.Logf("EN10MB: %d expressions × %d packets: %d verdicts compared with libpcap, %d also with x/net/bpf (%d not applicable), %d budget-exhausted runs",
		st.exprs, st.packets, st.compared, st.xnet, st.xnetSkipped, st.looped)
}

// TestDifferentialRawIP runs the corpus with the Ethernet header stripped
// on the raw-IP link types, and a few expressions with a small snaplen.
func TestDifferentialRawIP(t *testing.T) {
	var pkts []testPacket
	for _, p := range fullCorpus(t) {
		if len(p.data) >= 14 {
			w := p.wire
			if w >= 14 {
				w -= 14
			}
			pkts = append(pkts, testPacket{p.name + "/raw", p.data[14:], w})
		}
	}
	var st diffStats
	for _, lt := range []functions.LinkType{functions.LinkRaw, functions.LinkIPv4, functions.LinkIPv6} {
		for _, expr := range otherLinkExprs {
			if _, err := Compile(expr, lt, DefaultSnaplen); err != nil {
				continue // e.g. "ip6" on LINKTYPE_IPV4
			}
			diffOne(t, expr, lt, DefaultSnaplen, pkts, &st)
		}
	}
	for _, expr := range []string{"tcp", "ip6 protochain 6", "greater 100"} {
		diffOne(t, expr, functions.LinkRaw, 96, pkts, &st)
	}
	st.packets = len(pkts)
	t.Logf("raw IP: %d programs × %d packets: %d verdicts compared with libpcap, %d with x/net/bpf", st.exprs, st.packets, st.compared, st.xnet)
}

// TestHostileProtochain: a packet that makes libpcap's IPv4 protochain loop
// forever is rejected within the budget.
func TestHostileProtochain(t *testing.T) {
	insns, err := Compile("protochain 6", functions.LinkEthernet, 0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Load(insns)
	if err != nil {
		t.Fatal(err)
	}
	pkt := hostileLoop(t)
	if _, looped := refRun(insns, pkt, uint32(len(pkt))); !looped {
		t.Fatal("hostile packet does not loop in the reference interpreter")
	}
	start := time.Now()
	if got := p.Run(pkt, uint32(len(pkt))); got != 0 {
		t.Fatalf("Run = %d, want 0", got)
	}
	if d := time.Since(start); d > time.Second { // microseconds; a loop without the budget never ends
		t.Fatalf("Run took %v", d)
	}
	// A chain of 70 extension headers needs more than current libpcap's 64
	// backward jumps; libpcap 1.10 (the oracle) accepts it, and so do we.
	for _, pk := range baseCorpus(t) {
		if pk.name == "ipv6-70-dstopts-tcp" {
			lib := oracleProgram(t, insns).Filter(pk.data, pk.wire)
			if got := p.Run(pk.data, pk.wire); got != DefaultSnaplen || lib != DefaultSnaplen {
				t.Fatalf("70 extension headers: ours %d, libpcap %d, want %d", got, lib, DefaultSnaplen)
			}
			return
		}
	}
	t.Fatal("corpus lacks ipv6-70-dstopts-tcp")
}
