package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// These tests run the ffpf binary as a user would and check its output and
// exit status against DESIGN.md §7.

// ffpfBin is the binary the tests run: the whole of ffpf (go build
// ./cmd/ffpf), or with FFPF_TEST_NOGRPC=1 make build's pair, ffpf built
// without gRPC (-tags nogrpc) with ffpf-grpc, the whole build, beside it,
// so that the tests check both builds. wholeBin is the whole build.
var ffpfBin, wholeBin, testDir string

func TestMain(m *testing.M) {
	var err error
	testDir, err = os.MkdirTemp("", "ffpf-e2e")
	if err != nil {
		panic(err)
	}
	ffpfBin = filepath.Join(testDir, "ffpf")
	wholeBin = ffpfBin
	if os.Getenv("FFPF_TEST_NOGRPC") != "" {
		wholeBin = filepath.Join(testDir, grpcSibling)
		err = buildFFPF(wholeBin)
		if err == nil {
			err = buildFFPF(ffpfBin, "-tags", "nogrpc")
		}
	} else {
		err = buildFFPF(ffpfBin)
	}
	if err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(testDir)
	os.Exit(code)
}

// buildFFPF builds cmd/ffpf to out, with flags before the package.
func buildFFPF(out string, flags ...string) error {
	args := append(append([]string{"build", "-o", out}, flags...), ".")
	if msg, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	return nil
}

type cliResult struct {
	stdout, stderr string
	code           int
}

func ffpf(t *testing.T, args ...string) cliResult {
	t.Helper()
	return runCLI(t, ffpfBin, "", nil, nil, args...)
}

// runCLI runs bin in dir ("": here) with stdin (nil: none), the
// environment's env added, and returns what it printed; a stack trace
// fails the test.
func runCLI(t *testing.T, bin, dir string, stdin io.Reader, env []string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Stdin = dir, stdin
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	return runCmd(t, cmd, args)
}

// runCmd runs cmd (ffpf with args) and returns what it printed and its
// exit status; a stack trace fails the test.
func runCmd(t *testing.T, cmd *exec.Cmd, args []string) cliResult {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(errb.String(), "goroutine ") || strings.Contains(errb.String(), "panic:") {
		t.Fatalf("ffpf %v printed a stack trace:\n%s", args, errb.String())
	}
	return cliResult{out.String(), errb.String(), code}
}

// runJSON is the --json document.
type runJSON struct {
	Packets   uint64 `json:"packets"`
	ElapsedNS int64  `json:"elapsed_ns"`
	Functions []struct {
		ID        string         `json:"id"`
		Label     string         `json:"label"`
		Class     string         `json:"class"`
		Flowspace string         `json:"flowspace"`
		Params    map[string]any `json:"params"`
		In        uint64         `json:"in"`
		Out       uint64         `json:"out"`
		Filtered  uint64         `json:"filtered"`
		Dropped   uint64         `json:"dropped"`
		Records   uint64         `json:"records"`
		State     map[string]any `json:"state"`
	} `json:"functions"`
	Bridges []any `json:"bridges"`
}

func parseRun(t *testing.T, r cliResult) runJSON {
	t.Helper()
	var doc runJSON
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("--json output does not parse: %v\n%s", err, r.stdout)
	}
	if doc.Bridges == nil {
		t.Error(`"bridges" missing or null`)
	}
	for _, f := range doc.Functions {
		if f.In != f.Out+f.Filtered+f.Dropped {
			t.Errorf("%s: in %d != out %d + filtered %d + dropped %d", f.ID, f.In, f.Out, f.Filtered, f.Dropped)
		}
		if f.Flowspace == "" || f.Params == nil || f.State == nil {
			t.Errorf("%s: incomplete entry %+v", f.ID, f)
		}
	}
	return doc
}

func (d runJSON) byClass(class string) []int {
	var idx []int
	for i, f := range d.Functions {
		if f.Class == class {
			idx = append(idx, i)
		}
	}
	return idx
}

