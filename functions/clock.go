package functions

import "math"

// NoDeadline is the deadline of a clocked function with nothing due.
const NoDeadline int64 = math.MaxInt64

// Clocked is a function with periodic work on the packet clock (an epoch,
// a window, a sweep). Time is the stream's packet clock, in nanoseconds
// since the Unix epoch: the capture time of the packets for a file, so that
// a file gives the same result on every run whatever the batch size.
//
// Where a stream enters a flowspace, the flowspace splits a batch at the
// first packet whose time reaches the earliest deadline on its route,
// processes the packets before it, ticks the functions that are due (under
// the lock Process runs under), and goes on with the rest.
type Clocked interface {
	// Deadline is the time of the function's next periodic work, or
	// NoDeadline. It is called under the function's lock.
	Deadline() int64
	// Tick does the work due at now ≥ Deadline(): a window that ends at
	// or before now closes (and reports), and the next deadline follows.
	Tick(now int64)
}

// Flusher is a function with work at the end of its input (the report of
// the last window, or of the whole run): the flowspace calls Flush once
// every stream that reaches the function has ended, with the time the
// streams ended at, before anything is torn down.
type Flusher interface {
	Flush(now int64)
}

// AlignUp returns the first multiple of interval after t: intervals are
// aligned to multiples of themselves on the packet clock, so that windows
// of 1 s start on whole seconds whatever the first packet's time.
func AlignUp(t, interval int64) int64 {
	if interval <= 0 {
		return NoDeadline
	}
	return (t/interval + 1) * interval
}

// Drainer is the Go half of a function whose eBPF code keeps an entry per
// flow in hash maps by epoch parity (ebpfgen.Drained). Once epoch e has
// ended (and a grace), the eBPF flowspace reads the map of e and calls
// Drain with its n entries: keys holds n keys, values n values per CPU
// (cpus of them, key i's at i·cpus), each of the sizes the code declared;
// the map also holds entries of e-2 its drain kept (values stamped with
// another epoch), and n may be 0. Then the entries no packet of e wrote
// are deleted. It calls Drain for every epoch in order, from the
// goroutine that reads the flowspace's state, under the Go half's lock;
// after a stall of more than two epochs, the epochs whose packets found
// their map not ready (counted as dropped) are passed over. When the
// capture stops, the epoch it stopped in is drained too, before Flush.
type Drainer interface {
	Drain(e int64, keys, values []byte, n, cpus int)
}

// Presenter is a Drainer that is told the present on the packet clock
// before a handler runs on it: its drains come after their epochs (and a
// grace), so the epoch its Go half is in lags the present, and what a
// handler starts "with the next interval" must start after the present's.
type Presenter interface {
	Present(now int64)
}
