package p4

import (
	"strings"
	"testing"
)

// base is a small v1model program that uses every rule the checker has;
// each case of TestCheckErrors breaks one of them.
const base = `#include <core.p4>
#include <v1model.p4>

header eth_t {
    bit<48> dst;
    bit<48> src;
    bit<16> type_;
}

header ip_t {
    bit<4> version;
    bit<4> ihl;
    bit<8> proto;
    bit<16> csum;
    bit<32> src;
}

header opt_t {
    varbit<320> options;
}

struct headers_t {
    eth_t eth;
    ip_t ip;
    opt_t opt;
}

struct metadata_t {
    bit<32> idx;
    bit<16> val;
    bit<8> small;
}

struct dig_t {
    bit<32> src;
    bit<16> val;
}

parser P(packet_in packet, out headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.eth);
        transition select(hdr.eth.type_) {
            16w0x800: parse_ip;
            default: accept;
        }
    }

    state parse_ip {
        packet.extract(hdr.ip);
        packet.extract(hdr.opt, (bit<32>)(hdr.ip.ihl - 4w5) << 5);
        transition select(hdr.ip.ihl, hdr.ip.proto) {
            (4w5, 8w6): accept;
            (4w0 &&& 4w12, _): reject;
            default: accept;
        }
    }
}

control V(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ip.isValid(), {hdr.ip.version, hdr.ip.ihl, hdr.ip.proto, hdr.ip.src}, hdr.ip.csum, HashAlgorithm.csum16);
    }
}

control I(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    register<bit<16>>(32w64) r;
    counter(32w8, CounterType.packets_and_bytes) c;

    action fwd(bit<9> port) {
        standard_metadata.egress_spec = port;
    }

    action drop() {
        mark_to_drop(standard_metadata);
    }

    table t {
        key = {
            hdr.ip.proto: exact;
            hdr.ip.src: lpm;
        }
        actions = {
            fwd;
            drop;
        }
        default_action = fwd(9w1);
        size = 64;
        const entries = {
            (8w6, 32w0xa000000 &&& 32w0xff000000): fwd(9w2);
        }
    }

    apply {
        t.apply();
        hash(meta.idx, HashAlgorithm.crc32, 32w0, {hdr.ip.src, hdr.ip.proto}, 32w64);
        r.read(meta.val, meta.idx);
        r.write(meta.idx, meta.val + 16w1);
        r.write(32w63, 16w0);
        c.count(32w7);
        random(meta.small, 8w0, 8w99);
        if (meta.small < 8w10) {
            digest<dig_t>(32w1, {hdr.ip.src, meta.val});
            clone(CloneType.I2E, 32w5);
        }
        meta.small = meta.idx[3:0] ++ 4w0;
        bit<1> b = (bit<1>)hdr.ip.isValid();
        meta.val = b == 1w1 ? meta.val : 16w0;
    }
}

control E(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    apply {
    }
}

control C(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ip.isValid(), {hdr.ip.version, hdr.ip.ihl, hdr.ip.proto, hdr.ip.src}, hdr.ip.csum, HashAlgorithm.csum16);
    }
}

control D(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.eth);
        packet.emit(hdr.ip);
        packet.emit(hdr.opt);
    }
}

V1Switch(P(), V(), I(), E(), C(), D()) main;
`

func TestCheckBase(t *testing.T) {
	prog, err := Parse("base.p4", base)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Check("base.p4", base, prog)
	if err != nil {
		t.Fatal(err.(ErrorList).Format())
	}
	if c.Ingress == nil || c.Ingress.Name != "I" || c.Deparse.Name != "D" || c.Parser.Name != "P" {
		t.Errorf("V1Switch's blocks: %+v", c)
	}
	for _, q := range []string{"I.r", "I.c", "I.t", "I.fwd", "I.drop"} {
		if c.Objects[q] == nil {
			t.Errorf("no object %s", q)
		}
	}
	if got := string(Format(prog)); got != base {
		t.Errorf("base is not in canonical form:\n%s", got)
	}
}

