package pcap

import "runtime/debug"

// indexer runs the index on its own goroutine, a few windows ahead of Fill:
// on a machine with a core to spare, parsing record headers (and taking the
// mapping's page faults) overlaps with the functions' work on the previous
// window, the way FFPF overlaps flowspaces across a bridge. Windows go round
// between free and full; Fill gives each back once it has appended its
// records (a batch refers to the mapping, never to a window).
type indexer struct {
	x          *index
	ahead      *readahead // maps pages in ahead of the index (may be nil)
	full, free chan *window
	stop, done chan struct{}
	at         int // the boundary the goroutine works from
}

type window struct {
	recs  []indexRec
	next  int  // the next record to deliver
	to    int  // the record boundary after its records
	fault bool // the mapping could not be read at to: the file shrank
}

// warm brings the first two cache lines of every packet of the window into
// this core's cache, where the functions will read the headers. The
// addresses are all known, so the loads overlap (the index ran on another
// core, whose cache may be of no help here). Fill runs it where a fault in
// a shrunk mapping becomes an error.
func (w *window) warm(mem []byte) byte {
	var s byte
	for _, r := range w.recs {
		if r.incl > 0 {
			s += mem[r.off]
			if r.incl > 48 {
				s += mem[r.off+48]
			}
		}
	}
	return s
}

const windowsAhead = 3

func newIndexer(x *index, ahead *readahead) *indexer {
	ix := &indexer{x: x, ahead: ahead, full: make(chan *window, windowsAhead), free: make(chan *window, windowsAhead)}
	for range windowsAhead {
		ix.free <- &window{recs: make([]indexRec, 0, windowRecs)}
	}
	return ix
}

// start runs the goroutine from the record boundary from. It ends after
// sending a window without records: the index stopped at a record it could
// not take, and the Reader must take over at w.to.
func (ix *indexer) start(from int) {
	ix.stop, ix.done, ix.at = make(chan struct{}), make(chan struct{}), from
	go ix.run()
}

func (ix *indexer) run() {
	defer close(ix.done)
	var w *window // held here: in neither free nor full
	// If the mapping shrinks under us (the file was cut while mapped), say
	// so in the window we hold; Fill turns it into the source's error.
	debug.SetPanicOnFault(true)
	defer func() {
		if r := recover(); r != nil {
			if _, fault := r.(interface{ Addr() uintptr }); !fault || w == nil {
				panic(r)
			}
			w.recs, w.next, w.to, w.fault = w.recs[:0], 0, ix.at, true
			ix.full <- w // room: full holds the other windows at most
		}
	}()
	for {
		select {
		case w = <-ix.free:
		case <-ix.stop:
			return
		}
		w.recs, w.to = ix.x.window(ix.at, w.recs[:0])
		w.next, w.fault = 0, false
		ix.full <- w // room: there are only windowsAhead windows
		if len(w.recs) == 0 {
			return
		}
		ix.at = w.to
		w = nil
		ix.ahead.advance(int64(ix.at))
	}
}

// halt stops the goroutine (if it runs) and waits for it.
func (ix *indexer) halt() {
	if ix.stop == nil {
		return
	}
	select {
	case <-ix.stop:
	default:
		close(ix.stop)
	}
	<-ix.done
}
