package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ffpf p4 net runs examples/mafia/path.yaml as it is (postcards on a path
// of three), from bin/ffpf through its gRPC build: every packet leaves the
// path, three postcards each; --json gives each switch's functions; a
// network or program it refuses is exit 2, with the file named.
func TestP4NetMafiaPath(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"path.yaml", "postcards.mafia"} {
		b, err := os.ReadFile(filepath.Join("../../examples/mafia", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if r := ffpf(t, "gen", "-o", filepath.Join(dir, "trace.pcap"), "--packets", "500", "--flows", "20"); r.code != 0 {
		t.Fatalf("gen: %s", r.stderr)
	}
	r := ffpf(t, "p4", "net", "--json", filepath.Join(dir, "path.yaml"))
	if r.code != 0 {
		t.Fatalf("p4 net: exit %d: %s", r.code, r.stderr)
	}
	var res struct {
		Switches []struct {
			Name      string `json:"switch"`
			Role      string `json:"role"`
			Copies    int    `json:"copies"`
			Functions []struct {
				In, Out int
			} `json:"functions"`
		} `json:"switches"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if len(res.Switches) != 3 || res.Switches[1].Role != "intermediate" {
		t.Fatalf("switches: %+v", res.Switches)
	}
	for _, s := range res.Switches {
		if s.Copies != 500 || len(s.Functions) != 3 || s.Functions[0].In != 500 {
			t.Errorf("%s: %d copies, functions %+v", s.Name, s.Copies, s.Functions)
		}
	}
	if n := len(pcapFrames(t, filepath.Join(dir, "out.pcap"))); n != 500 {
		t.Errorf("%d packets left the path of 500", n)
	}
	if n := len(pcapFrames(t, filepath.Join(dir, "postcards.pcap"))); n != 1500 {
		t.Errorf("%d postcards of 500 packets on three switches", n)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("program: postcards.mafia\nswitches: [{name: s1, role: middle}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := ffpf(t, "p4", "net", bad); r.code != 2 || !strings.Contains(r.stderr, "bad.yaml") || !strings.Contains(r.stderr, "middle") {
		t.Errorf("a bad role: exit %d: %s", r.code, r.stderr)
	}
	if r := ffpf(t, "p4", "net", filepath.Join(dir, "trace.pcap"), "extra"); r.code != 2 {
		t.Errorf("two files: exit %d: %s", r.code, r.stderr)
	}
}
