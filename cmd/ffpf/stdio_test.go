package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// These tests hold standard input and output, pipes and full disks to
// tcpdump's behaviour: "-" is standard input for -r and standard output
// for -w; a pipe whose reader goes away ends the run quietly; ^C ends a
// run blocked on a pipe; a full disk leaves a file every reader opens.

// ffpfIO runs ffpf in dir with stdin (nil: none), the environment's env
// added, and returns what it printed.
func ffpfIO(t *testing.T, dir string, stdin io.Reader, env []string, args ...string) cliResult {
	t.Helper()
	return runCLI(t, ffpfBin, dir, stdin, append([]string{}, env...), args...)
}

// waitExit waits for cmd to end (the long deadline only ends a test that
// would hang) and returns its exit status.
func waitExit(t *testing.T, cmd *exec.Cmd, what string) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("ffpf did not end (60 s) %s", what)
	}
	return -1
}

// -w - writes the capture to standard output, byte for byte what -w FILE
// writes, and creates no file named "-"; the counters, --json included,
// go to standard error.
func TestWriteDashIsStdout(t *testing.T) {
	a, _ := traces(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "tcp.pcap")
	if r := ffpf(t, "run", "-r", a, "-w", file, `(bpf,"tcp")`); r.code != 0 {
		t.Fatalf("-w FILE: exit %d: %s", r.code, r.stderr)
	}
	want, _ := os.ReadFile(file)
	r := ffpfIO(t, dir, nil, nil, "run", "-r", a, "-w", "-", `(bpf,"tcp")`)
	if r.code != 0 || r.stdout != string(want) {
		t.Fatalf("-w -: exit %d, %d bytes on standard output, want %d: %s", r.code, len(r.stdout), len(want), r.stderr)
	}
	if !strings.Contains(r.stderr, "packets in") || !strings.Contains(r.stderr, "export#1") {
		t.Errorf("the counters are not on standard error:\n%s", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "-")); err == nil {
		t.Fatal(`-w - created a file named "-"`)
	}
	r = ffpfIO(t, dir, nil, nil, "run", "--json", "-r", a, "-w", "-", `(bpf,"tcp")`)
	if r.code != 0 || r.stdout != string(want) {
		t.Fatalf("--json -w -: exit %d, %d bytes on standard output: %s", r.code, len(r.stdout), r.stderr)
	}
	doc := parseRun(t, cliResult{stdout: r.stderr})
	if e := doc.Functions[doc.byClass("export")[0]]; e.Out == 0 || e.Dropped != 0 {
		t.Errorf("export: %+v", e)
	}
	// -w /dev/stdout is standard output too: the counters move aside.
	cmd := exec.Command(ffpfBin, "run", "-r", a, "-w", "/dev/stdout", `(bpf,"tcp")`)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil || out.String() != string(want) || !strings.Contains(errb.String(), "export#1") {
		t.Errorf("-w /dev/stdout: %v, %d bytes on standard output: %s", err, out.Len(), errb.String())
	}
	// --print has standard output already.
	if r := ffpfIO(t, dir, nil, nil, "run", "--print", "-r", a, "-w", "-", `(bpf,"tcp")`); r.code != 2 || r.stdout != "" ||
		!strings.Contains(r.stderr, "--print and -w - both write to standard output") {
		t.Errorf("--print -w -: exit %d: %s", r.code, r.stderr)
	}
}

// -r - reads standard input, a pipe or a redirected file, even when a
// file named "-" lies in the working directory; check and place do not
// read it (nor the file "-").
func TestReadDashIsStdin(t *testing.T) {
	a, b := traces(t)
	dir := t.TempDir()
	other, _ := os.ReadFile(b)
	if err := os.WriteFile(filepath.Join(dir, "-"), other, 0o644); err != nil {
		t.Fatal(err)
	}
	want := parseRun(t, ffpf(t, "run", "--json", "-r", a, `(bpf,"tcp") > (pktcount)`))
	data, _ := os.ReadFile(a)
	f, err := os.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for name, in := range map[string]io.Reader{"pipe": bytes.NewReader(data), "file": f} {
		r := ffpfIO(t, dir, in, nil, "run", "--json", "-r", "-", `(bpf,"tcp") > (pktcount)`)
		if r.code != 0 {
			t.Fatalf("%s: exit %d: %s", name, r.code, r.stderr)
		}
		got := parseRun(t, r)
		if got.Packets != want.Packets || got.Functions[1].Out != want.Functions[1].Out {
			t.Errorf("%s: %d packets, %d tcp; from the file %d, %d", name, got.Packets, got.Functions[1].Out, want.Packets, want.Functions[1].Out)
		}
	}
	// A pipe that stays open: check and place must not wait for it.
	for _, cmdName := range []string{"check", "place"} {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(ffpfBin, cmdName, "-r", "-", `(bpf,"tcp") > (pktcount)`)
		cmd.Dir, cmd.Stdin = dir, pr
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pr.Close()
		code := waitExit(t, cmd, cmdName+" -r - with standard input open and silent")
		pw.Close()
		if code != 0 {
			t.Errorf("%s -r -: exit %d: %s", cmdName, code, out.String())
		}
	}
}

