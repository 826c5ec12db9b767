package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// -s 0 means the default snap length, as in tcpdump.
func TestSnaplenZero(t *testing.T) {
	a, _ := traces(t)
	def := parseRun(t, ffpf(t, "run", "-r", a, "--json", "(bytecount)"))
	r := ffpf(t, "run", "-r", a, "-s", "0", "--json", "(bytecount)")
	if r.code != 0 {
		t.Fatalf("-s 0: exit %d: %s", r.code, r.stderr)
	}
	if doc := parseRun(t, r); doc.Packets != def.Packets || doc.Functions[1].State["bytes"] != def.Functions[1].State["bytes"] {
		t.Errorf("-s 0 gives %+v, the default %+v", doc.Functions, def.Functions)
	}
	if r := ffpf(t, "run", "-r", a, "-s", "-1", "(pktcount)"); r.code != 2 {
		t.Errorf("-s -1: exit %d", r.code)
	}
}

// run -h shows every flag in its synopsis.
func TestRunHelpNamesEveryFlag(t *testing.T) {
	r := ffpf(t, "run", "-h")
	synopsis, _, _ := strings.Cut(r.stderr, "\n\n")
	for _, f := range []string{"-r FILE", "-i IFACE", "-c N", "-w OUT.pcap", "-s SNAPLEN", "--print", "--hierarchy FILE.yaml", "--flowgroup POLICY", "--json", "-e EXPR"} {
		if !strings.Contains(synopsis, f) {
			t.Errorf("the synopsis of run -h lacks %s:\n%s", f, synopsis)
		}
	}
}

// --version names the module's version and the toolchain, and libpcap's.
func TestVersion(t *testing.T) {
	r := ffpf(t, "--version")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "ffpf version ") ||
		!strings.Contains(lines[0], runtime.Version()) || !strings.HasPrefix(lines[1], "libpcap version ") {
		t.Errorf("--version: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// -D lists the devices as tcpdump -D does, in a namespace of the test's
// own, whose devices do not change while it runs.
func TestListInterfaces(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("cannot test -D in a namespace of its own: not root")
		}
		t.Skip("needs root for a namespace of its own")
	}
	ns := "ffD" + strconv.Itoa(os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	want, err := exec.Command("ip", "netns", "exec", ns, "tcpdump", "-D").Output()
	if err != nil {
		t.Fatalf("tcpdump -D: %v", err)
	}
	got, err := exec.Command("ip", "netns", "exec", ns, ffpfBin, "-D").Output()
	if err != nil {
		t.Fatalf("ffpf -D: %v", err)
	}
	if string(got) != string(want) || !strings.Contains(string(got), ".any (") {
		t.Errorf("ffpf -D:\n%s\ntcpdump -D:\n%s", got, want)
	}
}

// check refuses an input it cannot read as run does: exit status 1, the
// file named with the reason.
func TestCheckUnreadableInput(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.pcap")
	for _, cmd := range []string{"run", "check"} {
		r := ffpf(t, cmd, "-r", missing, "(pktcount)")
		if r.code != 1 || r.stderr != "ffpf: pcap#1: cannot open "+missing+": no such file or directory\n" || r.stdout != "" {
			t.Errorf("%s -r %s: exit %d, stdout %q, stderr %q", cmd, missing, r.code, r.stdout, r.stderr)
		}
	}
}

// A NUL byte would cut the filter where libpcap reads it: refused, with
// the caret under the string.
func TestNULInString(t *testing.T) {
	r := ffpf(t, "check", `(bpf,"tcp\x00 or udp")`)
	if r.code != 2 || !strings.Contains(r.stderr, "1:6: parameter expr of class bpf:") || !strings.Contains(r.stderr, "NUL byte") ||
		!strings.Contains(r.stderr, "\n       ^") {
		t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
}
