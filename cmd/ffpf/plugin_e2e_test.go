package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// dnsnamePlugin builds the example plugin into a directory of its own, as
// its README says.
func dnsnamePlugin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "dnsname"), "../../examples/plugin/dnsname").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	return dir
}

// TestPluginsOnTheCommandLine: the four commands, and the bad
// input that exits 2 naming the file.
func TestPluginsOnTheCommandLine(t *testing.T) {
	dir := dnsnamePlugin(t)
	plug := filepath.Join(dir, "dnsname")
	a, _ := traces(t)

	r := ffpf(t, "classes", "--plugins", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "dnsname  pass DNS messages") || !strings.Contains(r.stdout, "plugin "+plug+", out of process") ||
		!strings.Contains(r.stdout, "malformed  u64 (packets)") {
		t.Errorf("classes --plugins: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	r = ffpf(t, "run", "-r", a, "--plugins", dir, "--json", `(bpf,"udp port 53") > (dnsname,suffix=".com") > (pktcount)`, `(pktcount)`)
	doc := parseRun(t, r)  // checks in = out + filtered + dropped
	at := map[string]int{} // by class, and whether it saw every packet
	for i, f := range doc.Functions {
		at[f.Class+fmt.Sprint(f.In == doc.Packets)] = i
	}
	d, after, other := doc.Functions[at["dnsnamefalse"]], doc.Functions[at["pktcountfalse"]], doc.Functions[at["pktcounttrue"]]
	if r.code != 0 || d.Class != "dnsname" || d.In == 0 || d.Out == 0 || d.State["names"].(float64)+d.State["malformed"].(float64) != float64(d.In) || after.In != d.Out ||
		other.State["packets"] != float64(doc.Packets) {
		t.Errorf("run --plugins: exit %d %s\n%+v", r.code, r.stderr, doc.Functions)
	}

	r = ffpfEnv(t, "FFPF_PLUGINS="+dir, "place", `(dnsname,suffix=".example.com")`)
	if r.code != 0 || !strings.Contains(r.stdout, "dnsname#1") {
		t.Errorf("FFPF_PLUGINS place: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := ffpf(t, "check", "--plugins", dir, `(dnsname,suffix="a..b")`); r.code != 2 || !strings.Contains(r.stderr, `suffix "a..b" has an empty label`) {
		t.Errorf("check of a bad suffix: exit %d %s", r.code, r.stderr)
	}

	sums := filepath.Join(t.TempDir(), "SHA256SUMS")
	bin, _ := os.ReadFile(plug)
	os.WriteFile(sums, []byte(fmt.Sprintf("%x  %s\n", sha256.Sum256(bin), plug)), 0o644)
	if r := ffpf(t, "classes", "--plugins", dir, "--plugin-sums", sums); r.code != 0 {
		t.Errorf("the right checksum: exit %d %s", r.code, r.stderr)
	}
	os.WriteFile(sums, []byte(fmt.Sprintf("%x  %s\n", sha256.Sum256(append(bin, 0)), plug)), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"classes", "--plugins", "/nonexistent"}, "ffpf: plugin directory /nonexistent: no such file or directory\n"},
		{[]string{"run", "-r", a, "--plugins", dir, "--plugin-sums", sums, "(pktcount)"}, "ffpf: plugin " + plug + ": its SHA-256 is not the one " + sums + " gives\n"},
		{[]string{"place", "--plugin-sums", sums, "(pktcount)"}, "no --plugins directory"},
	} {
		if r := ffpf(t, tc.args...); r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}
