package user

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/buffers/shared"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
)

// loopSource replays n packets of a fixed set forever (n < 0) or n times.
type loopSource struct {
	pkts [][]byte
	i, n int
}

func (s *loopSource) Info() functions.SourceInfo {
	return functions.SourceInfo{LinkType: functions.LinkEthernet, MaxCapLen: 128}
}

func (s *loopSource) Fill(b *buffers.Batch) error {
	for b.Room() > 0 {
		if s.n >= 0 && s.i >= s.n {
			return io.EOF
		}
		p := s.pkts[s.i%len(s.pkts)]
		b.Append(p, uint32(len(p)), 0)
		s.i++
	}
	return nil
}
func (s *loopSource) Close() error { return nil }

type dropOdd struct{}

func (dropOdd) Process(b *buffers.Batch) {
	n := 0
	for _, e := range b.E[:b.N] {
		if b.PBuf.Data(e.Slot)[0]%2 == 0 {
			b.E[n] = e
			n++
		}
	}
	b.N = n
}

type sum struct{ m *buffers.MBuf }

func (s sum) Process(b *buffers.Batch) { s.m.Add64(0, uint64(b.N)) }
func (s sum) MBuf() *buffers.MBuf      { return s.m }

func graph(src functions.Source) []*flowspaces.Node {
	cls := func(name string, f functions.Function) *functions.Class {
		return &functions.Class{Name: name, MinInputs: 1, MaxInputs: -1,
			New: func(*functions.Context) (functions.Function, error) { return f, nil }}
	}
	s := &flowspaces.Node{ID: "src", Class: &functions.Class{Name: "src",
		NewSource: func(*functions.Context) (functions.Source, error) { return src, nil }}}
	f := &flowspaces.Node{ID: "filter", Class: cls("filter", dropOdd{}), Inputs: []*flowspaces.Node{s}}
	mk := func() sum {
		return sum{buffers.NewMBuf(8, buffers.Native, buffers.Field{Name: "n", Type: buffers.U64})}
	}
	a := &flowspaces.Node{ID: "a", Class: cls("a", mk()), Inputs: []*flowspaces.Node{f}}
	b := &flowspaces.Node{ID: "b", Class: cls("b", mk()), Inputs: []*flowspaces.Node{f}}
	j := &flowspaces.Node{ID: "j", Class: cls("j", mk()), Inputs: []*flowspaces.Node{a, b}}
	return []*flowspaces.Node{j, b, a, f, s} // out of order on purpose
}

func testPackets() [][]byte {
	pkts := make([][]byte, 64)
	for i := range pkts {
		pkts[i] = make([]byte, 60+i)
		pkts[i][0] = byte(i)
	}
	return pkts
}

