package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFilesRefusedAtOnce: a file of input that is not a regular file is
// refused before it is read, exit status 2, one sentence: /dev/zero would
// be read without end, a FIFO without a writer waited for, a directory
// read as nothing. A file read whole (trumpet check's FILE, events=,
// --hierarchy) must also be at most 1 MiB (a capture named by mistake);
// a capture (-r, pcap's file=) may be a FIFO, a stream from another
// capture, and has no size bound.
func TestFilesRefusedAtOnce(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.pcap")
	if err := os.WriteFile(big, bytes.Repeat([]byte("#\n"), 600_000), 0o600); err != nil {
		t.Fatal(err)
	}
	whole := []struct{ path, why string }{
		{"/dev/zero", "it is a character device, not a regular file"},
		{fifo, "it is a named pipe (FIFO), not a regular file"},
		{dir, "it is a directory, not a regular file"},
		{big, "it is 1200000 bytes, and an events file may have at most 1048576 (1 MiB)"},
	}
	var slowest time.Duration
	try := func(want string, args ...string) {
		t.Helper()
		start := time.Now()
		cmd := exec.Command(ffpfBin, args...)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(5 * time.Second): // at once is milliseconds; a hang is for ever
			cmd.Process.Kill()
			<-done
			t.Fatalf("ffpf %s did not end within 5 s", strings.Join(args, " "))
		}
		slowest = max(slowest, time.Since(start))
		line, _, _ := strings.Cut(errb.String(), "\n")
		if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(line, want) {
			t.Errorf("ffpf %s: exit %d, %q; want exit 2 and %q", strings.Join(args, " "), code, errb.String(), want)
		}
	}
	for _, f := range whole {
		want := "cannot read " + f.path + ": " + f.why
		try(want, "trumpet", "check", f.path)
		try(want, "check", "(gen) > (trumpet,events="+f.path+")")
		try(want, "run", "(gen,packets=10) > (trumpet,events="+f.path+") > (export,format=jsonl,file=-)")
		try(strings.Replace(want, "an events file", "a hierarchy file", 1), "place", "--hierarchy", f.path, "(gen) > (pktcount)")
	}
	for _, f := range whole[:3] {
		if f.path == fifo {
			continue // a capture may be a FIFO
		}
		want := "cannot read " + f.path + ": " + strings.Replace(f.why, "a regular file", "a regular file or a FIFO", 1)
		try(want, "run", "-r", f.path, "(pktcount)")
		try(want, "check", "(pcap,file="+f.path+") > (pktcount)")
	}
	t.Logf("the slowest refusal took %v", slowest)
}
