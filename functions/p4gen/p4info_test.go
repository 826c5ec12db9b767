package p4gen_test

import (
	"strings"
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/ffpf-go/ffpf/functions/p4gen"
	"github.com/ffpf-go/ffpf/functions/p4gen/p4info"
)

// TestP4InfoRoundTrip: the P4Info of every test program names what the
// printed program declares, with p4c's prefixes, and survives prototext.
func TestP4InfoRoundTrip(t *testing.T) {
	for name, prog := range p4gen.TestPrograms(t) {
		pr, err := p4gen.Print(prog)
		if err != nil {
			t.Fatal(err)
		}
		info := p4info.Of(prog, pr)
		text, err := p4info.Text(info)
		if err != nil {
			t.Fatal(err)
		}
		back := &p4v1.P4Info{}
		if err := prototext.Unmarshal(text, back); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, text)
		}
		if !proto.Equal(info, back) {
			t.Errorf("%s: P4Info changed through prototext", name)
		}
		seen := map[uint32]string{}
		check := func(kind string, pre *p4v1.Preamble, prefix p4v1.P4Ids_Prefix) {
			if pre.Id>>24 != uint32(prefix) {
				t.Errorf("%s: %s %s has id %#x without prefix %#x", name, kind, pre.Name, pre.Id, uint32(prefix))
			}
			if other, ok := seen[pre.Id]; ok {
				t.Errorf("%s: %s and %s have id %#x", name, other, pre.Name, pre.Id)
			}
			seen[pre.Id] = pre.Name
			if !strings.Contains(string(pr.Text), " "+pre.Alias) && !strings.Contains(string(pr.Text), " "+pre.Name[strings.LastIndex(pre.Name, ".")+1:]) {
				t.Errorf("%s: %s %s is not in the printed program", name, kind, pre.Name)
			}
		}
		for _, x := range info.Tables {
			check("table", x.Preamble, p4v1.P4Ids_TABLE)
			if !strings.HasPrefix(x.Preamble.Name, p4gen.IngressName+".") {
				t.Errorf("%s: table %s not in ingress", name, x.Preamble.Name)
			}
		}
		for _, x := range info.Actions {
			check("action", x.Preamble, p4v1.P4Ids_ACTION)
		}
		for _, x := range info.Counters {
			check("counter", x.Preamble, p4v1.P4Ids_COUNTER)
		}
		for _, x := range info.Registers {
			check("register", x.Preamble, p4v1.P4Ids_REGISTER)
		}
		for _, x := range info.Digests {
			check("digest", x.Preamble, p4v1.P4Ids_DIGEST)
		}
		if len(info.Registers) != len(prog.Registers) || len(info.Counters) != len(prog.Counters) ||
			len(info.Tables) != len(prog.Tables) || len(info.Digests) != len(prog.Digests) {
			t.Errorf("%s: P4Info has %d registers, %d counters, %d tables, %d digests; the program %d, %d, %d, %d", name,
				len(info.Registers), len(info.Counters), len(info.Tables), len(info.Digests),
				len(prog.Registers), len(prog.Counters), len(prog.Tables), len(prog.Digests))
		}
		// prototext varies its spacing on purpose: compare words.
		flat := strings.Join(strings.Fields(string(text)), " ")
		if name == "everything" {
			if !strings.Contains(flat, `name: "ffpf_egress.e_1_eg"`) || !strings.Contains(flat, `alias: "e_1_eg"`) {
				t.Errorf("egress register not named as p4c would:\n%s", text)
			}
		}
		if name == "tables" {
			for _, want := range []string{`name: "hdr.tcp.$valid$"`, "match_type: LPM", "scope: DEFAULT_ONLY", "is_const_table: true"} {
				if !strings.Contains(flat, want) {
					t.Errorf("tables: P4Info lacks %s:\n%s", want, text)
				}
			}
		}
	}
}

// A controller header is the P4Info's controller packet metadata: its
// name, the CONTROLLER_HEADER prefix, its fields as metadata from id 1.
func TestP4InfoControllerHeader(t *testing.T) {
	p := p4gen.NewProgram("cpu")
	ht := &p4gen.HeaderType{Name: "packet_in_t", Controller: p4gen.ControllerPacketIn, Fields: []p4gen.Field{{Name: "ingress_port", Bits: 16}, {Name: "mask", Bits: 32}}}
	p.HeaderTypes = append(p.HeaderTypes, ht)
	p.Headers = append(p.Headers, &p4gen.Header{Name: "packet_in", Type: ht})
	p.Deparse = append([]string{"packet_in"}, p.Deparse...)
	pr, err := p4gen.Print(p)
	if err != nil {
		t.Fatal(err)
	}
	info := p4info.Of(p, pr)
	cpm := info.GetControllerPacketMetadata()
	if len(cpm) != 1 || cpm[0].Preamble.Name != "packet_in" || cpm[0].Preamble.Id>>24 != uint32(p4v1.P4Ids_CONTROLLER_HEADER) ||
		cpm[0].Preamble.Id&0xffffff != p4info.JenkinsHash("packet_in")&0xffffff {
		t.Fatalf("controller packet metadata %v", cpm)
	}
	if md := cpm[0].Metadata; len(md) != 2 || md[0].Id != 1 || md[0].Name != "ingress_port" || md[0].Bitwidth != 16 || md[1].Id != 2 || md[1].Bitwidth != 32 {
		t.Errorf("metadata %v", md)
	}
	text, err := p4info.Text(info)
	if err != nil {
		t.Fatal(err)
	}
	var back p4v1.P4Info
	if err := prototext.Unmarshal(text, &back); err != nil || !proto.Equal(&back, info) {
		t.Errorf("prototext round trip: %v", err)
	}
}