// setup instantiates nodes (in any order) in fs and connects them.
func setup(t testing.TB, fs *Flowspace, nodes []*flowspaces.Node) {
	t.Helper()
	all := map[*flowspaces.Node]bool{}
	for _, n := range nodes {
		all[n] = true
	}
	order, err := topoSort(nodes, all)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range order {
		n.Flowspace = fs
		if err := fs.Instantiate(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := fs.Connect(); err != nil {
		t.Fatal(err)
	}
}

// sourceWorker returns the only source's worker and a function that
// carries one batch through the flowspace the way the worker does.
func sourceWorker(fs *Flowspace) (*worker, func()) {
	for _, w := range fs.srcs {
		b, r := w.batches[0], w.route.Load()
		return w, func() {
			b.Reset()
			b.Cap = buffers.MaxBatch
			w.src.Fill(b)
			r.vals[0] = b
			r.process(w)
		}
	}
	return nil, nil
}

func TestProcessAllocatesNothing(t *testing.T) {
	fs := New(Options{})
	nodes := graph(&loopSource{pkts: testPackets(), n: -1})
	setup(t, fs, nodes)
	_, step := sourceWorker(fs)
	allocs := testing.AllocsPerRun(200, step)
	if allocs != 0 {
		t.Errorf("datapath allocates %v per batch", allocs)
	}
}

// TestRunCountsAndLimit: counting at the ends of the graph (ffpf run -c),
// the run ends once exactly 1,000 packets reached j, the end, and the
// source read none past the 1,000th (the filter keeps every other packet:
// it saw 1,999); counting at capture (--capture-count), the source read
// 1,000 and j saw the 500 the filter kept. The join of a and b (both fed
// the same packets) sees each once.
func TestRunCountsAndLimit(t *testing.T) {
	for _, c := range []struct {
		counting          flowspaces.Counting
		read, kept, ended uint64
	}{{flowspaces.AtEnds, 1999, 1000, 1000}, {flowspaces.AtCapture, 1000, 500, 500}} {
		budget := flowspaces.NewBudget(1000, c.counting)
		fs := New(Options{Budget: budget})
		nodes := graph(&loopSource{pkts: testPackets(), n: -1})
		setup(t, fs, nodes)
		fs.Activate(context.Background())
		if err := fs.Wait(); err != nil {
			t.Fatal(err)
		}
		fs.Close()
		byID := map[string]*flowspaces.Node{}
		for _, n := range nodes {
			byID[n.ID] = n
		}
		in, out, filt, _ := byID["filter"].Counters.Snapshot()
		if src := byID["src"].Counters.Out.Load(); src != c.read || in != c.read || out != c.kept || filt != c.read-c.kept {
			t.Errorf("counting %d: the source read %d, the filter's counters %d %d %d; want %d read, %d kept",
				c.counting, src, in, out, filt, c.read, c.kept)
		}
		if got := byID["j"].State()["n"]; got != c.ended {
			t.Errorf("counting %d: the join saw %v packets, want %d", c.counting, got, c.ended)
		}
		if !budget.Spent() || budget.Counted() != 1000 {
			t.Errorf("counting %d: the budget counted %d (spent: %v)", c.counting, budget.Counted(), budget.Spent())
		}
	}
}

// BenchmarkGraph measures the datapath of src > filter > [a|b] > j over
// packets in memory, run to completion per batch.
func BenchmarkGraph(b *testing.B) {
	fs := New(Options{})
	src := &loopSource{pkts: testPackets(), n: -1}
	setup(b, fs, graph(src))
	_, step := sourceWorker(fs)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		step()
	}
	b.ReportMetric(float64(b.N*buffers.MaxBatch)/b.Elapsed().Seconds()/1e6, "Mpps")
}

// viewSource refers to packets in memory it owns, as a mapped file does.
type viewSource struct {
	pbuf *buffers.PBuf
	done bool
}

func (s *viewSource) Info() functions.SourceInfo {
	return functions.SourceInfo{LinkType: functions.LinkEthernet, MaxCapLen: 128}
}
func (s *viewSource) PBuf() *buffers.PBuf { return s.pbuf }
func (s *viewSource) Close() error        { return nil }
func (s *viewSource) Fill(b *buffers.Batch) error {
	if s.done {
		return io.EOF
	}
	s.done = true
	b.Base = 0
	b.AppendRef(8192, 64, 64, 0)
	return nil
}

// namedView is a viewSource that names its input.
type namedView struct{ viewSource }

func (s *namedView) Info() functions.SourceInfo {
	return functions.SourceInfo{Name: "trace.pcap", LinkType: functions.LinkEthernet, MaxCapLen: 128}
}

// faultView is a viewSource that says what vanished, as pcap's does.
type faultView struct{ viewSource }

func (s *faultView) FaultError() error { return errors.New("trace.pcap shrank while being read") }

// A source's memory vanishes under the functions (a mapped file cut by
// another program): the run ends with an error naming the input, not a
// crash, and the batch that faulted is accounted for in every function it
// reached or would have reached: in = out + filtered + dropped, and each
// function received what its input passed on.
func TestVanishedMemoryIsAnErrorNotACrash(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "trace")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(1 << 16); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, 1<<16, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	f.Truncate(0) // another process cuts the file: its pages are gone

	for _, c := range []struct {
		src  functions.Source
		want string
	}{
		{&namedView{viewSource{pbuf: buffers.NewPBufView(mem, 4)}}, "src: the memory of trace.pcap became unreadable while its packets were processed"},
		{&faultView{viewSource{pbuf: buffers.NewPBufView(mem, 4)}}, "src: trace.pcap shrank while being read"},
	} {
		nodes := graph(c.src)
		fs := New(Options{})
		setup(t, fs, nodes)
		fs.Activate(context.Background())
		err = fs.Wait()
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "nil pointer") {
			t.Errorf("err = %v, want %q", err, c.want)
		}
		for _, n := range nodes {
			in, out, filtered, dropped := n.Counters.Snapshot()
			if in != out+filtered+dropped {
				t.Errorf("%s: in %d != out %d + filtered %d + dropped %d", n.ID, in, out, filtered, dropped)
			}
			if len(n.Inputs) == 1 {
				if _, up, _, _ := n.Inputs[0].Counters.Snapshot(); up != in {
					t.Errorf("%s received %d packets, but %s passed on %d", n.ID, in, n.Inputs[0].ID, up)
				}
			}
			if n.ID == "src" && out != 1 || n.ID == "filter" && dropped != 1 {
				t.Errorf("%s: in %d out %d filtered %d dropped %d", n.ID, in, out, filtered, dropped)
			}
		}
		fs.Close()
	}
}

