package pcap

import (
	"runtime"

	"golang.org/x/sys/unix"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// readahead streams through a mapped file ahead of the reader on another
// core, touching one byte per cache line, so that the reader's loads hit the
// shared last-level cache instead of memory. Without it, parsing a mapped
// file is a chain of dependent cache misses (each record's length says where
// the next one starts), which no hardware prefetcher can follow.
type readahead struct {
	mem    []byte
	stride int          // 64: pull lines into the cache; 4096: only fault pages in
	reader atomic.Int64 // where the reader is
	stop   atomic.Bool
	done   chan struct{}
	sink   byte
}

const (
	aheadWindow = 4 << 20  // how far ahead to stay: well inside a shared L3
	mapAhead    = 32 << 20 // how far ahead to map pages in
	cacheLine   = 64
	pageSize    = 4096
)

// startReadahead starts the streamer when there is a core to spare. With
// a stride of a cache line it streams the data into the shared cache (for a
// reader that follows the records one by one); with a stride of a page it
// only takes the page faults of the mapping off the reader's core (for the
// index, which overlaps its own cache misses).
func startReadahead(mem []byte, stride int) *readahead {
	if runtime.GOMAXPROCS(0) < 2 || len(mem) < 2*aheadWindow {
		return nil
	}
	ra := &readahead{mem: mem, stride: stride, done: make(chan struct{})}
	go ra.run()
	return ra
}

func (ra *readahead) run() {
	defer close(ra.done)
	// The mapping can shrink under us (another program truncates the
	// file): then stop quietly; the reader reports the error.
	debug.SetPanicOnFault(true)
	defer func() {
		if r := recover(); r != nil {
			if _, fault := r.(interface{ Addr() uintptr }); !fault {
				panic(r)
			}
		}
	}()
	var s byte
	pos := 0
	for pos < len(ra.mem) && !ra.stop.Load() {
		ahead := aheadWindow
		if ra.stride == pageSize {
			ahead = mapAhead
		}
		limit := min(int(ra.reader.Load())+ahead, len(ra.mem))
		if pos >= limit {
			time.Sleep(20 * time.Microsecond) // far enough ahead
			continue
		}
		if pos < int(ra.reader.Load()) {
			pos = int(ra.reader.Load()) // fell behind: skip to the reader
		}
		end := min(pos+256<<10, limit)
		if ra.stride == pageSize {
			// Map the pages in bulk (Linux ≥ 5.14), cheaper than a fault per
			// 64 KB; on an older kernel, fault them in one by one. madvise
			// wants a page-aligned start (the mapping's start is one).
			pos &^= pageSize - 1
			if unix.Madvise(ra.mem[pos:end], unix.MADV_POPULATE_READ) == nil {
				pos = end
				continue
			}
		}
		for ; pos < end; pos += ra.stride {
			s += ra.mem[pos]
		}
	}
	ra.sink = s // keep the loads
}

// advance tells the streamer where the reader is.
func (ra *readahead) advance(off int64) {
	if ra != nil {
		ra.reader.Store(off)
	}
}

// close stops the streamer and waits for it, before the mapping goes.
func (ra *readahead) close() {
	if ra != nil {
		ra.stop.Store(true)
		<-ra.done
	}
}
