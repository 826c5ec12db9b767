package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const (
	twoNICs  = "../../examples/hierarchy/two-nics.yaml"
	paperExp = `[[(dev,expr=eth0)|(dev,expr=eth1)] > (bpf,expr="tcp and dst port 80")] > [(pktcount)|(bytecount)]`
)

func TestPlaceShowsTreeReasonsAndBridges(t *testing.T) {
	r := ffpf(t, "place", "--hierarchy", twoNICs, paperExp)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{
		"user  [user, path 0xffffffff]",
		"└── kernel  [test, path 0x0fffffff, in place]",
		"bpf#1        0x0fffffff  lowest flowspace with class bpf at or above kernel, the lowest common successor of dev#1 (nic0) and dev#2 (nic1)",
		"├── nic0  [test, path 0x00ffffff]",
		"dev#1  0x00ffffff  lowest flowspace with class dev at or above nic0, where packets of eth0 enter",
		"nic0 > kernel  (pci, copy-once)  carries dev#1",
		"nic1 > kernel  (pci, copy-once)  carries dev#2",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("place output lacks %q:\n%s", want, r.stdout)
		}
	}

	var plan struct {
		Hierarchy struct {
			Name     string `json:"name"`
			Children []struct {
				Name string `json:"name"`
			} `json:"children"`
		} `json:"hierarchy"`
		Functions []struct {
			ID, Flowspace, Path, Reason string
			PBufs                       []string
		} `json:"functions"`
		Bridges []struct{ From, To, Strategy string } `json:"bridges"`
		PBufs   []struct{ Name, Flowspace string }    `json:"pbufs"`
	}
	j := ffpf(t, "place", "--json", "--hierarchy", twoNICs, paperExp)
	if err := json.Unmarshal([]byte(j.stdout), &plan); err != nil || j.code != 0 {
		t.Fatalf("place --json: %v (exit %d) %s", err, j.code, j.stdout)
	}
	where := map[string]string{}
	for _, f := range plan.Functions {
		where[f.ID] = f.Flowspace + " " + f.Path
	}
	want := map[string]string{"dev#1": "nic0 0x00ffffff", "dev#2": "nic1 0x01ffffff", "bpf#1": "kernel 0x0fffffff",
		"pktcount#1": "kernel 0x0fffffff", "bytecount#1": "kernel 0x0fffffff"}
	for id, w := range want {
		if where[id] != w {
			t.Errorf("%s placed %q, want %q", id, where[id], w)
		}
	}
	if plan.Hierarchy.Name != "user" || len(plan.Hierarchy.Children) != 1 || len(plan.Bridges) != 2 {
		t.Errorf("plan: %+v", plan)
	}

	d := ffpf(t, "place", "--dot", "--hierarchy", twoNICs, paperExp)
	for _, w := range []string{"digraph ffpf {", "subgraph cluster_", `label="nic0 (test) 0x00ffffff"`, `"dev#1" -> "bpf#1";`} {
		if !strings.Contains(d.stdout, w) {
			t.Errorf("--dot lacks %q:\n%s", w, d.stdout)
		}
	}
}

// TestRunOnATestHierarchy: the paper's example on two simulated NICs gives
// the counts of the same traffic read in userspace, and the bridges
// account for every packet they carry.
func TestRunOnATestHierarchy(t *testing.T) {
	r := ffpf(t, "run", "--json", "--hierarchy", twoNICs, paperExp)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	doc := parseRun(t, r)
	flat := parseRun(t, ffpf(t, "run", "--json",
		`[[(gen,seed=1,packets=20000)|(gen,seed=2,packets=20000)] > (bpf,expr="tcp and dst port 80")] > [(pktcount)|(bytecount)]`))
	if doc.Packets != 40000 || flat.Packets != 40000 {
		t.Fatalf("packets %d and %d, want 40000", doc.Packets, flat.Packets)
	}
	for _, class := range []string{"bpf", "pktcount", "bytecount"} {
		a, b := doc.Functions[doc.byClass(class)[0]], flat.Functions[flat.byClass(class)[0]]
		if a.Flowspace != "kernel" {
			t.Errorf("%s ran in %s, want kernel", a.ID, a.Flowspace)
		}
		if a.In != b.In || a.Out != b.Out || a.Filtered != b.Filtered || !equalState(a.State, b.State) {
			t.Errorf("%s: hierarchy %+v, userspace %+v", class, a, b)
		}
	}
	if len(doc.Bridges) != 2 {
		t.Fatalf("bridges %v", doc.Bridges)
	}
	for _, b := range doc.Bridges {
		m := b.(map[string]any)
		if m["in"] != m["out"] || m["dropped"] != 0.0 || m["in"] != 20000.0 {
			t.Errorf("bridge %v", m)
		}
	}
}