// tricklingSource delivers one packet per Fill, slowly, like a quiet link.
// It waits, as a quiet link would, until the two workers read: its first
// Fill until both claim from the budget, its second until the other source
// delivered a packet too; a goroutine that the machine starts late then
// cannot find the limit spent by the other source already.
type tricklingSource struct {
	loopSource
	budget *flowspaces.Budget
	other  *tricklingSource
	got    atomic.Int64
}

func (s *tricklingSource) Fill(b *buffers.Batch) error {
	switch s.i {
	case 0:
		waitTest(func() bool { return s.budget.Sources() == 2 })
	case 1:
		waitTest(func() bool { return s.other.got.Load() > 0 })
	}
	time.Sleep(100 * time.Microsecond)
	p := s.pkts[0]
	b.Append(p, uint32(len(p)), 0)
	s.i++
	s.got.Add(1)
	return nil
}

// waitTest waits until cond holds, or gives up after 30 s (the test then
// fails on what it checks).
func waitTest(cond func() bool) {
	for deadline := time.Now().Add(30 * time.Second); !cond() && time.Now().Before(deadline); {
		time.Sleep(50 * time.Microsecond)
	}
}

// TestLimitIsSharedBySlowSources: a source that finds the limit reserved by
// another one's running Fill must wait for the unused part, not give up.
func TestLimitIsSharedBySlowSources(t *testing.T) {
	for i := range 4 {
		budget := flowspaces.NewBudget(40, flowspaces.Counting(i%2)) // the sources are the ends
		a := &tricklingSource{loopSource: loopSource{pkts: testPackets()}, budget: budget}
		b := &tricklingSource{loopSource: loopSource{pkts: testPackets()}, budget: budget, other: a}
		a.other = b
		mk := func(id string, s functions.Source) *flowspaces.Node {
			return &flowspaces.Node{ID: id, Class: &functions.Class{Name: "src",
				NewSource: func(*functions.Context) (functions.Source, error) { return s, nil }}}
		}
		fs := New(Options{Budget: budget})
		setup(t, fs, []*flowspaces.Node{mk("a", a), mk("b", b)})
		fs.Activate(context.Background())
		fs.Wait()
		fs.Close()
		if a.i+b.i != 40 || a.i == 0 || b.i == 0 {
			t.Fatalf("sources read %d and %d packets of a limit of 40", a.i, b.i)
		}
	}
}

// blockingSource blocks in Fill until interrupted, like a silent pipe.
type blockingSource struct {
	loopSource
	stop chan struct{}
	once sync.Once
}

