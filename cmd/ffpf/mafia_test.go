package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// ffpf mafia check: a use case prints the request it becomes; the
// issue's four errors (a Bloom test used as a number, an undeclared state
// variable, a stream never consumed, a + whose branches write the same
// state) are exit 2, one line FILE:LINE:COL, the line and a caret under
// the column, a suggestion where one is near.
func TestMafiaCheckErrors(t *testing.T) {
	r := ffpf(t, "mafia", "check", "../../examples/mafia/heavy-hitters.mafia")
	if r.code != 0 || !strings.Contains(r.stdout, "nbytes:(cms,key=5tuple,width=256,depth=4,value=bytes)") {
		t.Fatalf("heavy-hitters: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	const decl = "flowid = Key(ip.src, ip.dst, tcp.src, tcp.dst, ip.proto)\n" +
		"hh = BloomFilter(alg=\"membership\", key=flowid, nhash=4, size=64)\n" +
		"n = Sketch(alg=\"count-min\", key=flowid, nhash=4, size=256)\n" +
		"c = HashMap(key=flowid, size=1024, type=Counter(width=32))\n"
	dir := t.TempDir()
	for i, tc := range []struct{ step, at, msg string }{
		{"pkts >> match(hh.test() + 1 > 2)", ":5:15:", "a truth value (a Bloom test), used as a number"},
		{"pkts >> n.set(n + 1) >> match(nn.min() > 1)", ":5:31:", "not declared (did you mean n?)"},
		{"pkts >> n.set(n + pkt.size) >> match(n.min() > 5) >> duplicate(alarms)", ":5:64:", "stream alarms is never consumed"},
		{"pkts >> (c.set(c + 1) + c.set(c + pkt.size))", ":5:25:", "both write c"},
	} {
		f := filepath.Join(dir, "p"+string(rune('a'+i))+".mafia")
		if err := os.WriteFile(f, []byte(decl+tc.step+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := ffpf(t, "mafia", "check", f)
		lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
		if r.code != 2 || !strings.Contains(lines[0], f+tc.at) || !strings.Contains(lines[0], tc.msg) {
			t.Errorf("%s: exit %d, want 2 and %s%s …%s…:\n%s", tc.step, r.code, f, tc.at, tc.msg, r.stderr)
			continue
		}
		if len(lines) != 3 || strings.TrimSpace(lines[1]) != tc.step || strings.TrimSpace(lines[2]) != "^" {
			t.Errorf("%s: no line and caret:\n%s", tc.step, r.stderr)
			continue
		}
		c, err := strconv.Atoi(strings.Split(tc.at, ":")[2])
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Index(lines[2], "^") - strings.Index(lines[1], "pkts"); got != c-1 {
			t.Errorf("%s: the caret is under column %d, want %d", tc.step, got+1, c)
		}
	}
}