// A pipe whose reader goes away (ffpf run -w - | head -c 100) ends the run,
// also an endless one, quietly and with exit status 0 as tcpdump's; the
// counters on standard error account for every packet.
func TestClosedPipeEndsTheRun(t *testing.T) {
	for _, out := range []string{"-", "/dev/stdout"} {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(ffpfBin, "run", "--json", "-w", out, `(gen,packets=1G) > (bpf,"tcp")`)
		var errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = pw, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pw.Close()
		head := make([]byte, 100)
		if _, err := io.ReadFull(pr, head); err != nil {
			t.Fatal(err)
		}
		pr.Close() // head -c 100 exits
		code := waitExit(t, cmd, "after the reader of its output closed it (-w "+out+")")
		if code != 0 || binary.LittleEndian.Uint32(head) != 0xa1b2c3d4 {
			t.Errorf("-w %s: exit %d: %s", out, code, errb.String())
			continue
		}
		doc := parseRun(t, cliResult{stdout: errb.String()})
		if doc.Packets == 0 || doc.Packets >= 1e9 {
			t.Errorf("-w %s: %d packets", out, doc.Packets)
		}
		if e := doc.Functions[doc.byClass("export")[0]]; e.Dropped == 0 || e.In != e.Out+e.Dropped {
			t.Errorf("-w %s: export %+v", out, e)
		}
	}
}

// ^C ends a run whose output pipe is full and never read, at the first
// signal.
func TestInterruptBlockedOutput(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	cmd := exec.Command(ffpfBin, "run", "--json", "-w", "-", `(gen,packets=1G) > (bpf,"tcp")`)
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = pw, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	// The pipe holds 64 KB: once it is full, ffpf is blocked writing.
	waitProc(t, cmd, "the pipe is full", func(int) bool {
		n, err := unix.IoctlGetInt(int(pr.Fd()), unix.TIOCINQ)
		return err == nil && n >= 60000
	})
	cmd.Process.Signal(os.Interrupt)
	if code := waitExit(t, cmd, "at the first SIGINT while its output pipe is full"); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	doc := parseRun(t, cliResult{stdout: errb.String()})
	if e := doc.Functions[doc.byClass("export")[0]]; e.In != e.Out+e.Dropped || e.Out == 0 {
		t.Errorf("export %+v", e)
	}
}

// A disk that fills during -w (a 256 KB tmpfs the test mounts) leaves a
// file that ends with a whole record: tcpdump reads it without complaint,
// and exactly the packets counted as written; the rest are dropped, and
// the run ends with exit status 1 naming the file.
func TestFullDiskLeavesWholeRecords(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("cannot mount a small tmpfs: not root")
		}
		t.Skip("needs root to mount a small tmpfs")
	}
	a, _ := traces(t)
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v: %s", err, out)
	}
	defer exec.Command("umount", dir).Run()
	for _, name := range []string{"out.pcap", "out.pcapng"} {
		out := filepath.Join(dir, name)
		r := ffpf(t, "run", "--json", "-r", a, "-w", out, `(bpf,"ip")`)
		if r.code != 1 || !strings.Contains(r.stderr, "cannot write "+out+": no space left on device") {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		doc := parseRun(t, r)
		e := doc.Functions[doc.byClass("export")[0]]
		if e.Dropped == 0 || e.Out == 0 {
			t.Fatalf("export %+v: the disk did not fill", e)
		}
		if n, ok := tcpdumpCount(t, out, ""); ok && n != e.Out {
			t.Errorf("%s: tcpdump reads %d packets, export wrote %d", name, n, e.Out)
		}
		if td, err := exec.LookPath("tcpdump"); err == nil {
			msg, err := exec.Command(td, "-r", out, "-w", "/dev/null").CombinedOutput()
			if err != nil || strings.Contains(string(msg), "truncated") {
				t.Errorf("tcpdump -r %s: %v: %s", name, err, msg)
			}
		}
		os.Remove(out)
	}
}

