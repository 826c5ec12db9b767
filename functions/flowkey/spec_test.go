package flowkey

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in, canon string
		words     int
	}{
		{"5tuple", "srcip,dstip,srcport,dstport,proto", 5},
		{"srcip/24", "srcip/24", 3},
		{" dstport , srcip ", "dstport,srcip", 3},
		{"srcip/48", "srcip/48", 3},
		{"srcip/24/64,dstip/0", "srcip/24/64,dstip/0", 5},
		{"srcip/32/32", "srcip/32", 3},
		{"vlan,srcmac,dstmac", "vlan,srcmac,dstmac", 3},
		{"proto", "proto", 1},
		{"SrcIP", "srcip", 3},
		{"5tuple,vlan,srcmac,dstmac", "srcip,dstip,srcport,dstport,proto,vlan,srcmac,dstmac", MaxWords},
	} {
		sp, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if sp.String() != tc.canon || sp.Words() != tc.words {
			t.Errorf("Parse(%q) = %q, %d words; want %q, %d", tc.in, sp.String(), sp.Words(), tc.canon, tc.words)
		}
		again, err := Parse(sp.String())
		if err != nil || again.String() != sp.String() || again.pfx != sp.pfx {
			t.Errorf("canonical form %q does not parse to itself: %v", sp.String(), err)
		}
	}
}

func TestParsePrefixes(t *testing.T) {
	for _, tc := range []struct {
		in     string
		v4, v6 int
	}{
		{"srcip", 32, 128}, {"srcip/24", 24, 24}, {"srcip/0", 0, 0}, {"srcip/64", 32, 64},
		{"srcip/128", 32, 128}, {"srcip/16/48", 16, 48}, {"srcip/32/128", 32, 128},
	} {
		sp, err := Parse(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		v4, v6, set := sp.Prefix(SrcIP)
		if v4 != tc.v4 || v6 != tc.v6 || set != strings.Contains(tc.in, "/") {
			t.Errorf("%s: prefix %d/%d set=%v, want %d/%d", tc.in, v4, v6, set, tc.v4, tc.v6)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "empty key"},
		{"srcpt", `unknown key field "srcpt" (did you mean "srcport"?)`},
		{"dstmca", `(did you mean "dstmac"?)`},
		{"5tupel", `(did you mean "5tuple"?)`},
		{"flowlabel", `unknown key field "flowlabel" (fields: srcip`},
		{"srcip,srcip", "key field srcip given twice"},
		{"5tuple,dstport", "key field dstport given twice"},
		{"srcip/24,5tuple", "key field srcip given twice"},
		{"srcip/129", "prefix length 129 out of range 0..128"},
		{"srcip/33/64", "IPv4 prefix length 33 out of range 0..32"},
		{"srcip/24/129", "IPv6 prefix length 129 out of range 0..128"},
		{"srcip/-1", "must be a number"},
		{"srcip/", "must be a number"},
		{"srcip/24/", "must be a number"},
		{"srcip/x", "must be a number"},
		{"dstport/16", "only srcip and dstip take a prefix length"},
		{"5tuple/24", "only srcip and dstip take a prefix length"},
		{"srcip,,dstip", "empty field"},
	} {
		_, err := Parse(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}

func TestWordLayout(t *testing.T) {
	sp, _ := Parse("dstmac,dstip,proto,srcip,srcmac")
	if sp.HeaderMask() != 0xffff {
		t.Errorf("header mask %#x", sp.HeaderMask())
	}
	if m := mustParse(t, "dstport,vlan").HeaderMask(); m != 0xffff<<DstPortShift|PortsPresent|0xfff<<VLANShift|VLANPresent {
		t.Errorf("header mask %#x", m)
	}
	for f, w := range map[Field]int{SrcIP: 1, DstIP: 3, SrcMAC: 5, DstMAC: 6, Proto: 0, SrcPort: -1, VLAN: -1} {
		if got := sp.Word(f); got != w {
			t.Errorf("Word(%s) = %d, want %d", f, got, w)
		}
	}
}