// TestCheckErrors breaks each rule once: the checker must report it, at
// the line of the change.
func TestCheckErrors(t *testing.T) {
	for _, tt := range []struct {
		name, old, new, want string
	}{
		{"undeclared name", "meta.val + 16w1", "meta.vall + 16w1", "metadata_t has no field vall"},
		{"undeclared variable", "bit<1> b = (bit<1>)hdr.ip.isValid();", "bit<1> b = (bit<1>)hdr.ip.isValid() & x;", "undeclared name x"},
		{"did you mean", "t.apply();", "tt.apply();", "undeclared name tt (did you mean t?)"},
		{"declare before use", "    table t {", "    action late() {\n        later();\n    }\n\n    action later() {\n    }\n\n    table t {", "later is used before its declaration at"},
		{"type before use", "struct headers_t {\n    eth_t eth;", "struct headers_t {\n    late_t eth;", "undeclared name late_t"},
		{"width mismatch", "meta.val + 16w1", "meta.val + 8w1", "+ of bit<16> and bit<8>: the operands' widths differ"},
		{"assignment width", "standard_metadata.egress_spec = port;", "standard_metadata.egress_spec = 16w3;", "the value assigned is bit<16>, not bit<9>"},
		{"constant too wide", "random(meta.small, 8w0, 8w99);", "random(meta.small, 8w0, 300);", "300 does not fit bit<8>"},
		{"bad cast", "bit<1> b = (bit<1>)hdr.ip.isValid();", "bit<1> b = (bit<1>)(bit<2>)hdr.ip.isValid();", "cannot cast bool to bit<2>"},
		{"bool condition", "if (meta.small < 8w10) {", "if (meta.small) {", "a condition is bit<8>, not bool"},
		{"slice out of range", "meta.idx[3:0]", "meta.idx[32:0]", "slice [32:0] of bit<32>"},
		{"register index out of bounds", "r.write(32w63, 16w0);", "r.write(32w64, 16w0);", "index 64 is out of bounds: register r has 64 cells"},
		{"counter index out of bounds", "c.count(32w7);", "c.count(32w8);", "index 8 is out of bounds: counter c has 8 cells"},
		{"register read type", "r.read(meta.val, meta.idx);", "r.read(meta.small, meta.idx);", "the value read is bit<8>, not bit<16>"},
		{"register method", "r.write(32w63, 16w0);", "r.clear();", "a register has read and write, not clear"},
		{"register type", "register<bit<16>>(32w64) r;", "register<bool>(32w64) r;", "a register's cells are bit<W>, not bool"},
		{"register size", "register<bit<16>>(32w64) r;", "register<bit<16>>(32w0) r;", "register r has no cells"},
		{"counter arguments", "counter(32w8, CounterType.packets_and_bytes) c;", "counter(32w8) c;", "counter(bit<32> size, CounterType type) takes 2 arguments"},
		{"counter type", "CounterType.packets_and_bytes", "CounterType.packet", "CounterType has no member packet"},
		{"hash data", "{hdr.ip.src, hdr.ip.proto}, 32w64", "hdr.ip.src, 32w64", "hash's data is a list"},
		{"hash algorithm", "HashAlgorithm.crc32", "HashAlgorithm.crc64", "HashAlgorithm has no member crc64"},
		{"hash arguments", "hash(meta.idx, HashAlgorithm.crc32, 32w0, {hdr.ip.src, hdr.ip.proto}, 32w64);", "hash(meta.idx, HashAlgorithm.crc32, {hdr.ip.src}, 32w64);", "hash takes 5 arguments, not 4"},
		{"hash base width", "HashAlgorithm.crc32, 32w0,", "HashAlgorithm.crc32, 0,", "hash's base is bit<W>, not int"},
		{"random range", "random(meta.small, 8w0, 8w99);", "random(meta.small, 8w99, 8w0);", "random's range [99, 0] is empty"},
		{"digest fields", "{hdr.ip.src, meta.val});", "{hdr.ip.src});", "digest<dig_t> of 1 values: dig_t has 2 fields"},
		{"digest field width", "{hdr.ip.src, meta.val});", "{hdr.ip.src, meta.small});", "field val of dig_t is bit<8>, not bit<16>"},
		{"digest type", "digest<dig_t>(32w1, {hdr.ip.src, meta.val});", "digest(32w1, {hdr.ip.src, meta.val});", "digest of a list needs its struct type"},
		{"digest in egress", "control E(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {\n    apply {\n", "control E(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {\n    apply {\n        digest<dig_t>(32w1, {hdr.ip.src, meta.val});\n", "digest in the egress control"},
		{"clone type", "clone(CloneType.I2E, 32w5);", "clone(CloneType.E2E, 32w5);", "an egress-to-egress clone is made in egress"},
		{"clone session", "clone(CloneType.I2E, 32w5);", "clone(CloneType.I2E, 16w5);", "clone's session is bit<16>, not bit<32>"},
		{"mark_to_drop", "mark_to_drop(standard_metadata);", "mark_to_drop();", "mark_to_drop takes 1 arguments, not 0"},
		{"mark_to_drop argument", "mark_to_drop(standard_metadata);", "mark_to_drop(meta);", "mark_to_drop takes the standard_metadata parameter"},
		{"update_checksum place", "hdr.ip.csum, HashAlgorithm.csum16);\n    }\n}\n\ncontrol D", "hdr.ip.csum, HashAlgorithm.csum16);\n        meta.val = 16w0;\n    }\n}\n\ncontrol D", "an assignment in the compute control"},
		{"update_checksum outside compute", "        t.apply();\n", "        t.apply();\n        update_checksum(true, {hdr.ip.src}, hdr.ip.csum, HashAlgorithm.csum16);\n", "update_checksum belongs in the compute checksum control"},
		{"verify_checksum condition", "verify_checksum(hdr.ip.isValid(),", "verify_checksum(hdr.ip.ihl,", "verify_checksum's condition is bit<4>, not bool"},
		{"extract varbit without length", "packet.extract(hdr.opt, (bit<32>)(hdr.ip.ihl - 4w5) << 5);", "packet.extract(hdr.opt);", "header opt_t has a varbit field: extract(hdr, length in bits)"},
		{"extract length of a fixed header", "packet.extract(hdr.ip);", "packet.extract(hdr.ip, 32w8);", "header ip_t has no varbit field"},
		{"varbit too long", "packet.extract(hdr.opt, (bit<32>)(hdr.ip.ihl - 4w5) << 5);", "packet.extract(hdr.opt, 32w328);", "a varbit length of 328 bits for varbit<320>"},
		{"extract outside parser", "        t.apply();\n", "        t.apply();\n        packet.extract(hdr.ip);\n", "undeclared name packet"},
		{"emit a field", "packet.emit(hdr.eth);", "packet.emit(hdr.eth.dst);", "emit takes a header, not bit<48>"},
		{"deparser assignment", "packet.emit(hdr.eth);", "hdr.eth.dst = 48w0;", "an assignment in the deparser control"},
		{"unknown action in a table", "            drop;\n        }", "            dorp;\n        }", "undeclared name dorp (did you mean drop?)"},
		{"not an action", "            drop;\n        }", "            r;\n        }", "r in table t's actions is not an action"},
		{"default not listed", "default_action = fwd(9w1);", "default_action = nope();", "undeclared name nope"},
		{"default arguments", "default_action = fwd(9w1);", "default_action = fwd();", "action fwd takes 1 arguments, not 0"},
		{"default argument width", "default_action = fwd(9w1);", "default_action = fwd(8w1);", "argument port of fwd is bit<8>, not bit<9>"},
		{"unknown match kind", "hdr.ip.proto: exact;", "hdr.ip.proto: exakt;", "unknown match kind exakt (did you mean exact?)"},
		{"two lpm keys", "hdr.ip.src: lpm;", "hdr.ip.src: lpm;\n            hdr.ip.ihl: lpm;", "table t has a second lpm key"},
		{"key type", "hdr.ip.proto: exact;", "hdr.ip: exact;", "a table key is bit<W> or bool, not ip_t"},
		{"entry keys", "(8w6, 32w0xa000000 &&& 32w0xff000000): fwd(9w2);", "8w6: fwd(9w2);", "1 keyset expressions for 2 key expressions"},
		{"entry mask on exact", "(8w6, 32w0xa000000 &&& 32w0xff000000)", "(8w6 &&& 8w7, 32w0xa000000 &&& 32w0xff000000)", "a mask matches a ternary or lpm key, not exact"},
		{"lpm mask not a prefix", "32w0xff000000): fwd", "32w0xff00ff00): fwd", "mask 0xff00ff00 of an lpm key is not a prefix"},
		{"entry action", "): fwd(9w2);", "): fwd(9w2, 9w3);", "action fwd takes 1 arguments, not 2"},
		{"entry unknown action", "): fwd(9w2);", "): fwdd(9w2);", "unknown action fwdd in an entry of table t"},
		{"action parameter written", "standard_metadata.egress_spec = port;", "port = 9w0;", "port is a parameter of action fwd, which cannot be written"},
		{"action parameter direction", "action fwd(bit<9> port)", "action fwd(in bit<9> port)", "the subset's action parameters have no direction"},
		{"action call arguments", "        t.apply();\n", "        t.apply();\n        fwd();\n", "action fwd takes 1 arguments, not 0"},
		{"table in action", "    apply {\n        t.apply();", "    action bad() {\n        t.apply();\n    }\n\n    apply {\n        t.apply();", "action bad applies table t: an action cannot apply a table"},
		{"table used before declared", "mark_to_drop(standard_metadata);\n    }", "mark_to_drop(standard_metadata);\n        t.apply();\n    }", "t is used before its declaration at"},
		{"select keyset count", "(4w5, 8w6): accept;", "4w5: accept;", "1 keyset expressions for 2 select expressions"},
		{"select value width", "16w0x800: parse_ip;", "8w0x8: parse_ip;", "a keyset value is bit<8>, not bit<16>"},
		{"select unknown state", "16w0x800: parse_ip;", "16w0x800: parse_iq;", "undeclared state parse_iq (did you mean parse_ip?)"},
		{"keyset not constant", "(4w5, 8w6): accept;", "(hdr.ip.ihl, 8w6): accept;", "a keyset is made of constants"},
		{"no start state", "state start {", "state begin {", "parser P has no state named start"},
		{"in parameter written", "packet.emit(hdr.eth);", "hdr.eth.setValid();", "setValid in the deparser control"},
		{"V1Switch blocks", "V1Switch(P(), V(), I(), E(), C(), D()) main;", "V1Switch(P(), V(), I(), E(), C()) main;", "V1Switch takes 6 blocks"},
		{"V1Switch order", "V1Switch(P(), V(), I(), E(), C(), D()) main;", "V1Switch(I(), V(), P(), E(), C(), D()) main;", "V1Switch's parser is a parser, and I is a control"},
		{"include", "#include <core.p4>", "#include <psa.p4>", "only <core.p4> and <v1model.p4> can be included"},
		{"duplicate", "    bit<8> small;\n}", "    bit<8> small;\n    bit<8> small;\n}", "field small is already declared"},
		{"keyword as a name", "bit<16> type_;", "bit<16> type;", "expected a field name, found keyword \"type\""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(base, tt.old) {
				t.Fatalf("base lacks %q", tt.old)
			}
			if tt.want == "" {
				return
			}
			src := strings.Replace(base, tt.old, tt.new, 1)
			line := strings.Count(base[:strings.Index(base, tt.old)], "\n") + 1
			last := line + strings.Count(tt.new, "\n")
			prog, err := Parse("t.p4", src)
			if err == nil {
				_, err = Check("t.p4", src, prog)
			}
			if err == nil {
				t.Fatalf("no error; want %q", tt.want)
			}
			var errs ErrorList
			switch e := err.(type) {
			case ErrorList:
				errs = e
			case *Error:
				errs = ErrorList{e}
			}
			for _, e := range errs {
				if strings.Contains(e.Msg, tt.want) {
					if tt.name != "no start state" && tt.name != "V1Switch order" && (e.Pos.Line < line || e.Pos.Line > last) {
						t.Errorf("%q reported at line %d, the change is on lines %d to %d", tt.want, e.Pos.Line, line, last)
					}
					if !strings.HasPrefix(e.Error(), "t.p4:") || e.Caret() == "" {
						t.Errorf("error %q has no file or caret", e.Error())
					}
					return
				}
			}
			t.Errorf("errors:\n%s\nwant one saying %q", errs.Format(), tt.want)
		})
	}
}
