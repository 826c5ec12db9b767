package p4

import (
	"strings"
	"testing"
)

// messy is a program written by hand in a style other than Format's:
// comments, odd spacing, redundant parentheses, else-if chains, keysets.
const messy = `#include <core.p4>
#include <v1model.p4>
// a comment
header h_t { bit<8> a; bit<16> b; varbit<32> opt; }
struct headers_t { h_t h; }
struct metadata_t { bit<32> x; bit<32> y; bool f; }
parser P(packet_in packet, out headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
  state start { packet.extract(hdr.h, (bit<32>)hdr.h.a << 3);
    transition select(hdr.h.a, hdr.h.b) { (1, 0x10 &&& 0xf0): next; (2 .. 5, _): accept; default: reject; } }
  state next { transition accept; }
}
control V(inout headers_t hdr, inout metadata_t meta) { apply { } }
control I(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
  register<bit<32>>(16) r; counter(32w4, CounterType.packets) c;
  action set(bit<9> port) { standard_metadata.egress_spec = port; }
  action nop() { }
  table t { key = { hdr.h.a: exact; hdr.h.isValid(): exact @name("v"); } actions = { set; @defaultonly nop; }
    const default_action = nop(); size = 64;
    const entries = { (8w1, true): set(9w2); (8w2 &&& 8w0xf, false): set(9w3); } }
  apply {
    if (((meta.x + 1) * 2) == (meta.y)) { t.apply(); } else if (!meta.f) meta.x = meta.y >> 2; else { meta.y = (meta.f ? 32w1 : (meta.x > 3 ? 2 : 3)); }
    bit<8> z = hdr.h.a[7:4] ++ hdr.h.a[3:0];
    digest<metadata_t>(1, {meta.x, meta.y, meta.f});
    hash(meta.x, HashAlgorithm.crc32, 32w0, {hdr.h.a, hdr.h.b}, 32w1024);
    meta.x = (bit<32>)(bit<1>)meta.f - ~meta.y |+| 0x1_0;
    meta.x = meta.x << 2 >> 1 & 3 | 4 ^ 5;
  }
}
V1Switch(P(), V(), I(), I(), V(), D()) main;
`

func TestFormatIdempotent(t *testing.T) {
	prog, err := Parse("messy.p4", messy)
	if err != nil {
		t.Fatal(err)
	}
	out := Format(prog)
	prog2, err := Parse("out.p4", string(out))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	out2 := Format(prog2)
	if string(out) != string(out2) {
		t.Fatalf("printing twice differs:\n%s\n----\n%s", out, out2)
	}
	for _, want := range []string{
		"if ((meta.x + 1) * 2 == meta.y) {",
		"} else if (!meta.f) {",
		"meta.y = meta.f ? 32w1 : (meta.x > 3 ? 2 : 3);",
		"(1, 0x10 &&& 0xf0): next;",
		"(2 .. 5, _): accept;",
		"hdr.h.isValid(): exact @name(\"v\");",
		"@defaultonly nop;",
		"const default_action = nop();",
		"meta.x = (bit<32>)(bit<1>)meta.f - ~meta.y |+| 0x10;",
		"meta.x = meta.x << 2 >> 1 & 3 | 4 ^ 5;",
		"packet.extract(hdr.h, (bit<32>)hdr.h.a << 3);",
		"register<bit<32>>(16) r;\n    counter(32w4, CounterType.packets) c;\n\n    action set",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