func stateNum(t *testing.T, v any) uint64 {
	t.Helper()
	f, ok := v.(float64)
	if !ok {
		t.Fatalf("state value %v is not a number", v)
	}
	return uint64(f)
}

// traces generates two small traces once per test binary.
func traces(t *testing.T) (a, b string) {
	t.Helper()
	dir := t.TempDir()
	a, b = filepath.Join(dir, "a.pcap"), filepath.Join(dir, "b.pcap")
	for i, f := range []string{a, b} {
		if r := ffpf(t, "gen", "-o", f, "--packets", "30000", "--seed", strconv.Itoa(i+1), "--malformed", "0.02"); r.code != 0 {
			t.Fatalf("gen: %d %s", r.code, r.stderr)
		}
	}
	return a, b
}

// tcpdumpCount is the oracle: how many packets of file tcpdump matches.
func tcpdumpCount(t *testing.T, file, expr string) (uint64, bool) {
	t.Helper()
	td, err := exec.LookPath("tcpdump")
	if err != nil {
		if _, err := os.Stat("/usr/sbin/tcpdump"); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatal("tcpdump, the oracle, is not installed (make deps installs it)")
			}
			t.Log("tcpdump is not installed: not comparing with it")
			return 0, false
		}
		td = "/usr/sbin/tcpdump"
	}
	out, err := exec.Command(td, "-nn", "-r", file, expr).Output()
	if err != nil {
		t.Fatalf("tcpdump: %v", err)
	}
	return uint64(bytes.Count(out, []byte("\n"))), true
}

func TestPaperExampleTwoFileSourcesJoined(t *testing.T) {
	a, b := traces(t)
	expr := `[[(pcap,file=` + a + `)|(pcap,file=` + b + `)] > (BPF,expr="tcp and dst port 80")] > [(pktcount)|(bytecount)]`
	r := ffpf(t, "run", "--json", expr)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	doc := parseRun(t, r)
	if doc.Packets != 60000 {
		t.Errorf("packets = %d, want 60000", doc.Packets)
	}
	if len(doc.byClass("pcap")) != 2 || len(doc.byClass("bpf")) != 1 {
		t.Fatalf("want two sources joined into one filter: %+v", doc.Functions)
	}
	bpf := doc.Functions[doc.byClass("bpf")[0]]
	if bpf.In != 60000 {
		t.Errorf("filter saw %d packets, want 60000", bpf.In)
	}
	pc := stateNum(t, doc.Functions[doc.byClass("pktcount")[0]].State["packets"])
	if pc != bpf.Out || pc == 0 {
		t.Errorf("pktcount %d, filter out %d", pc, bpf.Out)
	}
	if bc := stateNum(t, doc.Functions[doc.byClass("bytecount")[0]].State["bytes"]); bc < pc*54 {
		t.Errorf("bytecount %d implausible for %d packets", bc, pc)
	}
	na, okA := tcpdumpCount(t, a, "tcp and dst port 80")
	nb, okB := tcpdumpCount(t, b, "tcp and dst port 80")
	if okA && okB && na+nb != pc {
		t.Errorf("ffpf counted %d, tcpdump %d+%d", pc, na, nb)
	}
}

func TestDefaultSourceLimitAndOverlay(t *testing.T) {
	a, _ := traces(t)
	r := ffpf(t, "run", "--json", "-r", a, "-c", "1000", "-e", `(bpf,"udp") > (pktcount)`, "-e", `(bpf,expr="udp") > (bytecount)`)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	doc := parseRun(t, r)
	// -c counts the packets that reach the ends, each once: both ends see
	// the same 1,000 UDP packets.
	pc, bc := doc.Functions[doc.byClass("pktcount")[0]], doc.Functions[doc.byClass("bytecount")[0]]
	if pc.In != 1000 || bc.In != 1000 || doc.Packets <= 1000 {
		t.Errorf("-c 1000: pktcount counted %d, bytecount %d, of %d packets read", pc.In, bc.In, doc.Packets)
	}
	if n := len(doc.byClass("bpf")); n != 1 {
		t.Errorf("identical filters of two requests not shared: %d bpf functions", n)
	}
	if n := len(doc.byClass("pcap")); n != 1 {
		t.Errorf("default source not shared: %d", n)
	}
}

