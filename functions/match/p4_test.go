package match_test

import (
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/functions/gen"
	"github.com/ffpf-go/ffpf/functions/internal/p4test"
	_ "github.com/ffpf-go/ffpf/functions/match"
)

// p4Preds are predicates a switch runs: header fields, layers, prefixes,
// masks, remainders by powers of two, sums and differences, scaled
// comparisons, negations.
var p4Preds = []string{
	"tcp.dport == 443", "tcp and tcp.flags & 2 == 2", "ipv4.src in 10.0.0.0/8", "ipv6.dst in ff00::/8",
	"udp.len > 100", "pkt.len > 1000 and not vlan", "vlan.id == 100", "icmp.type == 8", "icmp.code != 0",
	"ip.proto == 17", "ipv4.ttl < 64 or ipv6.hlim < 64", "eth.type == 0x86dd", "tcp.sport + tcp.dport > 2000",
	"ipv4.len - 20 >= 40", "tcp.win % 256 == 255", "pkt.len / 2 > 600", "ipv6.src == 2001:db8::1",
	"not tcp.dport != 80", "eth.src == 01:00:5e:00:00:01", "0.5 * pkt.len < udp.len + 30", "tcp.seq > tcp.ack",
	"ipv4 and not ipv4.src in 192.168.0.0/16", "ip and not tcp and not udp", "eth.dst == 02:00:00:11:22:33",
	"tcp.dport - tcp.sport == 0 - 944", "ipv6.nh == 0 and udp", "ipv4.tos & 0xfc == 0xb8", "vlan and ipv6",
	"(ipv4.id + ipv4.ttl) & 255 > 100", "(tcp.sport - tcp.dport) & 63 < 32",
}

// A predicate on a switch passes what it passes in userspace, on every
// adversarial frame cut at every length and on generated traffic.
func TestP4MatchEqualsGo(t *testing.T) {
	ps := p4test.Packets(p4test.Cuts(p4test.Adversarial()))
	ps = append(ps, p4test.Trace(gen.Config{Seed: 17, Packets: 1500, Malformed: 0.2, VLAN: 0.3, IPv6: 0.4})...)
	for _, pred := range p4Preds {
		r := p4test.Run(t, p4test.Parse(t, `(match,"`+pred+`")`), ps)
		r.SamePasses(t, ps)
		n := 0
		for _, p := range r.PassP4 {
			if p {
				n++
			}
		}
		if n == 0 || n == len(ps) {
			t.Errorf("%q passes %d of %d packets: the test compares too little", pred, n, len(ps))
		}
	}
}

// What a switch cannot compute is refused with the reason.
func TestP4MatchRefusals(t *testing.T) {
	for pred, want := range map[string]string{
		"pkt.len * tcp.dport > 5":   "product of two values",
		"pkt.len / tcp.dport > 5":   "divides by a value",
		"tcp.win % 100 == 1":        "not a power of two",
		"(tcp.win + 1) % 64 == 1":   "may be negative",
		"pkt.ts > 1700000000s":      "packet clock",
		"pkt.len * 0.333333333 > 1": "",
	} {
		_, err := p4test.Parse(t, `(match,"`+pred+`")`).P4("f#1")
		if err == nil && want != "" || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error about %q", pred, err, want)
		}
	}
}
