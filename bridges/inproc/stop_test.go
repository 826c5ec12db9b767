package inproc

import (
	"context"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
)

// TestSendAfterDrainIsCounted: when a run is cancelled, the receiver
// sees the context done, drains what is queued and stops; the producer,
// cancelled by the same context, may still be about to Send. Send with a
// done context and room in the queue must not leave the message in a queue
// nobody reads any more: in = out + dropped must hold once both stopped.
func TestSendAfterDrainIsCounted(t *testing.T) {
	b := New("test")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// The receiver stops: Receive returns nil on the done context, and it
	// drains.
	if m := b.Receive(ctx); m != nil {
		t.Fatal("a message on an empty bridge")
	}
	b.Drain()
	// The producer was between Message and Send when the run stopped.
	p := buffers.NewPBuf(buffers.MaxBatch, 64)
	for range 20 {
		select {
		case m := <-b.free:
			r := NewRegion(p, 0, true)
			r.Hold()
			m.Region, m.Packets = r, 10
			b.Send(ctx, m)
		default:
		}
	}
	s := b.Stats()
	if s.In != s.Out+s.Dropped {
		t.Errorf("after a cancelled run: %+v: %d packets neither delivered nor dropped", s, s.In-s.Out-s.Dropped)
	}
}