// Records longer than 65535 bytes, up to the snap length, are kept whole
// on every read path: standard input (a pipe), FFPF_PCAP_READ=read,
// FFPF_NO_MMAP=1, as libpcap keeps them (tcpdump -r - -w F writes them
// back whole).
func TestLongRecordsThroughPipes(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "jumbo.pcap")
	var recs []precord
	for i, n := range []int{100, 70060, 200000, 262144, 60} {
		d := make([]byte, n)
		for j := range d {
			d[j] = byte(j % 251)
		}
		copy(d, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 8, 0})
		recs = append(recs, precord{sec: 1_700_000_000 + uint32(i), incl: uint32(n), orig: uint32(n), data: d})
	}
	writeClassic(t, in, binary.LittleEndian, false, 262144, 1, recs)
	want, _ := os.ReadFile(in)
	if td, err := exec.LookPath("tcpdump"); err == nil {
		cmd := exec.Command(td, "-r", "-", "-w", "-")
		cmd.Stdin = bytes.NewReader(want)
		if got, err := cmd.Output(); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("tcpdump -r - -w - does not keep the records whole (%v): the test is wrong", err)
		}
	}
	for _, c := range []struct {
		name string
		env  []string
		args []string
	}{
		{"pipe", nil, []string{"-r", "-"}},
		{"read", []string{"FFPF_PCAP_READ=read"}, []string{"-r", in}},
		{"no-mmap", []string{"FFPF_NO_MMAP=1"}, []string{"-r", in}},
		{"ring", nil, []string{"-r", in}},
		{"mmap", []string{"FFPF_PCAP_READ=mmap"}, []string{"-r", in}},
	} {
		out := filepath.Join(dir, c.name+".pcap")
		var stdin io.Reader
		if c.name == "pipe" {
			stdin = bytes.NewReader(want)
		}
		args := append(append([]string{"run"}, c.args...), "-w", out, `(bpf,"ip") > (pktcount)`)
		if r := ffpfIO(t, dir, stdin, c.env, args...); r.code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, r.code, r.stderr)
		}
		got, _ := os.ReadFile(out)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: -w wrote %d bytes, want the input's %d (records %s)", c.name, len(got), len(want), recordLengths(got))
		}
	}
}

// recordLengths lists a little-endian classic pcap file's captured lengths.
func recordLengths(d []byte) string {
	var s []string
	for p := 24; p+16 <= len(d); {
		n := int(binary.LittleEndian.Uint32(d[p+8:]))
		s = append(s, fmt.Sprint(n))
		p += 16 + n
	}
	return strings.Join(s, " ")
}

// A file cut by another program while it is read, mapped or through the
// ring: the run ends with an error naming the file (no nil pointer), and
// every function accounts for every packet it received, and received
// every packet its input passed on.
func TestTruncatedWhileRead(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "big.pcap")
	if r := ffpf(t, "gen", "-o", src, "--packets", "200000", "--seed", "3"); r.code != 0 {
		t.Fatalf("gen: %s", r.stderr)
	}
	data, _ := os.ReadFile(src)
	for _, acc := range []string{"mmap", "ring"} {
		for round := 0; round < 3; round++ {
			path := filepath.Join(dir, "cut.pcap")
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(ffpfBin, "run", "--json", "-r", path, "-w", "/dev/null", `(bpf,"tcp or udp") > (bytecount)`)
			cmd.Env = append(os.Environ(), "FFPF_PCAP_READ="+acc)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Cut the file at some point of the run, different each round.
			time.Sleep(time.Duration(round*15) * time.Millisecond)
			if err := os.Truncate(path, int64(len(data)/3)); err != nil {
				t.Fatal(err)
			}
			code := waitExit(t, cmd, "after its input was cut")
			msg := errb.String()
			if strings.Contains(msg, "nil pointer") || strings.Contains(msg, "goroutine ") {
				t.Fatalf("%s: %s", acc, msg)
			}
			if code != 0 && (code != 1 || !strings.Contains(msg, path)) {
				t.Errorf("%s: exit %d without naming the file: %s", acc, code, msg)
			}
			var doc runJSON
			if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
				t.Fatalf("%s: %v: %s", acc, err, out.String())
			}
			for i, f := range doc.Functions {
				if f.In != f.Out+f.Filtered+f.Dropped {
					t.Errorf("%s: %s: in %d != out %d + filtered %d + dropped %d", acc, f.ID, f.In, f.Out, f.Filtered, f.Dropped)
				}
				if i > 0 && f.In != doc.Functions[i-1].Out {
					t.Errorf("%s: %s received %d packets, %s passed on %d", acc, f.ID, f.In, doc.Functions[i-1].ID, doc.Functions[i-1].Out)
				}
			}
		}
	}
}
