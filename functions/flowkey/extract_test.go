package flowkey

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/record"
)

func mustParse(t testing.TB, s string) *Spec {
	t.Helper()
	sp, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// keyJSON extracts with spec and returns the key as JSON, or "none".
func keyJSON(t testing.TB, spec string, lt functions.LinkType, pkt []byte) string {
	sp := mustParse(t, spec)
	var k Key
	if !sp.Extract(lt, pkt, &k) {
		if k != (Key{}) {
			t.Errorf("no key, but k = %x", k)
		}
		return "none"
	}
	for i := sp.Words(); i < MaxWords; i++ {
		if k[i] != 0 {
			t.Errorf("%s: word %d beyond the spec's %d is %x", spec, i, sp.Words(), k[i])
		}
	}
	// A report's key, as export writes it, is the same JSON.
	var b record.Builder
	buf := make([]byte, 512)
	b.Start(buf, record.Report, 0, "t")
	b.Begin("key")
	sp.Record(&b, &k)
	b.End()
	n, ok := b.Finish()
	if !ok {
		t.Fatalf("%s: the key does not fit a record", spec)
	}
	rec, err := record.AppendJSON(nil, buf[:n])
	if want := `{"function":"t","ts":0,"kind":"report","key":` + sp.Format(&k) + `}`; err != nil || string(rec) != want {
		t.Errorf("%s: the key as a record is %s (%v), as JSON %s", spec, rec, err, want)
	}
	return sp.Format(&k)
}

func TestExtract(t *testing.T) {
	eth4 := func(proto uint8, frag uint16, l4 []byte, vids ...uint16) []byte {
		return cat(eth(0x0800, vids...), ip4(proto, v4a, v4b, frag, 0, l4))
	}
	tcp := l4ports(40000, 443, 20)
	const five = "5tuple"
	for _, tc := range []struct {
		name, spec string
		lt         functions.LinkType
		pkt        []byte
		want       string
	}{
		{"tcp4", five, functions.LinkEthernet, eth4(6, 0, tcp),
			`{"srcip":"10.0.1.77","dstip":"198.51.100.9","srcport":40000,"dstport":443,"proto":6}`},
		{"prefix", "srcip/24,dstip/8,dstport", functions.LinkEthernet, eth4(6, 0, tcp),
			`{"srcip":"10.0.1.0/24","dstip":"198.0.0.0/8","dstport":443}`},
		{"udp", five, functions.LinkEthernet, eth4(17, 0, l4ports(53, 5353, 8)),
			`{"srcip":"10.0.1.77","dstip":"198.51.100.9","srcport":53,"dstport":5353,"proto":17}`},
		{"sctp", "srcport,dstport", functions.LinkEthernet, eth4(132, 0, l4ports(1, 2, 12)),
			`{"srcport":1,"dstport":2}`},
		{"icmp no ports", five, functions.LinkEthernet, eth4(1, 0, []byte{8, 0, 0, 0, 0, 0, 0, 0}),
			`{"srcip":"10.0.1.77","dstip":"198.51.100.9","srcport":null,"dstport":null,"proto":1}`},
		{"first fragment", "dstport,proto", functions.LinkEthernet, eth4(6, 0x2000, tcp), `{"dstport":443,"proto":6}`},
		{"later fragment", "dstport,proto", functions.LinkEthernet, eth4(6, 0x2000|185, tcp), `{"dstport":null,"proto":6}`},
		{"last fragment", "dstport", functions.LinkEthernet, eth4(6, 3, tcp), `{"dstport":null}`},
		{"ipv4 options", "dstport", functions.LinkEthernet, cat(eth(0x0800), ip4(6, v4a, v4b, 0, 3, tcp)), `{"dstport":443}`},
		{"vlan", "vlan,dstport", functions.LinkEthernet, eth4(6, 0, tcp, 100), `{"vlan":100,"dstport":443}`},
		{"qinq outer", "vlan,srcip", functions.LinkEthernet, eth4(6, 0, tcp, 7, 4095), `{"vlan":7,"srcip":"10.0.1.77"}`},
		{"untagged", "vlan", functions.LinkEthernet, eth4(6, 0, tcp), `{"vlan":null}`},
		{"vlan 0", "vlan", functions.LinkEthernet, eth4(6, 0, tcp, 0), `{"vlan":0}`},
		{"macs", "srcmac,dstmac", functions.LinkEthernet, eth4(6, 0, tcp), `{"srcmac":"02:00:00:aa:bb:cc","dstmac":"02:00:00:11:22:33"}`},
		{"arp macs", "srcmac", functions.LinkEthernet, cat(eth(0x0806), make([]byte, 28)), `{"srcmac":"02:00:00:aa:bb:cc"}`},
		{"arp no ip", "srcmac,dstip", functions.LinkEthernet, cat(eth(0x0806), make([]byte, 28)), "none"},
		{"arp vlan", "vlan", functions.LinkEthernet, cat(eth(0x0806, 5), make([]byte, 28)), `{"vlan":5}`},
		{"802.3 length", "srcip", functions.LinkEthernet, cat(eth(0x05dc), make([]byte, 46)), "none"},
		{"five tags", "vlan,srcip", functions.LinkEthernet,
			cat(macB, macA, u16(0x8100), u16(1), u16(0x8100), u16(2), u16(0x8100), u16(3), u16(0x8100), u16(4),
				u16(0x8100), u16(5), u16(0x0800), ip4(6, v4a, v4b, 0, 0, tcp)), "none"},
		{"four tags", "vlan,srcip", functions.LinkEthernet,
			cat(macB, macA, u16(0x9100), u16(1), u16(0x8100), u16(2), u16(0x8100), u16(3), u16(0x8100), u16(4),
				u16(0x0800), ip4(6, v4a, v4b, 0, 0, tcp)), `{"vlan":1,"srcip":"10.0.1.77"}`},
		{"tag cut", "vlan", functions.LinkEthernet, cat(macB, macA, u16(0x8100), []byte{0}), `{"vlan":null}`},
		{"runt", "srcmac", functions.LinkEthernet, cat(macB, macA, []byte{8}), "none"},
		{"empty", "vlan", functions.LinkEthernet, nil, "none"},
		{"ipv6 tcp", five, functions.LinkEthernet, cat(eth(0x86dd), ip6(6, v6a, v6b, tcp)),
			`{"srcip":"2001:db8:1234:5678:9abc::1","dstip":"2001:db8:ff00::53","srcport":40000,"dstport":443,"proto":6}`},
		{"ipv6 prefix", "srcip/24,dstip/32/48", functions.LinkEthernet, cat(eth(0x86dd), ip6(6, v6a, v6b, tcp)),
			`{"srcip":"2001:d00::/24","dstip":"2001:db8:ff00::/48"}`},
		{"ipv6 prefix 72", "srcip/72", functions.LinkEthernet, cat(eth(0x86dd), ip6(6, v6a, v6b, tcp)),
			`{"srcip":"2001:db8:1234:5678:9a00::/72"}`},
		{"ipv4 prefix 72", "srcip/72", functions.LinkEthernet, eth4(6, 0, tcp), `{"srcip":"10.0.1.77/32"}`},
		{"ipv6 ext chain", "proto,dstport", functions.LinkEthernet,
			cat(eth(0x86dd), ip6(0, v6a, v6b, cat(ext(43, 0), ext(60, 1), fragHdr(60, 0, true), ext(17, 0), l4ports(9, 53, 8)))),
			`{"proto":17,"dstport":53}`},
		{"ipv6 later fragment", "proto,dstport", functions.LinkEthernet,
			cat(eth(0x86dd), ip6(44, v6a, v6b, cat(fragHdr(6, 100, false), tcp))), `{"proto":6,"dstport":null}`},
		{"ipv6 8 ext then tcp", "proto,dstport", functions.LinkEthernet,
			cat(eth(0x86dd), ip6(60, v6a, v6b, cat(ext(60, 0), ext(60, 0), ext(60, 0), ext(60, 0), ext(60, 0), ext(60, 0), ext(60, 0), ext(6, 0), tcp))),
			`{"proto":6,"dstport":443}`},
		{"ipv6 9 ext", "proto,dstport", functions.LinkEthernet,
			cat(eth(0x86dd), ip6(60, v6a, v6b, cat(ext(60, 0), ext(60, 0), ext(60, 0), ext(60, 0), ext(60, 0), ext(60, 0), ext(60, 0), ext(60, 0), ext(6, 0), tcp))),
			`{"proto":60,"dstport":null}`},
		{"ipv6 ext past payload", "proto,dstport", functions.LinkEthernet,
			cat(eth(0x86dd), ip6(0, v6a, v6b, ext(6, 30))), `{"proto":6,"dstport":null}`},
		{"ipv6 no next", "proto,srcport", functions.LinkEthernet, cat(eth(0x86dd), ip6(59, v6a, v6b, nil)), `{"proto":59,"srcport":null}`},
		{"ipv6 version 4 in ipv6 ethertype", "srcip", functions.LinkEthernet, cat(eth(0x86dd), ip4(6, v4a, v4b, 0, 0, tcp), make([]byte, 40)), "none"},
		{"ipv4 short", "proto", functions.LinkEthernet, cat(eth(0x0800), ip4(6, v4a, v4b, 0, 0, nil)[:19]), "none"},
		{"ipv4 ihl 4", "proto", functions.LinkEthernet, cat(eth(0x0800), patch(ip4(6, v4a, v4b, 0, 0, tcp), 0, 0x44)), "none"},
		{"ipv4 ihl 15 beyond data", "proto,dstport", functions.LinkEthernet, cat(eth(0x0800), patch(patch(ip4(6, v4a, v4b, 0, 0, tcp), 0, 0x4f), 2, 1)),
			`{"proto":6,"dstport":null}`},
		{"ipv4 totlen below ihl", "proto", functions.LinkEthernet, cat(eth(0x0800), patch(ip4(6, v4a, v4b, 0, 0, tcp), 3, 19)), "none"},
		{"ipv4 totlen 22", "proto,dstport", functions.LinkEthernet, cat(eth(0x0800), patch(ip4(6, v4a, v4b, 0, 0, tcp), 3, 22)),
			`{"proto":6,"dstport":null}`},
		{"ipv4 totlen 24", "proto,dstport", functions.LinkEthernet, cat(eth(0x0800), patch(ip4(6, v4a, v4b, 0, 0, tcp), 3, 24)),
			`{"proto":6,"dstport":443}`},
		{"ipv4 totlen beyond frame", "dstport", functions.LinkEthernet, cat(eth(0x0800), patch(ip4(6, v4a, v4b, 0, 0, tcp), 2, 9)),
			`{"dstport":443}`},
		{"ipv4 TSO length 0", "dstport", functions.LinkEthernet, cat(eth(0x0800), patch(patch(ip4(6, v4a, v4b, 0, 0, tcp), 2, 0), 3, 0)),
			`{"dstport":443}`},
		{"ipv4 ports cut", "srcport", functions.LinkEthernet, eth4(6, 0, tcp)[:14+20+3], `{"srcport":null}`},
		{"ipv4 version 6", "proto", functions.LinkEthernet, cat(eth(0x0800), patch(ip4(6, v4a, v4b, 0, 0, tcp), 0, 0x65)), "none"},
		{"raw v4", five, functions.LinkRaw, ip4(17, v4a, v4b, 0, 0, l4ports(1, 2, 8)),
			`{"srcip":"10.0.1.77","dstip":"198.51.100.9","srcport":1,"dstport":2,"proto":17}`},
		{"raw v6", "dstip", functions.LinkRaw, ip6(17, v6a, v6b, l4ports(1, 2, 8)), `{"dstip":"2001:db8:ff00::53"}`},
		{"raw v5", "dstip", functions.LinkRaw, patch(ip4(17, v4a, v4b, 0, 0, nil), 0, 0x55), "none"},
		{"raw empty", "vlan", functions.LinkRaw, nil, "none"},
		{"raw macs", "srcmac", functions.LinkRaw, ip4(17, v4a, v4b, 0, 0, nil), "none"},
		{"raw vlan", "vlan", functions.LinkRaw, ip4(17, v4a, v4b, 0, 0, nil), `{"vlan":null}`},
		{"ipv4 link", "dstip", functions.LinkIPv4, ip4(17, v4a, v4b, 0, 0, nil), `{"dstip":"198.51.100.9"}`},
		{"ipv4 link v6", "dstip", functions.LinkIPv4, ip6(17, v6a, v6b, nil), "none"},
		{"ipv6 link", "dstip", functions.LinkIPv6, ip6(17, v6a, v6b, nil), `{"dstip":"2001:db8:ff00::53"}`},
		{"ipv6 link v4", "dstip", functions.LinkIPv6, cat(ip4(17, v4a, v4b, 0, 0, nil), make([]byte, 40)), "none"},
		{"null le", "dstport", functions.LinkNull, cat([]byte{2, 0, 0, 0}, ip4(6, v4a, v4b, 0, 0, tcp)), `{"dstport":443}`},
		{"null be", "dstport", functions.LinkNull, cat([]byte{0, 0, 0, 2}, ip4(6, v4a, v4b, 0, 0, tcp)), `{"dstport":443}`},
		{"null v6 darwin", "dstport", functions.LinkNull, cat([]byte{30, 0, 0, 0}, ip6(6, v6a, v6b, tcp)), `{"dstport":443}`},
		{"null v6 freebsd be", "dstport", functions.LinkNull, cat([]byte{0, 0, 0, 28}, ip6(6, v6a, v6b, tcp)), `{"dstport":443}`},
		{"null unknown", "dstport", functions.LinkNull, cat([]byte{7, 0, 0, 0}, ip4(6, v4a, v4b, 0, 0, tcp)), "none"},
		{"loop v4", "dstport", functions.LinkLoop, cat([]byte{0, 0, 0, 2}, ip4(6, v4a, v4b, 0, 0, tcp)), `{"dstport":443}`},
		{"loop le is wrong", "dstport", functions.LinkLoop, cat([]byte{2, 0, 0, 0}, ip4(6, v4a, v4b, 0, 0, tcp)), "none"},
		{"sll", "srcmac,vlan,dstport", functions.LinkLinuxSLL, cat(sll(6, 0x0800), ip4(6, v4a, v4b, 0, 0, tcp)),
			`{"srcmac":"02:00:00:aa:bb:cc","vlan":null,"dstport":443}`},
		{"sll tag", "vlan,dstport", functions.LinkLinuxSLL, cat(sll(6, 0x8100), u16(42), u16(0x86dd), ip6(6, v6a, v6b, tcp)),
			`{"vlan":42,"dstport":443}`},
		{"sll no mac", "srcmac", functions.LinkLinuxSLL, cat(sll(0, 0x0800), ip4(6, v4a, v4b, 0, 0, tcp)), "none"},
		{"sll dstmac", "dstmac", functions.LinkLinuxSLL, cat(sll(6, 0x0800), ip4(6, v4a, v4b, 0, 0, tcp)), "none"},
		{"sll short", "vlan", functions.LinkLinuxSLL, sll(6, 0x0800)[:15], "none"},
		{"sll2", "srcmac,proto", functions.LinkSLL2, cat(sll2(6, 0x86dd), ip6(17, v6a, v6b, nil)),
			`{"srcmac":"02:00:00:aa:bb:cc","proto":17}`},
		{"sll2 tag", "vlan,proto", functions.LinkSLL2, cat(sll2(6, 0x88a8), u16(9), u16(0x8100), u16(10), u16(0x0800), ip4(1, v4a, v4b, 0, 0, nil)),
			`{"vlan":9,"proto":1}`},
		{"sll2 no mac", "srcmac", functions.LinkSLL2, cat(sll2(4, 0x0800), ip4(6, v4a, v4b, 0, 0, tcp)), "none"},
		{"unsupported link", "vlan", functions.LinkType(147), eth4(6, 0, tcp), "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := keyJSON(t, tc.spec, tc.lt, tc.pkt); got != tc.want {
				t.Errorf("key %s of %x\n got %s\nwant %s", tc.spec, tc.pkt, got, tc.want)
			}
		})
	}
}

