package pcap

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ffpf-go/ffpf/buffers"
)

func TestAdvReadaheadStallsWhenCopying(t *testing.T) {
	b := smallFile(false, 48<<20)
	path := filepath.Join(t.TempDir(), "s.pcap")
	os.WriteFile(path, b, 0o644)
	r, _ := OpenAccess(path, AccessMap)
	s := NewSource(r)
	defer s.Close()
	own := buffers.NewPBuf(buffers.MaxBatch, MaxRecordLen)
	bt := buffers.NewBatch(own, 0, buffers.MaxBatch, 0)
	for {
		bt.Reset()
		if s.Fill(bt) != nil {
			break
		}
	}
	// It ends on its own once the reader is at the end: wait for that (a
	// readahead that polls on never ends).
	select {
	case <-s.ahead.done:
	case <-time.After(30 * time.Second):
		t.Errorf("file read to the end, readahead still polling after 30 s; it was told the reader is at %d", s.ahead.reader.Load())
	}
}
