package shared

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// TestAllocIsFoundAndReadOnlyElsewhere: memory of Alloc is found from any
// slice within it (with the offset), heap memory is not; its descriptor
// maps the same bytes read-only and refuses a writable mapping, even
// reopened for writing; after Close it is not found.
func TestAllocIsFoundAndReadOnlyElsewhere(t *testing.T) {
	a, err := Alloc("test-a", 3*4096)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Alloc("test-b", 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, tc := range []struct {
		m   *Memory
		off int
	}{{a, 0}, {a, 5000}, {a, 3*4096 - 1}, {b, 0}, {b, 17}} {
		m, off := Find(tc.m.Bytes()[tc.off:])
		if m != tc.m || off != tc.off {
			t.Errorf("Find at %d of memory %d: memory %v, offset %d", tc.off, tc.m.ID(), m, off)
		}
	}
	if m, _ := Find(make([]byte, 64)); m != nil {
		t.Errorf("heap memory found in memory %d", m.ID())
	}
	if m, _ := Find(nil); m != nil {
		t.Error("an empty slice was found")
	}

	fd, off := a.File()
	if _, err := unix.Mmap(fd, off, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err == nil {
		t.Error("the descriptor others get maps the memory writable")
	}
	ro, err := unix.Mmap(fd, off, 3*4096, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(ro)
	a.Bytes()[5000] = 0xab
	if ro[5000] != 0xab {
		t.Errorf("the other mapping reads %#x, not what was written", ro[5000])
	}
	// Sealed: even a descriptor opened for writing maps it read-only only,
	// and cannot cut it short.
	rw, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", fd), unix.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(rw)
	if _, err := unix.Mmap(rw, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != unix.EPERM {
		t.Errorf("a writable mapping through a writable descriptor: %v, want EPERM", err)
	}
	if err := unix.Ftruncate(rw, 4096); err != unix.EPERM {
		t.Errorf("cutting the memory short: %v, want EPERM", err)
	}

	mem := a.Bytes()
	a.Close()
	if m, _ := Find(mem[1:]); m != nil {
		t.Error("closed memory was found")
	}
	if m, off := Find(b.Bytes()[9:]); m != b || off != 9 {
		t.Errorf("after closing another, Find: %v, %d", m, off)
	}
}
