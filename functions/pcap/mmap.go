package pcap

import (
	"errors"
	"math"
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps a regular file read-only so that its records can be handed
// to the functions where they lie, without a copy (zero-copy PBuf view). A
// file that cannot be mapped (a pipe, an empty file, too big for the address
// space) is read through a buffer instead.
func mapFile(f *os.File, size int64) ([]byte, error) {
	if size <= 0 || size > math.MaxInt/2 {
		return nil, errors.New("not mappable")
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	// One sequential pass: read ahead aggressively, drop pages behind.
	_ = unix.Madvise(mem, unix.MADV_SEQUENTIAL)
	return mem, nil
}

func unmap(mem []byte) error { return unix.Munmap(mem) }
