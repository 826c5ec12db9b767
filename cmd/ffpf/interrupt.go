package main

import (
	"context"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
)

// interrupts is how a run meets SIGINT and SIGTERM, as tcpdump does:
//
//   - During set-up (parsing, compiling filters with libpcap, placing,
//     opening files, FIFOs and captures, loading programs) the run is given
//     up: ffpf ends at once as killed by the signal (the shell's 130 for ^C,
//     143 for SIGTERM), and nothing of it stays behind.
//   - From Activate on (attaching the programs, starting the sources) the
//     run has started: the first signal stops it, the final state is
//     printed and the exit status is 0. A second signal kills ffpf.
//
// The handler is installed and removed beside set-up, not in its way: the
// runtime updates its signal thread's mask for each signal, a round trip
// to another thread each time, which on a loaded machine waits for a CPU.
// Until the handler is there a signal has its default action, which ends
// ffpf as killed by it (as set-up wants; a signal the shell started ffpf
// ignoring stays ignored until then), and the run does not start before
// it is there.
//
// Set-up cannot always notice a signal: a cgo call (libpcap compiling a
// long filter) or open(2) of a FIFO without a writer cannot be interrupted.
// But until Activate, everything set-up holds is a file descriptor (eBPF
// programs and maps not yet attached, sockets, files) that the end of the
// process releases, so the signal ends the process whatever set-up is
// doing. Activate attaches programs to interfaces, and a clsact filter
// outlives the process: from then on the runtime is stopped and closed,
// which detaches everything, before ffpf ends.
type interrupts struct {
	ctx       context.Context // done at the first signal of the run
	sigs      chan os.Signal
	installed chan struct{} // closed once the handler is installed
	once      sync.Once

	mu        sync.Mutex
	settingUp bool
}

// catchInterrupts starts watching for SIGINT and SIGTERM; the run is in
// set-up until started.
func catchInterrupts() *interrupts {
	ctx, cancel := context.WithCancel(context.Background())
	in := &interrupts{ctx: ctx, sigs: make(chan os.Signal, 1), installed: make(chan struct{}), settingUp: true}
	go func() {
		signal.Notify(in.sigs, os.Interrupt, syscall.SIGTERM)
		close(in.installed)
		sig, ok := <-in.sigs
		if !ok {
			return
		}
		// The first signal only: a second one gets the default, which
		// kills the process.
		signal.Stop(in.sigs)
		in.mu.Lock()
		if in.settingUp {
			die(sig) // with in.mu held: set-up cannot start attaching meanwhile
		}
		in.mu.Unlock()
		cancel()
	}()
	return in
}

// started marks the end of set-up: the caller is about to activate the
// runtime, after which a signal stops the run instead of ending ffpf. It
// waits for the handler, installed long before in practice.
func (in *interrupts) started() {
	<-in.installed
	in.mu.Lock()
	in.settingUp = false
	in.mu.Unlock()
}

// stop stops watching; signals get their default again, soon after it
// returns (a process about to exit does not wait for it; a later
// catchInterrupts is unaffected, as os/signal counts who wants a signal).
func (in *interrupts) stop() {
	in.once.Do(func() {
		go func() {
			<-in.installed
			signal.Stop(in.sigs)
			close(in.sigs) // Stop returned: nothing is sent on it any more
		}()
	})
}

// die ends the process as killed by sig, as a process without a handler
// for it is: its parent sees the signal (a shell says 130 or 143). Where
// the signal is ignored (ffpf was started with it ignored, as a background
// job of a script is with SIGINT), the exit status says it instead:
// 128 + its number.
func die(sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		s = syscall.SIGTERM
	}
	signal.Reset(s)
	// To this thread, so that the runtime's default handler (which kills
	// the process by the signal) runs before Tgkill returns.
	runtime.LockOSThread()
	syscall.Tgkill(syscall.Getpid(), syscall.Gettid(), s)
	os.Exit(128 + int(s))
}
