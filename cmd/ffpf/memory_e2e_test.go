package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStateBudgets: a flowspace's state: bound (hierarchy file) is the
// most state its functions keep together. At the root a function that
// does not fit fails its request at populate (exit 2, one sentence naming
// it), whether alone or beside others; one that fits runs; in the kernel
// flowspace, the memory of the state maps (per CPU) counts, and a function
// that does not fit there is placed above, with the reason.
func TestStateBudgets(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root.yaml")
	os.WriteFile(root, []byte("state: 16MB\n"), 0o644)
	for _, tc := range []struct {
		expr, fails string
	}{
		{`(gen,packets=10) > (cms,width=1M,depth=4)`, "cms#1"},
		{`(gen,packets=10) > [(cms,width=400K,depth=4)|(cms,width=400K,depth=3)]`, "cms#2"},
		{`(gen,packets=10) > [(cms,width=256K,depth=4)|(cms,width=256K,depth=3)]`, ""},
	} {
		r := ffpf(t, "run", "--hierarchy", root, tc.expr)
		switch {
		case tc.fails == "" && r.code != 0:
			t.Errorf("%s: exit %d: %s", tc.expr, r.code, r.stderr)
		case tc.fails != "" && (r.code != 2 || !strings.Contains(r.stderr, "cannot place "+tc.fails) || !strings.Contains(r.stderr, "does not fit in the 16.0 MiB of state user keeps")):
			t.Errorf("%s: exit %d, %q; want exit 2 naming %s and the budget", tc.expr, r.code, r.stderr, tc.fails)
		}
	}
	r := ffpf(t, "run", "--hierarchy", filepath.Join(dir, "nope.yaml"), "(gen,packets=1) > (pktcount)")
	if r.code != 2 {
		t.Errorf("a missing hierarchy file: exit %d", r.code)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("state: 16 parsecs\n"), 0o644)
	if r := ffpf(t, "check", "--hierarchy", bad, "(gen) > (pktcount)"); r.code != 2 || !strings.Contains(r.stderr, "must be a size") {
		t.Errorf("state: 16 parsecs: exit %d, %q", r.code, r.stderr)
	}

	if os.Geteuid() != 0 {
		t.Skip("the kernel flowspace needs root")
	}
	kern := filepath.Join(dir, "kernel.yaml")
	os.WriteFile(kern, []byte("children:\n  - kind: kernel\n    state: 1MB\n"), 0o644)
	r = ffpf(t, "place", "--hierarchy", kern, "-i", "lo", "(cms,width=100K,depth=4) ; (cms,width=1000,depth=4,key=dstip)")
	if r.code != 0 {
		t.Fatalf("place: exit %d: %s", r.code, r.stderr)
	}
	big := r.stdout[strings.Index(r.stdout, "cms#1"):]
	if !strings.Contains(big, "not in kernel: its state (") || !strings.Contains(big, "does not fit in the 1.0 MiB of state kernel keeps") {
		t.Errorf("the large cms is not refused by the kernel's budget:\n%s", r.stdout)
	}
	if i := strings.Index(r.stdout, "└── kernel"); i < 0 || !strings.Contains(r.stdout[i:], "cms#2") || strings.Contains(r.stdout[i:], "cms#1") {
		t.Errorf("want cms#2 in the kernel, cms#1 above:\n%s", r.stdout)
	}
}
