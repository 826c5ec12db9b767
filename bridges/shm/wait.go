package shm

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// Errors of Next.
var (
	ErrTimeout  = errors.New("shm: no batch within the deadline")
	ErrClosed   = errors.New("shm: the sender closed the ring")
	ErrPeerGone = errors.New("shm: the peer is gone")
)

// Spin bounds: a receiver that has caught up spins for about as long as
// its last waits took, at least MinSpin and at most MaxSpin, before it
// sleeps on the eventfd. Under load (a reply that comes within a few
// microseconds) it never makes a system call; idle, it sleeps at once.
const (
	MinSpin = 2 * time.Microsecond
	MaxSpin = 100 * time.Microsecond
)

// Receiver is the end of a ring that takes the cells the sender published,
// in order.
type Receiver struct {
	*end
	pfd   [2]unix.PollFd
	npfd  int
	spin  time.Duration
	held  bool
	Stats WaitStats
}

// WaitStats count how a receiver's batches were found: already there
// (polled), during its spin, or after sleeping on the eventfd; Waited is
// the time it spent spinning and sleeping, in nanoseconds.
type WaitStats struct {
	Polled, Spun, Slept uint64
	Waited              uint64
}

func newReceiver(e *end) *Receiver {
	r := &Receiver{end: e, spin: MinSpin, npfd: 1}
	r.pfd[0] = unix.PollFd{Fd: int32(e.event), Events: unix.POLLIN}
	return r
}

// Watch makes Next return ErrPeerGone once fd reports one of events (or
// hangs up): POLLRDHUP for a socket whose other end the peer holds,
// POLLIN for the peer's pidfd. The receiver does not take fd over.
func (r *Receiver) Watch(fd int, events int16) {
	r.pfd[1] = unix.PollFd{Fd: int32(fd), Events: events}
	r.npfd = 2
}

// Poll returns the next cell if it is ready, nil otherwise.
func (r *Receiver) Poll() (*Cell, error) {
	if r.held {
		panic("shm: the receiver holds a cell: Release it first")
	}
	h, t := r.head.Load(), r.tail.Load()
	switch {
	case h == t:
		return nil, nil
	case h-t > uint64(r.g.Cells):
		return nil, ErrCorrupt
	}
	r.held = true
	return &r.cells[t&uint64(r.g.Cells-1)], nil
}

// Release gives the cell Next or Poll returned back to the sender.
func (r *Receiver) Release() {
	if !r.held {
		panic("shm: Release without a cell")
	}
	r.held = false
	r.tail.Add(1)
}

// Next returns the next cell, waiting for it at most timeout (< 0: as long
// as it takes). It returns ErrClosed once the sender has closed the ring
// and every cell it published was taken, ErrPeerGone when the watched
// descriptor says the peer is gone.
func (r *Receiver) Next(timeout time.Duration) (*Cell, error) {
	if c, err := r.Poll(); c != nil || err != nil {
		r.Stats.Polled++
		return c, err
	}
	start := time.Now()
	defer r.waited(start)
	// Spin: under load the cell comes within about the last wait's time.
	for i := 0; ; i++ {
		if c, err := r.Poll(); c != nil || err != nil {
			r.Stats.Spun++
			r.adapt(start)
			return c, err
		}
		if i&63 == 63 && time.Since(start) > r.spin {
			break
		}
	}
	for {
		if r.closed.Load() != 0 {
			if c, err := r.Poll(); c != nil || err != nil {
				return c, err
			}
			return nil, ErrClosed
		}
		wait := -1
		if timeout >= 0 {
			left := timeout - time.Since(start)
			if left <= 0 {
				return nil, ErrTimeout
			}
			wait = int((left + time.Millisecond - 1) / time.Millisecond)
		}
		// The sender writes head, then reads waiting; the receiver writes
		// waiting, then reads head: one of them sees the other's write,
		// so a batch published now is never slept through.
		r.waiting.Store(1)
		c, err := r.Poll()
		if c != nil || err != nil {
			r.waiting.Store(0)
			r.Stats.Spun++
			return c, err
		}
		_, perr := unix.Poll(r.pfd[:r.npfd], wait)
		r.waiting.Store(0)
		unix.Read(r.event, r.buf[:]) // reset the counter; EAGAIN when it was not set
		if perr != nil && perr != unix.EINTR {
			return nil, perr
		}
		if c, err := r.Poll(); c != nil || err != nil {
			r.Stats.Slept++
			r.adapt(start)
			return c, err
		}
		if r.npfd == 2 && r.pfd[1].Revents != 0 {
			return nil, ErrPeerGone
		}
	}
}

func (r *Receiver) waited(start time.Time) { r.Stats.Waited += uint64(time.Since(start)) }

// adapt sets the next spin from this wait, which started at start: about
// twice as long when the cell came within MaxSpin (under load, spinning is
// cheaper than sleeping), MinSpin when it took longer (idle: sleep at once).
func (r *Receiver) adapt(start time.Time) {
	if w := time.Since(start); w <= MaxSpin {
		r.spin = min(max(2*w, MinSpin), MaxSpin)
	} else {
		r.spin = MinSpin
	}
}

// Close unmaps the ring here; the sender's cells stay its own.
func (r *Receiver) Close() error {
	r.close()
	return nil
}