func equalState(a, b map[string]any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestHierarchyCommand(t *testing.T) {
	r := ffpf(t, "hierarchy")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "user") {
		t.Fatalf("exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	if os.Getuid() == 0 && os.Getenv("CI") != "" && !strings.Contains(r.stdout, "kernel") {
		t.Errorf("as root in CI, the kernel flowspace is absent:\n%s", r.stdout)
	}
	var info struct {
		Name   string   `json:"name"`
		Absent []string `json:"absent"`
	}
	j := ffpf(t, "hierarchy", "--json", "--hierarchy", twoNICs)
	if err := json.Unmarshal([]byte(j.stdout), &info); err != nil || info.Name != "user" || info.Absent == nil {
		t.Errorf("hierarchy --json: %v %+v", err, info)
	}
}

func TestBadHierarchyOrGroup(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("children:\n  - name: nic0\n    kind: test\n    clases: [bpf]\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"place", "--hierarchy", bad, "(gen) > (pktcount)"}, []string{"bad.yaml:4", `unknown field "clases"`, `did you mean "classes"`}},
		{[]string{"run", "--hierarchy", filepath.Join(dir, "none.yaml"), "(gen) > (pktcount)"}, []string{"none.yaml", "no such file"}},
		{[]string{"hierarchy", "--hierarchy", bad}, []string{"bad.yaml:4"}},
		{[]string{"run", "--flowgroup", "world", "(gen) > (pktcount)"}, []string{`unknown flowgroup policy "world"`}},
		{[]string{"place", "--dot", "--json", "(gen) > (pktcount)"}, []string{"exclude each other"}},
	} {
		r := ffpf(t, tc.args...)
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", tc.args, r.code, r.stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%v: stderr %q lacks %q", tc.args, r.stderr, w)
			}
		}
	}
}

// TestSIGINTOnAHierarchy: ^C in the middle of a run across bridges stops
// it with exit 0, and every packet is accounted for: what a function sent
// up entered the bridge, and left it or was dropped there.
func TestSIGINTOnAHierarchy(t *testing.T) {
	src, err := os.ReadFile(twoNICs)
	if err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(t.TempDir(), "big.yaml")
	os.WriteFile(big, []byte(strings.ReplaceAll(string(src), "packets=20000", "packets=1G")), 0o644)
	exported := filepath.Join(t.TempDir(), "o.pcap")
	cmd := exec.Command(ffpfBin, "run", "--json", "--hierarchy", big,
		`[[(dev,expr=eth0) > (bpf,"udp") | (dev,expr=eth1)] > (bpf,expr="tcp or udp")] > (pktcount) > (export,file=`+exported+`)`)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// ^C in the middle of the run: once a megabyte of packets (from both
	// boards, a thousand and more) reached the export (the handler is
	// installed before the graph runs).
	waitProc(t, cmd, "a megabyte of packets is exported", func(int) bool {
		st, err := os.Stat(exported)
		return err == nil && st.Size() >= 1<<20
	})
	cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	doc := parseRun(t, cliResult{out.String(), errb.String(), 0})
	fn := map[string]uint64{}
	for _, f := range doc.Functions {
		fn[f.ID+" in"], fn[f.ID+" out"] = f.In, f.Out
	}
	br := map[string][3]uint64{}
	for _, b := range doc.Bridges {
		m := b.(map[string]any)
		in, o, d := uint64(m["in"].(float64)), uint64(m["out"].(float64)), uint64(m["dropped"].(float64))
		if in != o+d {
			t.Errorf("bridge %v: in != out + dropped", m)
		}
		br[m["from"].(string)] = [3]uint64{in, o, d}
	}
	if fn["bpf#1 out"] == 0 || br["nic0"][0] != fn["bpf#1 out"] || br["nic1"][0] != fn["dev#2 out"] ||
		fn["bpf#2 in"] != br["nic0"][1]+br["nic1"][1] || br["kernel"][0] != fn["pktcount#1 out"] || fn["export#1 in"] != br["kernel"][1] {
		t.Errorf("accounting across bridges does not add up:\nfunctions %v\nbridges %v", fn, br)
	}
}
