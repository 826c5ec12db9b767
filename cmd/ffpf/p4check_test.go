package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// p4 check: a printed program passes with a summary; a broken one exits
// 2 with file:line:col and a caret; an unreadable, oversized or special
// file exits 2 naming it.
func TestP4Check(t *testing.T) {
	dir := t.TempDir()
	pr, err := p4gen.Print(p4gen.NewProgram("x"))
	if err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "main.p4")
	bad := filepath.Join(dir, "bad.p4")
	big := filepath.Join(dir, "big.p4")
	if err := os.WriteFile(good, pr.Text, 0o644); err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(pr.Text), "packet.emit(hdr.", "packet.emit(hdr.nosuch_", 1)
	if err := os.WriteFile(bad, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, make([]byte, functions.MaxFileSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	r := ffpf(t, "p4", "check", good)
	if r.code != 0 || !strings.HasPrefix(r.stdout, good+": ok (") || !strings.Contains(r.stdout, "header types") || r.stderr != "" {
		t.Errorf("p4 check of a printed program: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	line := strings.Count(broken[:strings.Index(broken, "hdr.nosuch_")], "\n") + 1
	r = ffpf(t, "p4", "check", good, bad)
	if r.code != 2 || !strings.Contains(r.stderr, bad+":"+strconv.Itoa(line)+":") || !strings.Contains(r.stderr, "headers_t has no field nosuch_") ||
		!strings.Contains(r.stderr, "^") || !strings.Contains(r.stderr, "1 error in 1 of 2 files") || !strings.Contains(r.stdout, good+": ok") {
		t.Errorf("p4 check of a broken program: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, c := range []struct{ file, want string }{
		{filepath.Join(dir, "none.p4"), "no such file"},
		{big, "a P4 source may have at most 1048576 (1 MiB)"},
		{"/dev/zero", "not a regular file"},
		{dir, "a directory"},
	} {
		r := ffpf(t, "p4", "check", c.file)
		if r.code != 2 || !strings.Contains(r.stderr, c.file) || !strings.Contains(r.stderr, c.want) {
			t.Errorf("p4 check %s: exit %d, %q; want 2 and %q", c.file, r.code, r.stderr, c.want)
		}
	}
	for _, args := range [][]string{{"p4"}, {"p4", "check"}, {"p4", "chek", good}} {
		if r := ffpf(t, args...); r.code != 2 || strings.Count(strings.TrimSpace(r.stderr), "\n") > 3+len(p4Commands) {
			t.Errorf("ffpf %v: exit %d\n%s", args, r.code, r.stderr)
		}
	}
}
