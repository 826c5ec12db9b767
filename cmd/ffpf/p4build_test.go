package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	p4cfg "github.com/p4lang/p4runtime/go/p4/config/v1"
	"google.golang.org/protobuf/encoding/prototext"
)

const torYAML = "../../examples/hierarchy/tor.yaml"

// p4 build writes the switch's share of a request, without a switch: a
// program our checker takes, its P4Info, and its resources; --json says
// the same. place shows the share, why the rest is not there, and the
// resources.
func TestP4Build(t *testing.T) {
	dir := t.TempDir()
	expr := `(pktcount) > (bytecount) > (export,file=` + filepath.Join(dir, "up.pcap") + `)`
	r := ffpf(t, "p4", "build", "--hierarchy", torYAML, "-i", "swp1", "-o", dir, "--json", expr)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var doc struct {
		Switches []struct {
			Switch, Program, P4Info string
			Resources               struct {
				Functions []string `json:"functions"`
				Depth     int      `json:"pipeline_depth"`
				Width     int      `json:"widest_stage"`
				Stateful  int      `json:"stateful_ops"`
				Tables    int      `json:"tables"`
				Actions   int      `json:"actions"`
				Lines     int      `json:"lines_of_p4"`
			} `json:"resources"`
			ResFile string `json:"resources_file"`
		} `json:"switches"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Switches) != 1 {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	s := doc.Switches[0]
	if s.Switch != "tor" || strings.Join(s.Resources.Functions, " ") != "dev#1 pktcount#1 bytecount#1" ||
		s.Resources.Depth < 1 || s.Resources.Depth > 12 || s.Resources.Width < 1 || s.Resources.Lines < 100 {
		t.Errorf("the switch's share: %+v", s)
	}
	if c := ffpf(t, "p4", "check", s.Program); c.code != 0 {
		t.Errorf("p4 check %s: exit %d %s", s.Program, c.code, c.stderr)
	}
	text, err := os.ReadFile(s.P4Info)
	if err != nil {
		t.Fatal(err)
	}
	var info p4cfg.P4Info
	if err := prototext.Unmarshal(text, &info); err != nil {
		t.Fatalf("%s: %v", s.P4Info, err)
	}
	names := map[string]bool{}
	for _, c := range info.Counters {
		names[c.Preamble.Name] = true
	}
	for _, want := range []string{"ffpf_ingress.pktcount_1_acct", "ffpf_ingress.bytecount_1_acct", "ffpf_ingress.ffpf_up"} {
		if !names[want] {
			t.Errorf("the P4Info has no counter %s (%v)", want, names)
		}
	}
	res, err := os.ReadFile(s.ResFile)
	if err != nil || !strings.Contains(string(res), "stages used (pipeline depth)") || !strings.Contains(string(res), "lines of P4") {
		t.Errorf("%s: %v\n%s", s.ResFile, err, res)
	}

	r = ffpf(t, "place", "--hierarchy", torYAML, "-i", "swp1", expr)
	for _, want := range []string{"not in tor: class export has no P4 implementation", "switch tor resources:",
		"stages used (pipeline depth)", "pktcount#1   0x000fffff  lowest flowspace with class pktcount at or above tor"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("place: exit %d, no %q in\n%s%s", r.code, want, r.stdout, r.stderr)
		}
	}

	r = ffpf(t, "p4", "build", "-i", "swp1", expr)
	if r.code != 2 || !strings.Contains(r.stderr, "p4 build needs --hierarchy") {
		t.Errorf("without a hierarchy: exit %d %q", r.code, r.stderr)
	}
	r = ffpf(t, "p4", "build", "--hierarchy", "../../examples/hierarchy/two-nics.yaml", "-i", "eth0", "-o", dir, expr)
	if r.code != 2 || !strings.Contains(r.stderr, "nothing runs on a switch") {
		t.Errorf("a hierarchy without a switch: exit %d %q", r.code, r.stderr)
	}
	// A chain without a source on a switch of two interfaces: which one
	// is the user's to say.
	two := filepath.Join(dir, "two.yaml")
	if err := os.WriteFile(two, []byte("children:\n  - name: tor\n    kind: p4\n    p4runtime: 127.0.0.1:1\n    device_id: 1\n    uplink: cpu\n    interfaces: [{name: swp1, port: 1}, {name: swp2, port: 2}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = ffpf(t, "p4", "build", "--hierarchy", two, "-o", dir, "(pktcount)")
	if r.code != 2 || !strings.Contains(r.stderr, "name one with -i (-i swp1 or -i swp2)") {
		t.Errorf("two interfaces, no -i: exit %d %q", r.code, r.stderr)
	}
	if r = ffpf(t, "p4", "build", "--hierarchy", two, "-i", "swp2", "-o", dir, "(pktcount)"); r.code != 0 {
		t.Errorf("two interfaces, -i swp2: exit %d %q", r.code, r.stderr)
	}
}

// TestP4BuildMafiaSplit: the heavy hitters on tor.yaml's
// 12-stage switch. The second match does not fit beside the count-min
// whose state it reads, so the sketch and the total go up with their
// dependants and the first match stays on the switch (FFPF's rule for
// what does not fit); before, the build was refused (exit 2).
func TestP4BuildMafiaSplit(t *testing.T) {
	dir := t.TempDir()
	r := ffpf(t, "p4", "build", "--mafia", "../../examples/mafia/heavy-hitter.mafia", "--hierarchy", torYAML, "-i", "swp1", "-o", dir, "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var doc struct {
		Switches []struct {
			Resources struct {
				Functions []string `json:"functions"`
			} `json:"resources"`
		} `json:"switches"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if len(doc.Switches) != 1 || !slices.Equal(doc.Switches[0].Resources.Functions, []string{"dev#1", "match#1"}) {
		t.Fatalf("the switch's share: %s", r.stdout)
	}
	// Without -i the program runs on the packets entering at the
	// switch's one interface: the same build as with -i swp1.
	withI, err := os.ReadFile(filepath.Join(dir, "main.p4"))
	if err != nil {
		t.Fatal(err)
	}
	dir2 := t.TempDir()
	if r := ffpf(t, "p4", "build", "--mafia", "../../examples/mafia/heavy-hitter.mafia", "--hierarchy", torYAML, "-o", dir2); r.code != 0 {
		t.Fatalf("without -i: exit %d: %s", r.code, r.stderr)
	}
	if without, err := os.ReadFile(filepath.Join(dir2, "main.p4")); err != nil || !bytes.Equal(without, withI) {
		t.Fatalf("without -i the program differs from -i swp1's (%v)", err)
	}
	// The program watches port 1 (PORT = 1), which tor.yaml's swp1 is:
	// packets enter there (dev) and pass the program's match.
	for _, want := range []string{"standard_metadata.ingress_port == 9w1", "standard_metadata.ingress_port == 64w1"} {
		if !bytes.Contains(withI, []byte(want)) {
			t.Fatalf("the switch's program lacks %s", want)
		}
	}
	r = ffpf(t, "place", "--mafia", "../../examples/mafia/heavy-hitter.mafia", "--hierarchy", torYAML, "-i", "swp1")
	if r.code != 0 {
		t.Fatalf("place: exit %d: %s", r.code, r.stderr)
	}
	for _, up := range []string{"counter#1 (total)", "cms#1 (nbytes)", "match#2", "bloom#1 (hh)"} {
		i := strings.Index(r.stdout, up)
		if i < 0 || i > strings.Index(r.stdout, "└── kernel") {
			t.Fatalf("%s is not in user: %s", up, r.stdout)
		}
	}
}

// A switch's packets go up its uplink as frames, without the annotation
// words its functions wrote: a function above that reads one (a match the
// switch cannot compute) takes the writer up with it, while a reader that
// fits beside it leaves it on the switch.
func TestAnnotationFromASwitchGoesUp(t *testing.T) {
	where := func(expr string) map[string]string {
		t.Helper()
		r := ffpf(t, "place", "--json", "--hierarchy", torYAML, "-i", "swp1", expr)
		if r.code != 0 {
			t.Fatalf("%s: exit %d: %s", expr, r.code, r.stderr)
		}
		var doc struct {
			Functions []struct {
				ID        string `json:"id"`
				Flowspace string `json:"flowspace"`
				Reason    string `json:"reason"`
			} `json:"functions"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, f := range doc.Functions {
			out[f.ID] = f.Flowspace
			if f.ID == "timestamp#1" {
				out["why"] = f.Reason
			}
		}
		return out
	}
	got := where(`t:(timestamp) > (match,"t.ts % 7 == 0")`)
	if got["timestamp#1"] != "user" || got["match#1"] != "user" || got["dev#1"] != "tor" || !strings.Contains(got["why"], "reads its annotation") {
		t.Errorf("a reader above the switch: %v", got)
	}
	got = where(`t:(timestamp) > (match,"t.ts > 5")`)
	if got["timestamp#1"] != "tor" || got["match#1"] != "tor" {
		t.Errorf("a reader on the switch: %v", got)
	}
}
