package monitor

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The flow table, its index and the summaries are tens of MB that every
// packet reads at random: on 4 KB pages most of its reads miss the TLB as
// well as the cache, and the page walk costs more than the line. They are
// allocated on transparent huge pages (2 MB) where the kernel gives them
// (MADV_HUGEPAGE: also where THP is set to madvise, as on Debian), outside
// the Go heap: they hold no pointers. The sharp edge: the memory goes back
// when the monitor is unreachable and a collection has run, which the
// memory outside the heap does not hasten.

const hugePage = 2 << 20

// hugeSlice returns a zeroed slice of n T on huge pages when it is at least
// one huge page long, else from the Go heap; it is unmapped when owner
// becomes unreachable. T must hold no pointer.
func hugeSlice[T any](owner *Monitor, n int) []T {
	var zero T
	size := n * int(unsafe.Sizeof(zero))
	if size < hugePage || n == 0 {
		return make([]T, n)
	}
	mem, err := unix.Mmap(-1, 0, size+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return make([]T, n)
	}
	// A huge page is 2 MB aligned.
	off := (hugePage - int(uintptr(unsafe.Pointer(&mem[0]))%hugePage)) % hugePage
	_ = unix.Madvise(mem[off:off+size], unix.MADV_HUGEPAGE)
	runtime.AddCleanup(owner, func(m []byte) { unix.Munmap(m) }, mem)
	return unsafe.Slice((*T)(unsafe.Pointer(&mem[off])), n)
}