func (s *blockingSource) Fill(*buffers.Batch) error { <-s.stop; return io.EOF }
func (s *blockingSource) Interrupt()                { s.once.Do(func() { close(s.stop) }) }

func TestCancelInterruptsABlockedSource(t *testing.T) {
	src := &blockingSource{stop: make(chan struct{})}
	fs := New(Options{})
	setup(t, fs, []*flowspaces.Node{{ID: "pipe", Class: &functions.Class{Name: "src",
		NewSource: func(*functions.Context) (functions.Source, error) { return src, nil }}}})
	ctx, cancel := context.WithCancel(context.Background())
	fs.Activate(ctx)
	time.AfterFunc(20*time.Millisecond, cancel)
	done := make(chan error)
	go func() { done <- fs.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled run waits forever on a blocked source")
	}
	fs.Close()
}

// remote stands for a function that reads its packets in another process
// (a plugin's): in place when they lie in shared memory, if inPlace.
type remote struct {
	dropOdd
	inPlace bool
}

func (r remote) ReadsShared() bool { return r.inPlace }

// sharingSource is a source that owns its memory (as a capture file read
// into a ring does) and takes it from the flowspace's shared memory when
// asked to.
type sharingSource struct {
	viewSource
	asked bool
}

func (s *sharingSource) Share(alloc func(int) []byte) bool {
	s.asked = true
	if mem := alloc(len(s.pbuf.Memory())); mem != nil {
		copy(mem, s.pbuf.Memory())
		s.pbuf = buffers.NewPBufView(mem, s.pbuf.Slots())
		return true
	}
	return false
}

// TestSharedMemoryOnlyForOtherProcesses: a source's PBuf (the
// flowspace's, or the source's own, Sharer) is in shared memory, which
// another process can map, when a function it reaches reads its packets in
// another process in place (functions.SharedReader), on the heap when
// none does (no function of the kind, or one that copies), and the
// datapath allocates nothing either way; the shared memory goes when the
// flowspace closes.
func TestSharedMemoryOnlyForOtherProcesses(t *testing.T) {
	for _, c := range []struct {
		name    string
		fn      functions.Function // what the source feeds, beside the graph's filter
		sharing bool               // the source owns its memory (a Sharer)
		shared  bool
	}{
		{"no plugin", dropOdd{}, false, false},
		{"no plugin/own memory", dropOdd{}, true, false},
		{"copying plugin", remote{}, false, false},
		{"plugin", remote{inPlace: true}, false, true},
		{"plugin/own memory", remote{inPlace: true}, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var src functions.Source = &loopSource{pkts: testPackets(), n: -1}
			var own *sharingSource
			if c.sharing {
				own = &sharingSource{viewSource: viewSource{pbuf: buffers.NewPBuf(buffers.MaxBatch, 128)}}
				src = own
			}
			nodes := graph(src)
			s := nodes[len(nodes)-1]
			nodes = append(nodes, &flowspaces.Node{ID: "r", Inputs: []*flowspaces.Node{s}, Class: &functions.Class{Name: "r", MinInputs: 1, MaxInputs: 1,
				New: func(*functions.Context) (functions.Function, error) { return c.fn, nil }}})
			fs := New(Options{})
			setup(t, fs, nodes)
			w, step := sourceWorker(fs)
			mem := w.batches[0].PBuf.Memory()
			if m, _ := shared.Find(mem); (m != nil) != c.shared {
				t.Errorf("the source's PBuf is in shared memory: %v, want %v", m != nil, c.shared)
			}
			if own != nil && own.asked != c.shared {
				t.Errorf("the source was asked to share its memory: %v, want %v", own.asked, c.shared)
			}
			if !c.sharing {
				if allocs := testing.AllocsPerRun(50, step); allocs != 0 {
					t.Errorf("datapath allocates %v per batch", allocs)
				}
			}
			fs.Close()
			if m, _ := shared.Find(mem); m != nil {
				t.Error("the shared memory outlives the flowspace")
			}
		})
	}
}
