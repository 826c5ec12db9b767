// Package shared is packet memory that another process can map
// read-only: a PBuf's slots in a memfd (Alloc). Each such memory is
// registered, so that the
// bridge across a process boundary (bridges/shm) finds, from a batch's
// PBuf, the memory its packets lie in (Find) and hands the other process a
// descriptor of it once, instead of copying the packets of every batch:
// zero-copy rather than copy-once (FFPF §3.1, DESIGN.md §14).
//
// A memfd of Alloc is sealed: only this process's own mapping can write it
// and nobody can resize it, so a process that maps it can neither change
// the packets nor make this one fault by cutting the memory short.
package shared

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Memory is packet memory registered for other processes to map: its
// mapping here and a read-only descriptor of what it maps.
type Memory struct {
	id   uint64
	mem  []byte
	fd   int   // read-only
	off  int64 // where mem starts in what fd refers to
	once sync.Once
}

// registry is the memory registered, sorted by address; Find reads a
// snapshot without a lock.
var registry struct {
	mu   sync.Mutex
	list atomic.Pointer[[]*Memory]
	next uint64
}

func base(m []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(m))) }

func register(m *Memory) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	registry.next++
	m.id = registry.next
	var list []*Memory
	if old := registry.list.Load(); old != nil {
		list = slices.Clone(*old)
	}
	i, _ := slices.BinarySearchFunc(list, base(m.mem), func(x *Memory, a uintptr) int {
		return cmpAddr(base(x.mem), a)
	})
	list = slices.Insert(list, i, m)
	registry.list.Store(&list)
}

func cmpAddr(a, b uintptr) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Alloc returns size bytes of shared memory, zeroed: a memfd named name,
// mapped writable here and sealed, so that no other mapping of it can
// write it and nobody can shrink or grow it.
func Alloc(name string, size int) (*Memory, error) {
	if size <= 0 {
		return nil, fmt.Errorf("shared: %d bytes", size)
	}
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("shared: memfd_create: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return nil, fmt.Errorf("shared: sizing a memfd of %d bytes: %w", size, err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
		return nil, fmt.Errorf("shared: sealing a memfd: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shared: mapping %d bytes: %w", size, err)
	}
	// From now on nobody maps it writable, whatever descriptor of it they
	// hold; the one others get is read-only besides.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_FUTURE_WRITE); err != nil {
		unix.Munmap(mem)
		return nil, fmt.Errorf("shared: sealing a memfd: %w", err)
	}
	ro, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", fd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Munmap(mem)
		return nil, fmt.Errorf("shared: a read-only descriptor of a memfd: %w", err)
	}
	m := &Memory{mem: mem, fd: ro}
	register(m)
	return m, nil
}

// Find returns the registered memory that p's first byte lies in, and
// where in it; nil when none holds it.
func Find(p []byte) (*Memory, int) {
	list := registry.list.Load()
	if list == nil || len(p) == 0 {
		return nil, 0
	}
	a := base(p)
	l := *list
	// The last memory that starts at or before a.
	i, found := slices.BinarySearchFunc(l, a, func(x *Memory, a uintptr) int { return cmpAddr(base(x.mem), a) })
	if !found {
		i--
	}
	if i < 0 {
		return nil, 0
	}
	m := l[i]
	if d := a - base(m.mem); d < uintptr(len(m.mem)) {
		return m, int(d)
	}
	return nil, 0
}

// ID identifies the memory among all registered in this process, ever.
func (m *Memory) ID() uint64 { return m.id }

// Bytes returns the memory as this process maps it.
func (m *Memory) Bytes() []byte { return m.mem }

// File returns a read-only descriptor of the memory (the memory's: do not
// close it) and the offset the memory starts at in it, for another process
// to map len(Bytes()) bytes from.
func (m *Memory) File() (fd int, off int64) { return m.fd, m.off }

// Close takes the memory out of the registry, closes its descriptor and
// unmaps it. Processes that mapped it keep their mappings.
func (m *Memory) Close() error {
	m.once.Do(func() {
		registry.mu.Lock()
		if old := registry.list.Load(); old != nil {
			list := slices.DeleteFunc(slices.Clone(*old), func(x *Memory) bool { return x == m })
			registry.list.Store(&list)
		}
		registry.mu.Unlock()
		unix.Close(m.fd)
		unix.Munmap(m.mem)
	})
	return nil
}
