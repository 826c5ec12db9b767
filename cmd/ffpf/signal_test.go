package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/ffpf-go/ffpf/internal/netnstest"
)

// These tests interrupt set-up, which the process cannot always notice
// (open(2) of a FIFO without a writer, libpcap compiling in cgo): a signal
// then ends ffpf as killed by it, as tcpdump is, and promptly.

// startRun starts ffpf with args; it is killed when the test ends.
func startSignalledRun(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(ffpfBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, &out, &errb
}

// killedBy waits for cmd to end after sig (a minute at most, however
// loaded the machine: set-up left alone takes far longer, or forever) and
// checks that it ended as killed by sig.
func killedBy(t *testing.T, cmd *exec.Cmd, sig syscall.Signal, stdout, stderr *bytes.Buffer) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("%v after %v: exit %v, want killed by the signal\nstdout: %s\nstderr: %s", cmd.Args[1:3], sig, err, stdout, stderr)
		}
		ws := ee.Sys().(syscall.WaitStatus)
		if !ws.Signaled() || ws.Signal() != sig {
			t.Fatalf("%v after %v: %v, want killed by the signal\nstdout: %s\nstderr: %s", cmd.Args[1:3], sig, ee, stdout, stderr)
		}
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatalf("%v still runs a minute after %v", cmd.Args[1:3], sig)
	}
	if stdout.Len() > 0 || strings.Contains(stderr.String(), "goroutine ") {
		t.Errorf("an interrupted set-up printed\nstdout: %s\nstderr: %s", stdout, stderr)
	}
}

// inOpenOfFIFO reports whether a thread of process pid waits in open(2)
// for a FIFO's writer.
func inOpenOfFIFO(pid int) bool {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	for _, task := range tasks {
		if w, _ := os.ReadFile(task + "/wchan"); string(w) == "wait_for_partner" {
			return true
		}
		// Where wchan is hidden: the thread is in openat (amd64's 257).
		if s, _ := os.ReadFile(task + "/syscall"); runtime.GOARCH == "amd64" && strings.HasPrefix(string(s), "257 ") {
			return true
		}
	}
	return false
}

// TestSignalWhileOpeningFIFO: a FIFO without a writer blocks open(2) for
// ever; SIGTERM (timeout's) or ^C must end ffpf nonetheless, the first
// time.
func TestSignalWhileOpeningFIFO(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			fifo := filepath.Join(t.TempDir(), "fifo")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			cmd, out, errb := startSignalledRun(t, "run", "-r", fifo, "(pktcount)")
			waitProc(t, cmd, "ffpf waits in open(2) of the FIFO", inOpenOfFIFO)
			cmd.Process.Signal(sig)
			killedBy(t, cmd, sig, out, errb)
		})
	}
}

// TestSIGINTWhileCompiling: libpcap takes minutes to compile a filter of
// 2,000 "or port N" terms, in a cgo call that cannot be interrupted; ^C
// during it must end ffpf at once.
func TestSIGINTWhileCompiling(t *testing.T) {
	a, _ := traces(t)
	var f strings.Builder
	f.WriteString("port 1")
	for i := 2; i <= 2000; i++ {
		fmt.Fprintf(&f, " or port %d", i)
	}
	cmd, out, errb := startSignalledRun(t, "run", "-r", a, fmt.Sprintf("(bpf,%q) > (pktcount)", f.String()))
	// One second of CPU: far more than ffpf takes to start, far less than
	// libpcap takes to compile the filter.
	waitProc(t, cmd, "ffpf has compiled for 1 s of CPU", func(pid int) bool {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return err == nil && cpuTicks(st) >= 100
	})
	cmd.Process.Signal(os.Interrupt)
	killedBy(t, cmd, syscall.SIGINT, out, errb)
}

// TestSIGINTAtAnyPointOfALiveRun sends ^C to `ffpf run -i` on a veth
// that traffic floods, at many points of its set-up (probing, placing,
// loading, attaching XDP, opening the ring buffer's reader) and of its run.
// Each time ffpf must end promptly: killed by the signal during set-up,
// with exit 0 and its final state once running; and the interface must be
// left with no program, link or clsact qdisc.
func TestSIGINTAtAnyPointOfALiveRun(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPair(t)
	// Children get SIGINT's default even where this test was started with
	// it ignored (as a background job of a script is): a handler, unlike
	// SIG_IGN, does not survive exec.
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, os.Interrupt)
	defer signal.Stop(sigc)

	// A flood (XDP transmission, millions of frames a second; GRO on the
	// receiving veth lets them in while no program is attached), so that
	// the ring buffer has filled the bridge's messages within a moment of
	// the program's attachment.
	enableGRO(t, nsB, ifB)
	gen := exec.Command("ip", "netns", "exec", nsA, ffpfBin, "gen", "-i", ifA, "--tx", "xdp", "--packets", "1000000000000")
	if err := gen.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		gen.Process.Kill()
		gen.Wait()
	})
	out := filepath.Join(t.TempDir(), "o.pcap")
	settingUp, running := 0, 0
	for i := range 32 {
		cmd := exec.Command("ip", "netns", "exec", nsB, ffpfBin, "run", "-i", ifB, "-Q", "in", "-w", out, `(bpf,"tcp or udp")`)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// From the start to a while into the run, 15 ms apart; the last
		// points once the program is attached.
		if i < 28 {
			time.Sleep(time.Duration(i) * 15 * time.Millisecond)
		} else {
			waitPrograms(t, 1)
			time.Sleep(time.Duration(i-28) * 50 * time.Millisecond)
		}
		cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(time.Minute):
			cmd.Process.Signal(syscall.SIGQUIT) // its goroutines, for the message
			<-done
			t.Fatalf("point %d: ffpf still runs a minute after SIGINT:\n%s", i, stderr.String())
		}
		var ee *exec.ExitError
		switch {
		case err == nil:
			running++
			if !strings.Contains(stdout.String(), "packets in") {
				t.Errorf("point %d: exit 0 without the final state:\n%s\n%s", i, stdout.String(), stderr.String())
			}
		case errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGINT:
			settingUp++
		default:
			t.Fatalf("point %d: %v after SIGINT, want killed by it (set-up) or exit 0 (run):\n%s\n%s", i, err, stdout.String(), stderr.String())
		}
		waitPrograms(t, 0)
		if q := clsactQdiscs(t); q != 0 {
			t.Fatalf("point %d: %d clsact qdiscs left on %s", i, q, ifB)
		}
	}
	t.Logf("%d runs interrupted during set-up, %d while running", settingUp, running)
	if running == 0 {
		t.Error("no run was interrupted while running")
	}
}

// clsactQdiscs counts the clsact qdiscs on the test's interface.
func clsactQdiscs(t *testing.T) int {
	t.Helper()
	ns, ifname := testIface(t)
	n := 0
	netnstest.In(t, ns, func() {
		l, err := netlink.LinkByName(ifname)
		if err != nil {
			t.Fatalf("%s in %s: %v", ifname, ns, err)
		}
		qs, err := netlink.QdiscList(l)
		if err != nil {
			t.Fatalf("qdiscs of %s: %v", ifname, err)
		}
		for _, q := range qs {
			if q.Type() == "clsact" {
				n++
			}
		}
	})
	return n
}