func TestWriteEndsToPcap(t *testing.T) {
	a, _ := traces(t)
	out := filepath.Join(t.TempDir(), "icmp.pcap")
	r := ffpf(t, "run", "--json", "-r", a, "-w", out, `(bpf,expr="icmp")`)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	doc := parseRun(t, r)
	n := doc.Functions[doc.byClass("bpf")[0]].Out
	if n == 0 {
		t.Fatal("no icmp in the trace")
	}
	// Reading the written file back gives the same packets.
	r2 := ffpf(t, "run", "--json", "-r", out, `(bpf,expr="icmp") > (pktcount)`)
	if doc2 := parseRun(t, r2); doc2.Packets != n {
		t.Errorf("wrote %d packets, read back %d", n, doc2.Packets)
	}
	if want, ok := tcpdumpCount(t, out, ""); ok && want != n {
		t.Errorf("tcpdump reads %d packets from -w file, want %d", want, n)
	}
}

func TestCheckPrintsCanonicalForm(t *testing.T) {
	r := ffpf(t, "check", `[(BPF,"tcp")|(bpf,expr="udp")] > (pktcount)`)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	want := `[(bpf,expr=tcp) | (bpf,expr=udp)] > (pktcount)`
	if got := strings.TrimSpace(r.stdout); got != want {
		t.Errorf("check printed %q, want %q", got, want)
	}
	if r2 := ffpf(t, "check", want); strings.TrimSpace(r2.stdout) != want {
		t.Errorf("canonical form not a fixed point: %q", r2.stdout)
	}
}

func TestClasses(t *testing.T) {
	r := ffpf(t, "classes")
	for _, c := range []string{"bpf", "pcap", "dev", "gen", "pktcount", "bytecount", "export"} {
		if !strings.Contains(r.stdout, c) {
			t.Errorf("classes does not list %s", c)
		}
	}
	var docs []map[string]any
	if err := json.Unmarshal([]byte(ffpf(t, "classes", "--json").stdout), &docs); err != nil || len(docs) < 7 {
		t.Errorf("classes --json: %v (%d classes)", err, len(docs))
	}
}

