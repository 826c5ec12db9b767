package builtin_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/internal/p4test"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

var update = flag.Bool("update", false, "rewrite the P4 golden files (functions/p4gen/testdata) from the lowerings")

// p4Golden are the programs of the golden files: each class with a P4
// target lowered alone (its function's id f#1), by file name.
var p4Golden = map[string]string{
	"pktcount":       "(pktcount)",
	"bytecount":      "(bytecount)",
	"counter":        "(counter,value=bytes)",
	"counter_keyed":  "(counter,key=srcip,size=4K)",
	"cms":            "(cms,key=5tuple,width=1024,depth=3)",
	"cms_window":     "(cms,key=srcip,width=256,depth=2,window=1024us)",
	"hll":            "(hll,key=dstip,precision=10)",
	"pcsa":           "(pcsa,key=srcip,bitmaps=64)",
	"bloom":          "(bloom,key=5tuple,bits=4K,hashes=3)",
	"bpf":            `(bpf,"tcp port 80 or icmp")`,
	"match":          `(match,"tcp.dport == 443 and ipv4.src in 10.0.0.0/8 or udp.len > 100")`,
	"sample":         "(sample,every=10)",
	"sample_rate":    "(sample,rate=0.25)",
	"timestamp":      "(timestamp)",
	"tag":            "(tag,key=5tuple)",
	"register":       `(register,set="max(old + 1, ipv4.ttl) & 255")`,
	"register_keyed": `(register,key=dstip,size=1K,set=pkt.ts,if="old == 0")`,
	"store":          `(store,key=5tuple,value=ipv4.csum,width=1024,depth=2,pass=new)`,
	"cms_value":      `(cms,key=dstip,value=ipv4.ttl,width=256,depth=2)`,
}

// TestP4GoldenFiles keeps one golden file per class with a P4 target:
// the program of the class's function alone on a switch, printed, which
// our checker accepts (the p4gen tests parse, reprint and check every
// golden file, and compile it with p4c when it is on the PATH). A
// lowering that changes its program fails here until the file is
// rewritten (go test -run TestP4GoldenFiles -update).
func TestP4GoldenFiles(t *testing.T) {
	covered := map[string]bool{}
	for name, expr := range p4Golden {
		fn := p4test.Parse(t, expr)
		covered[fn.Class.Name] = true
		s, _ := p4test.Switch(t, fn)
		text := p4test.Check(t, s.Prog)
		path := filepath.Join("..", "p4gen", "testdata", name+".p4")
		if *update {
			if err := os.WriteFile(path, text, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v (write it with -update)", expr, err)
		}
		if !bytes.Equal(text, want) {
			t.Errorf("%s: the program differs from %s (rewrite it with -update if the change is meant)", expr, path)
		}
	}
	for _, c := range functions.Default.All() {
		if c.Supports(functions.TargetP4) && !covered[c.Name] {
			t.Errorf("class %s has a P4 target and no golden file", c.Name)
		}
	}
}

// Every lowering allocates on a Tofino-1-like switch (p4gen.Allocate):
// its registers accessed once per packet, what it computes passed on in
// metadata, and its stages within the profile's, the headline graph
// included. What does not fit is refused in the resource's terms: a
// keyed counter of 5-tuples keeps five 64-bit words per slot (ten
// stateful ALUs), and a window doubles every register.
func TestP4LoweringsAllocate(t *testing.T) {
	exprs := []string{"(counter,key=dstport,size=1K)", "(hll,key=5tuple,window=1024us)", "(cms,key=5tuple)",
		"(bloom,key=srcip,window=4096us)", "(pcsa,key=5tuple,window=1024us)", "(cms,key=dstip,window=1024us)",
		"(cms,key=5tuple,width=256,depth=2,window=1024us)"}
	for _, e := range p4Golden {
		exprs = append(exprs, e)
	}
	for _, expr := range exprs {
		s, _ := p4test.Switch(t, p4test.Parse(t, expr))
		a, err := p4gen.Allocate(s.Prog, p4gen.Tofino1())
		if err != nil {
			t.Errorf("%s does not allocate: %v", expr, err)
			continue
		}
		r := a.Report()
		t.Logf("%-60s depth %2d, width %2d, %3d stateful operations", expr, r.Depth, r.Width, r.Stateful)
	}
	for expr, want := range map[string]string{
		"(counter,key=5tuple,size=4K)":      "stateful ALUs",
		"(counter,key=srcip,window=1024us)": "stage",
	} {
		s, _ := p4test.Switch(t, p4test.Parse(t, expr))
		if _, err := p4gen.Allocate(s.Prog, p4gen.Tofino1()); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a refusal about %s", expr, err, want)
		}
	}
	s, _ := p4test.Switch(t, p4test.Parse(t, `(bpf,"tcp")`), p4test.Parse(t, "(cms,key=5tuple)"), p4test.Parse(t, "(hll,key=dstip)"))
	a, err := p4gen.Allocate(s.Prog, p4gen.Tofino1())
	if err != nil {
		t.Fatalf("the headline graph does not allocate: %v", err)
	}
	t.Logf("(bpf,\"tcp\") > (cms,key=5tuple) > (hll,key=dstip):\n%s", a.Report())
}
