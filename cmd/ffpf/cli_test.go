package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket/pcapgo"
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
	// past libpcap's largest, as tcpdump's -s: a usage error
	if r := ffpf(t, "run", "-r", a, "-s", "262145", "(pktcount)"); r.code != 2 || !strings.Contains(r.stderr, "up to 262144") {
		t.Errorf("-s 262145: exit %d, %q", r.code, r.stderr)
	}
}

// run -h shows every flag in its synopsis.
func TestRunHelpNamesEveryFlag(t *testing.T) {
	r := ffpf(t, "run", "-h")
	synopsis, _, _ := strings.Cut(r.stderr, "\n\n")
	for _, f := range []string{"-r FILE", "-i IFACE", "-c N", "-w OUT.pcap", "-s SNAPLEN", "--print", "--hierarchy FILE.yaml", "--flowgroup POLICY", "--workers N", "--json", "-e EXPR"} {
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

// -w x.pcapng writes pcapng with the timestamps to the nanosecond:
// tcpdump reads the same packets at the same times from it as from the
// nanosecond pcap it came from.
func TestWritePcapng(t *testing.T) {
	td, err := exec.LookPath("tcpdump")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("tcpdump, the oracle, is not installed (make deps installs it)")
		}
		t.Skip("tcpdump is not installed")
	}
	a, _ := traces(t)
	dir := t.TempDir()
	nanos, out := filepath.Join(dir, "ns.pcap"), filepath.Join(dir, "out.pcapng")
	f, err := os.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	g, err := os.Create(nanos)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriterNanos(g)
	w.WriteFileHeader(65535, r.LinkType())
	for i := 0; ; i++ {
		data, ci, err := r.ReadPacketData()
		if err != nil {
			break
		}
		ci.Timestamp = ci.Timestamp.Add(time.Duration(i%1000) * time.Nanosecond)
		if err := w.WritePacket(ci, data); err != nil {
			t.Fatal(err)
		}
	}
	g.Close()
	if r := ffpf(t, "run", "-r", nanos, "-w", out, `(bpf,"tcp or udp")`); r.code != 0 {
		t.Fatalf("run -w %s: exit %d: %s", out, r.code, r.stderr)
	}
	dump := func(file string) string {
		b, err := exec.Command(td, "-n", "-tt", "--time-stamp-precision=nano", "-r", file, "tcp or udp").Output()
		if err != nil {
			t.Fatalf("tcpdump -r %s: %v", file, err)
		}
		return string(b)
	}
	want, got := dump(nanos), dump(out)
	if got != want || strings.Count(got, "\n") < 1000 {
		t.Errorf("tcpdump reads %d lines from the pcapng file, %d from its input; first difference near:\n%s",
			strings.Count(got, "\n"), strings.Count(want, "\n"), firstDiff(got, want))
	}
	if h, _ := os.ReadFile(out); len(h) < 4 || string(h[:4]) != "\x0a\x0d\x0d\x0a" {
		t.Errorf("%s is not pcapng", out)
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return al[i] + "\n" + bl[i]
		}
	}
	return "(one is a prefix of the other)"
}

// A hierarchy file must be a regular file of at most 1 MiB: /dev/zero is
// refused, not read without end.
func TestHierarchyNotAFile(t *testing.T) {
	for _, cmd := range []string{"hierarchy", "place", "check"} {
		args := []string{cmd, "--hierarchy", "/dev/zero"}
		if cmd != "hierarchy" {
			args = append(args, "(gen) > (pktcount)")
		}
		r := ffpf(t, args...)
		if r.code != 2 || r.stderr != "ffpf: cannot read /dev/zero: it is a character device, not a regular file\n" {
			t.Errorf("%s --hierarchy /dev/zero: exit %d: %q", cmd, r.code, r.stderr)
		}
	}
}

// -Q is the direction of the capture on -i: with -r, as with a gen
// source, it is refused, not ignored.
func TestDirectionNeedsAnInterface(t *testing.T) {
	a, _ := traces(t)
	for _, args := range [][]string{
		{"run", "-Q", "in", "-r", a, "(pktcount)"},
		{"run", "-Q", "in", "(gen,packets=10) > (pktcount)"},
		{"check", "-Q", "out", "-r", a, "(pktcount)"},
	} {
		r := ffpf(t, args...)
		if r.code != 2 || r.stderr != "ffpf: -Q (--direction) is the direction of the capture on -i IFACE\n" {
			t.Errorf("ffpf %s: exit %d, %q", strings.Join(args, " "), r.code, r.stderr)
		}
	}
}

// gen -i names an interface that does not exist: exit 2, as run -i.
func TestGenNoSuchInterface(t *testing.T) {
	r := ffpf(t, "gen", "-i", "nonexist0", "--packets", "1")
	if r.code != 2 || r.stderr != "ffpf: nonexist0: No such device exists\n" {
		t.Errorf("exit %d, %q", r.code, r.stderr)
	}
}

// --workers takes a whole number of workers, 1 or more: anything else is
// a usage error, one sentence, exit 2.
func TestWorkersFlag(t *testing.T) {
	for _, v := range []string{"0", "-2", "two", "1.5", ""} {
		r := ffpf(t, "run", "--workers", v, "(gen,packets=10) > (pktcount)")
		if r.code != 2 || !strings.Contains(r.stderr, "the number of workers is a whole number, 1 or more") || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("--workers %q: exit %d, %q; want 2 and one sentence", v, r.code, r.stderr)
		}
	}
	if r := ffpf(t, "run", "--workers", "1", "--json", "(gen,packets=10) > (pktcount)"); r.code != 0 || parseRun(t, r).Packets != 10 {
		t.Errorf("--workers 1: exit %d: %s", r.code, r.stderr)
	}
}
