package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// trumpetRun runs ffpf in this process (no binary to build).
func trumpetRun(args ...string) cliResult {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return cliResult{out.String(), errb.String(), code}
}

// trumpet check prints Table 2's events as examples/trumpet/README.md says.
func TestTrumpetCheckTable2(t *testing.T) {
	r := trumpetRun("trumpet", "check", "../../examples/trumpet/table2.yaml")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	readme, err := os.ReadFile("../../examples/trumpet/README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```\n"+r.stdout+"```\n") {
		t.Errorf("examples/trumpet/README.md does not show the output:\n%s", r.stdout)
	}
	if n := strings.Count(r.stdout, "\n"); n != 6 {
		t.Errorf("%d events, want 6", n)
	}
	// The output is an event file that checks to itself.
	p := filepath.Join(t.TempDir(), "canon.txt")
	if err := os.WriteFile(p, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	if r2 := trumpetRun("trumpet", "check", p); r2.code != 0 || r2.stdout != r.stdout {
		t.Errorf("the canonical output checks as exit %d:\n%s%s", r2.code, r2.stdout, r2.stderr)
	}
}

func TestTrumpetCheckErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.txt", "a: *; count() > 1; 5-tuple; 20ms\n")
	yml := write("bad.yaml", "events:\n  - name: heavy\n    filter: dstip=10.0.128.0/24\n    predicate: sum(volume) > 125KB\n    granularity: dstip/16\n    interval: 10ms\n")
	syn := write("syntax.yaml", "events:\n  - name: a\n   predicate: x\n")
	dup := write("dup.txt", "# again\na: dstport=80; count() > 1; 5-tuple; 10ms\n")
	missing := filepath.Join(dir, "missing.yaml")
	wide := "wide: proto=tcp; sum(volume) + sum(ecn) + max(rwnd) + min(ttl) + avg(rtt) + stddev(is_lost) + sum(is_burst) + max(ack) + max(seq) + sum(dup) + count() >= 0; 5-tuple; 10ms"
	for _, c := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"trumpet", "check", yml}, 2,
			"ffpf: " + yml + ":5: event heavy: granularity dstip/16 is coarser than the filter dstip=10.0.128.0/24 can give (a bucket would name 10.0.0.0/16 but hold only 10.0.128.0/24); use dstip/24 or finer\n"},
		{[]string{"trumpet", "check", syn}, 2, "ffpf: " + syn + ":3: "},
		{[]string{"trumpet", "check", good, dup}, 2, "ffpf: " + dup + ":2: event a is defined twice (first at " + good + ":1)\n"},
		{[]string{"trumpet", "check", "--epoch", "15ms", good}, 2, "ffpf: " + good + ":1: event a: interval 20ms is not a multiple of the 15ms epoch; try 30ms\n"},
		{[]string{"trumpet", "check", "--epoch", "1x", good}, 2, "ffpf: --epoch 1x: "},
		// what the class's epoch= refuses, check refuses
		{[]string{"trumpet", "check", "--epoch", "1ns", "-e", "a: *; count() > 1; 5-tuple; 1ms"}, 2, "ffpf: --epoch 1ns: an epoch is at least 100us, not 1ns\n"},
		{[]string{"trumpet", "check", "-e", "b: *; count() > 1; 5-tuple; 10ms", "-e", "c: *; cuont() > 1; 5-tuple; 10ms"}, 2,
			"ffpf: -e:2: event c: unknown function \"cuont\"; did you mean \"count\"?\n"},
		// the class's default words=16 refuses this event: check does too
		{[]string{"trumpet", "check", "-e", wide}, 2, "ffpf: -e:1: event wide needs 17 summary words, more than the 16 a flow keeps\n"},
		{[]string{"trumpet", "check", "--words", "0", good}, 2, "ffpf: --words 0: "},
		{[]string{"trumpet", "check", missing}, 1, "ffpf: cannot read " + missing + ": no such file or directory\n"},
		{[]string{"trumpet", "check"}, 2, "ffpf: trumpet check needs a FILE or -e EVENT"},
		{[]string{"trumpet", "chek"}, 2, "ffpf: unknown trumpet command \"chek\" (did you mean \"check\"?)"},
		{[]string{"trumpet"}, 2, "Usage: ffpf trumpet check"},
		{[]string{"trumpt"}, 2, "ffpf: unknown command \"trumpt\" (did you mean \"trumpet\"?)"},
	} {
		r := trumpetRun(c.args...)
		if r.code != c.code || !strings.HasPrefix(r.stderr, c.stderr) || r.stdout != "" {
			t.Errorf("ffpf %s: exit %d, stdout %q, stderr %q; want exit %d, stderr %q",
				strings.Join(c.args, " "), r.code, r.stdout, r.stderr, c.code, c.stderr)
		}
		if strings.Count(r.stderr, "\n") > 1 && c.code == 2 && !strings.HasPrefix(r.stderr, "Usage") {
			t.Errorf("ffpf %s: more than one line: %q", strings.Join(c.args, " "), r.stderr)
		}
	}
	r := trumpetRun("trumpet", "check", "--epoch", "5ms", good, "-e", "b: proto=udp; max(ttl) < 2; srcip/24; 5ms")
	if want := "b: proto=udp; max(ttl) < 2; srcip/24; 5ms\na: *; count() > 1; 5-tuple; 20ms\n"; r.code != 0 || r.stdout != want {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := trumpetRun("trumpet", "check", "--words", "54", "-e", wide); r.code != 0 {
		t.Errorf("--words 54: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := trumpetRun("--help"); !strings.Contains(r.stdout, "ffpf trumpet check") {
		t.Error("--help does not name trumpet check")
	}
	// trumpet help shows the flags, as trumpet check -h does
	for _, args := range [][]string{{"trumpet", "help"}, {"trumpet", "-h"}} {
		r := trumpetRun(args...)
		for _, f := range []string{"Usage: ffpf trumpet check", "-epoch", "-words", "-e value"} {
			if r.code != 0 || !strings.Contains(r.stdout, f) {
				t.Errorf("ffpf %s: exit %d, no %q in\n%s", strings.Join(args, " "), r.code, f, r.stdout)
			}
		}
	}
}
