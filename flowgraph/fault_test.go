package flowgraph

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
)

// vanishingSource refers, zero-copy, to packets in a mapping whose file
// was cut: reading them faults.
type vanishingSource struct {
	pbuf *buffers.PBuf
	n    int
}

func (s *vanishingSource) Info() functions.SourceInfo {
	return functions.SourceInfo{LinkType: functions.LinkEthernet, MaxCapLen: 128}
}
func (s *vanishingSource) PBuf() *buffers.PBuf { return s.pbuf }
func (s *vanishingSource) Close() error        { return nil }
func (s *vanishingSource) Fill(b *buffers.Batch) error {
	if s.n == 3 {
		return io.EOF
	}
	s.n++
	b.Base = 0
	for b.Room() > 0 {
		b.AppendRef(8192, 64, 64, 0)
	}
	return nil
}

// TestFaultInABridgeReaderIsReported: a flowspace that works in place
// reads packets of the one beneath where they lie; when that memory
// vanishes, the run ends with the error (not a crash, not a hang), and the
// bridge still accounts for every packet.
func TestFaultInABridgeReaderIsReported(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "trace")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Truncate(1 << 16)
	mem, err := unix.Mmap(int(f.Fd()), 0, 1<<16, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	f.Truncate(0)

	reg := placeRegistry(t)
	reg.Register(&functions.Class{Name: "vanishing", Params: []functions.Param{{Name: "n", Type: functions.Int}}, NewSource: func(*functions.Context) (functions.Source, error) {
		return &vanishingSource{pbuf: buffers.NewPBufView(mem, buffers.MaxBatch)}, nil
	}})
	def := fsDef{name: "user", kids: []fsDef{
		{name: "kernel", classes: []string{"even", "count"}, inPlace: true, kids: []fsDef{
			{name: "board", classes: []string{}, ifaces: []string{"eth0"}, strategy: flowspaces.ZeroCopy},
		}},
	}}
	rt := New(Config{Registry: reg, Hierarchy: treeWith(t, reg, def, "vanishing", 0)})
	if _, err := rt.Populate(`(cap,if=eth0) > (even) > (count)`, RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	rt.Activate(context.Background())
	done := make(chan error)
	go func() { done <- rt.Wait() }()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a fault in a bridge reader hangs the run")
	}
	if err == nil || !strings.Contains(err.Error(), "bridge board>kernel: packet memory became unreadable") {
		t.Fatalf("err = %v", err)
	}
	rt.Close()
	for _, b := range rt.Bridges() {
		if b.In != b.Out+b.Dropped || b.In != 3*buffers.MaxBatch {
			t.Errorf("bridge %s>%s: in %d out %d dropped %d", b.From, b.To, b.In, b.Out, b.Dropped)
		}
	}
}