func patch(b []byte, off int, v byte) []byte { b[off] = v; return b }

func sll(halen uint16, proto uint16) []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint16(b[2:], 1)
	binary.BigEndian.PutUint16(b[4:], halen)
	copy(b[6:], macA)
	binary.BigEndian.PutUint16(b[14:], proto)
	return b
}

func sll2(halen byte, proto uint16) []byte {
	b := make([]byte, 20)
	binary.BigEndian.PutUint16(b, proto)
	binary.BigEndian.PutUint32(b[4:], 3)
	binary.BigEndian.PutUint16(b[8:], 1)
	b[11] = halen
	copy(b[12:], macA)
	return b
}

func TestSupported(t *testing.T) {
	for _, lt := range []functions.LinkType{0, 1, 101, 108, 113, 228, 229, 276} {
		if !Supported(lt) {
			t.Errorf("%s not supported", lt)
		}
	}
	if Supported(147) || Supported(127) {
		t.Error("USER0 or RADIOTAP supported")
	}
}

func TestKeysDiffer(t *testing.T) {
	// IPv4 10.0.0.1 and IPv6 0a00:0001:: have the same address words but not the same family.
	sp := mustParse(t, "srcip")
	var a, b Key
	v6 := [16]byte{10, 0, 0, 1}
	sp.Extract(functions.LinkRaw, ip4(6, [4]byte{10, 0, 0, 1}, v4b, 0, 0, nil), &a)
	sp.Extract(functions.LinkRaw, ip6(6, v6, v6b, nil), &b)
	if a == b || a[1] != b[1] {
		t.Errorf("v4 %x and v6 %x keys", a, b)
	}
	if strings.Contains(sp.Format(&a), "::") {
		t.Error(sp.Format(&a))
	}
}