func TestBadInput(t *testing.T) {
	a, _ := traces(t)
	dir := t.TempDir()
	notPcap := filepath.Join(dir, "notes.txt")
	os.WriteFile(notPcap, []byte("these are not packets, just some text long enough\n"), 0o644)
	whole, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.pcap")
	os.WriteFile(truncated, whole[:len(whole)/2], 0o644)

	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string // substrings of stderr
	}{
		{"syntax", []string{"run", "-r", a, `(bpf,expr="tcp") > > (pktcount)`}, 2, []string{"1:20", "^"}},
		{"unknown class", []string{"run", "-r", a, `(bfp,expr="tcp")`}, 2, []string{`unknown class "bfp"`, `did you mean "bpf"`}},
		{"unknown parameter", []string{"run", "-r", a, `(bpf,exp="tcp")`}, 2, []string{`did you mean "expr"`}},
		{"bad filter", []string{"run", "-r", a, `(bpf,expr="tcp and dest 80")`}, 2, []string{"tcp and dest 80", "syntax error"}},
		{"no expression", []string{"run", "-r", a}, 2, []string{"no expression"}},
		{"no source", []string{"run", `(bpf,"tcp")`}, 2, []string{"has no input"}},
		{"bad flag", []string{"run", "--bogus"}, 2, []string{"bogus"}},
		{"unknown command", []string{"rnu"}, 2, []string{"unknown command"}},
		{"write over input", []string{"run", "-r", a, "-w", a, `(bpf,"udp")`}, 2, []string{"would write", "which pcap#1 reads"}},
		{"two writers", []string{"run", "-r", a, "-e", `(bpf,"udp") > (export,file=/tmp/ffpf-x.pcap)`, "-e", `(bpf,"tcp") > (export,file=/tmp/../tmp/ffpf-x.pcap)`}, 2, []string{"which export#1 writes"}},
		{"missing file", []string{"run", "-r", filepath.Join(dir, "nope.pcap"), `(pktcount)`}, 1, []string{"nope.pcap", "no such file"}},
		{"not pcap", []string{"run", "-r", notPcap, `(pktcount)`}, 1, []string{"notes.txt"}},
		{"truncated", []string{"run", "--json", "-r", truncated, `(pktcount)`}, 1, []string{"truncated.pcap", "record"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ffpf(t, tc.args...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d; stderr: %s", r.code, tc.code, r.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr %q lacks %q", r.stderr, w)
				}
			}
			// One sentence, then at most the caret block (indented).
			lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
			for _, l := range lines[1:] {
				if !strings.HasPrefix(l, "  ") {
					t.Errorf("error is more than one sentence and a caret: %q", r.stderr)
					break
				}
			}
			if len(lines) > 3 {
				t.Errorf("error has %d lines: %q", len(lines), r.stderr)
			}
			if tc.name == "truncated" {
				// Every complete record before the cut was processed.
				doc := parseRun(t, r)
				if doc.Packets == 0 || doc.Packets >= 30000 {
					t.Errorf("truncated file: processed %d packets", doc.Packets)
				}
			}
		})
	}
}

func TestSIGINTPrintsFinalState(t *testing.T) {
	cmd := exec.Command(ffpfBin, "run", "--json", `(gen,packets=1G) > (bpf,"udp") > (pktcount)`)
	var out, errb bytes.Buffer
	var wrote atomic.Bool // errb is written by another goroutine: look at it after Wait
	cmd.Stdout, cmd.Stderr = &out, writerFunc(func(p []byte) (int, error) { wrote.Store(true); return errb.Write(p) })
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until packets flow (the handler is installed before that), so
	// that a slow machine does not get the signal during start-up: 0.2 s
	// of CPU is far more than start-up takes, so it is running the graph.
	waitProc(t, cmd, "ffpf has run for 0.2 s of CPU", func(pid int) bool {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return wrote.Load() || err == nil && cpuTicks(st) >= 20
	})
	cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGINT: %v; %s", err, errb.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("ffpf did not stop on SIGINT")
	}
	doc := parseRun(t, cliResult{stdout: out.String()})
	if doc.Packets == 0 || doc.Packets >= 1e9 {
		t.Errorf("stopped after %d packets", doc.Packets)
	}
	pc := doc.Functions[doc.byClass("pktcount")[0]]
	if f := doc.Functions[doc.byClass("bpf")[0]]; f.In != doc.Packets || stateNum(t, pc.State["packets"]) != f.Out {
		t.Errorf("inconsistent final state: %+v", doc.Functions)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// waitProc waits until cond holds for the running cmd; the deadline only
// ends a test that would hang. It fails if cmd ends first.
func waitProc(t *testing.T, cmd *exec.Cmd, what string, cond func(pid int) bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(cmd.Process.Pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("gave up waiting (60 s) until %s", what)
		}
		if err := syscall.Kill(cmd.Process.Pid, 0); err != nil {
			t.Fatalf("ffpf ended before %s", what)
		}
	}
}

// cpuTicks returns utime+stime from a /proc/PID/stat line.
func cpuTicks(stat []byte) int {
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.Atoi(f[11])
	s, _ := strconv.Atoi(f[12])
	return u + s
}
