package flowgraph

import (
	"context"
	"testing"
	"time"

	"github.com/ffpf-go/ffpf/bridges/inproc"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/user"
)

// ringChild is a board whose way up behaves as the ring-buffer reader of
// an eBPF flowspace (bridges/ringbuf) does: from Activate on it sends
// messages up through its bridge, waiting for the flowspace above to free
// them whatever the run's context says, and Stop waits until it has sent
// them all. signal runs as soon as it is active: the run is cancelled
// between its Activate and its parent's (^C at that moment of ffpf run).
type ringChild struct {
	*user.Flowspace
	signal func()
	up     *inproc.Bridge
	done   chan struct{}
}

// SetWant keeps the bridge up for the reader; the Go flowspace inside
// sends through one nobody reads (its traffic is a single packet).
func (c *ringChild) SetWant(want []*flowspaces.Node, b *inproc.Bridge, parentStores bool) {
	if b != nil {
		c.up = b
	}
	c.Flowspace.SetWant(want, inproc.New("unread"), parentStores)
}

func (c *ringChild) Activate(ctx context.Context) error {
	if err := c.Flowspace.Activate(ctx); err != nil {
		return err
	}
	b, pool, done := c.up, inproc.NewPool(64), make(chan struct{})
	c.done = done
	go func() {
		defer close(done)
		defer b.Close()
		for range 4 * inproc.Depth {
			m, _ := b.Message(context.Background())
			m.Region, _ = pool.Take(context.Background())
			m.Stream = &flowspaces.Node{} // no route: the reader only frees it
			b.Send(context.Background(), m)
		}
	}()
	c.signal()
	return nil
}

func (c *ringChild) Stop() {
	c.Flowspace.Stop()
	if c.done != nil {
		<-c.done
	}
}

func (c *ringChild) Close() error {
	c.Stop()
	return c.Flowspace.Close()
}

// TestCancelDuringActivate: a run cancelled while its flowspaces are being
// activated, after one beneath started sending up but before the one
// above started reading, must still end: Wait and Close return, because
// the flowspace above reads (and drains) what comes up.
func TestCancelDuringActivate(t *testing.T) {
	reg := lifecycleRegistry(t)
	ctx, cancel := context.WithCancel(context.Background())
	root := user.New(user.Options{Name: "user"})
	nic := &ringChild{Flowspace: user.New(user.Options{Name: "nic0", Kind: flowspaces.KindTest, Classes: []string{"even"},
		Interfaces: map[string]*user.Traffic{"eth0": traffic(t, reg, "src", 1)}}), signal: cancel}
	if _, err := flowspaces.Attach(root, nic, "test", flowspaces.CopyOnce); err != nil {
		t.Fatal(err)
	}
	rt := New(Config{Registry: reg, Hierarchy: root})
	if _, err := rt.Populate(`(cap,if=eth0) > (even) > (closecheck)`, RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	if st := stateByID(rt); st["even#1"].Flowspace != "nic0" || st["closecheck#1"].Flowspace != "user" {
		t.Fatalf("placed even in %s, closecheck in %s", st["even#1"].Flowspace, st["closecheck#1"].Flowspace)
	}
	if err := rt.Activate(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		rt.Wait()
		done <- rt.Close()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Wait or Close hangs: nothing reads the bridge of a flowspace that was active when the run was cancelled")
	}
}
