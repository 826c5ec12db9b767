package kernel

import (
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowspaces"
)

// presentRec is a Go half that keeps the present it is told.
type presentRec struct{ now []int64 }

func (p *presentRec) Process(*buffers.Batch) {}
func (p *presentRec) Present(now int64)      { p.now = append(p.now, now) }

// TestLockTellsPresent: before a handler runs on a started Go half, Lock
// tells it the present on the flowspace's packet clock (the clock the
// programs compute epochs on), so that what the handler starts follows
// the present and not the last drained epoch.
func TestLockTellsPresent(t *testing.T) {
	fs := &Flowspace{offset: 1_700_000_000_000_000_000}
	n := &flowspaces.Node{ID: "t"}
	rec := &presentRec{}
	k := &node{Node: n, gofn: rec}
	fs.nodes = append(fs.nodes, k)
	fs.Lock(n)() // not started: nothing to tell
	if len(rec.now) != 0 {
		t.Fatalf("told %v before its clock started", rec.now)
	}
	k.started.Store(true)
	before := fs.now()
	unlock := fs.Lock(n)
	after := fs.now()
	if k.goMu.TryLock() {
		t.Error("Lock does not hold the Go half's lock")
	} else {
		unlock()
	}
	if len(rec.now) != 1 || rec.now[0] < before || rec.now[0] > after {
		t.Errorf("told %v, want one time in [%d, %d]", rec.now, before, after)
	}
}
