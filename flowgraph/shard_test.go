package flowgraph

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/user"
	"github.com/ffpf-go/ffpf/functions"
	_ "github.com/ffpf-go/ffpf/functions/builtin"
	"github.com/ffpf-go/ffpf/functions/gen"
)

// part is a test source: part k of a generated trace cut in parts, each
// packet going to the part a hash of its index picks, in batches of random
// sizes. The parts of a trace, each read by a worker of its own, carry
// the same packets as the whole trace read by one (of=1), each part in
// time order.
func partClass() *functions.Class {
	num := func(name, def string) functions.Param {
		return functions.Param{Name: name, Type: functions.Int, Default: def}
	}
	return &functions.Class{
		Name:   "part",
		Params: []functions.Param{num("k", "0"), num("of", "1"), num("packets", "12000"), num("seed", "1"), num("batches", "1"), num("pause", "0")},
		Validate: func(ctx *functions.Context) error {
			ctx.LinkType = functions.LinkEthernet
			return nil
		},
		NewSource: func(ctx *functions.Context) (functions.Source, error) {
			p := ctx.Params
			k, of := uint64(p.Int("k")), uint64(p.Int("of"))
			return &partSource{g: gen.New(gen.Config{Seed: uint64(p.Int("seed")), Packets: p.Int("packets")}),
				keep: func(i uint64) bool { return mix(i)%of == k }, rnd: uint64(p.Int("batches"))*0x9e3779b97f4a7c15 + k + 1,
				pause: time.Duration(p.Int("pause"))}, nil
		},
	}
}

type partSource struct {
	g      *gen.Generator
	keep   func(i uint64) bool // whether the part has the trace's packet i (from 1)
	i      uint64
	rnd    uint64
	pause  time.Duration
	buf    [gen.MaxFrameLen]byte
	closed bool
}

func mix(x uint64) uint64 { // splitmix64
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

func (s *partSource) Info() functions.SourceInfo {
	return functions.SourceInfo{Name: "part", LinkType: functions.LinkEthernet, MaxCapLen: gen.MaxFrameLen}
}

func (s *partSource) Fill(b *buffers.Batch) error {
	if s.closed {
		return io.EOF
	}
	if s.pause > 0 {
		time.Sleep(s.pause)
	}
	s.rnd = mix(s.rnd)
	want := 1 + int(s.rnd%uint64(b.Room()))
	for b.N < want {
		c, w, ts, ok := s.g.Next(s.buf[:])
		if !ok {
			if b.N == 0 {
				return io.EOF
			}
			return nil
		}
		s.i++
		if s.keep(s.i) {
			b.Append(s.buf[:c], uint32(w), ts)
		}
	}
	return nil
}

func (s *partSource) Close() error { s.closed = true; return nil }

// mergeableTerms are functions of every mergeable class, with and without
// a window (the trace's 12,000 packets last 12 ms at gen's 1 Mpps).
var mergeableTerms = []string{
	"(pktcount)", "(bytecount)",
	"(counter)", "(counter,window=2ms,value=bytes)",
	"(cms,width=512,depth=3)", "(cms,key=dstip,window=2ms,value=bytes)",
	"(hll,precision=10)", "(hll,key=srcip,window=2ms)",
	"(pcsa)", "(pcsa,key=dstport,window=2ms)",
	"(bloom,counting=true,pass=all,bits=4096)", "(bloom,counting=true,pass=all,key=srcip,window=2ms)",
	"(tag,key=5tuple)",
}

// shardedRun runs every mergeable term on the trace cut in `of` parts read
// by as many workers, and returns each function's --json record and the
// bytes of its merged state, by id.
func shardedRun(t *testing.T, reg *functions.Registry, of, batches int) (records map[string]string, mbufs map[string][32]byte) {
	t.Helper()
	var parts []string
	for k := range of {
		parts = append(parts, fmt.Sprintf("(part,k=%d,of=%d,batches=%d)", k, of, batches))
	}
	expr := "[" + strings.Join(parts, "|") + "] > [" + strings.Join(mergeableTerms, "|") + "]"
	rt := runToEnd(t, Config{Registry: reg}, expr)
	defer rt.Close()
	checkInvariants(t, expr, rt)
	records, mbufs = map[string]string{}, map[string][32]byte{}
	for _, f := range rt.snapshotFuncs() {
		n := f.node
		if n.Class.IsSource() {
			continue
		}
		fs := n.Flowspace.(*user.Flowspace)
		k, why, workers := fs.Concurrency(n)
		if k != functions.Mergeable || workers != of {
			t.Fatalf("%s runs %v (%s) on %d workers, want mergeable on %d", f.ID, k, why, workers, of)
		}
		st := f.State()
		st.Params = nil // the same in every run
		js, _ := json.Marshal(st)
		records[f.ID] = string(js)
		fs.Merged(n, func() { mbufs[f.ID] = sha256.Sum256(n.Function.(functions.Stateful).MBuf().Bytes()) })
	}
	return records, mbufs
}

// runToEnd populates expr, runs it to its end and returns the runtime,
// whose state stays readable until it is closed.
func runToEnd(t *testing.T, cfg Config, expr string) *Runtime {
	t.Helper()
	rt := New(cfg)
	if _, err := rt.Populate(expr, RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Activate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	return rt
}

func withClasses(t *testing.T, extra ...*functions.Class) *functions.Registry {
	t.Helper()
	reg := functions.NewRegistry()
	for _, c := range append(functions.Default.All(), extra...) {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

// TestMergeableShardsEqualOneWorker: for every class of kind mergeable,
// a trace spread over 1 to 4 workers in random batches leaves the same
// merged state (every byte of the MBuf) and the same --json record as the
// trace read whole by one worker, windows included: the last window closes
// on every shard at the time the streams ended, whatever each part's last
// packet.
func TestMergeableShardsEqualOneWorker(t *testing.T) {
	reg := withClasses(t, partClass())
	covered := map[string]bool{}
	for _, term := range mergeableTerms {
		covered[strings.Trim(strings.SplitN(term, ",", 2)[0], "()")] = true
	}
	for _, c := range reg.All() {
		if c.Concurrency == functions.Mergeable && !covered[c.Name] {
			t.Errorf("class %s is mergeable but not among the terms this test runs", c.Name)
		}
	}
	wantRec, wantMBuf := shardedRun(t, reg, 1, 1)
	for of := 2; of <= 4; of++ {
		rec, mb := shardedRun(t, reg, of, 10*of)
		for id, want := range wantRec {
			if rec[id] != want {
				t.Errorf("%d workers: %s\n got %s\nwant %s", of, id, rec[id], want)
			}
			if mb[id] != wantMBuf[id] {
				t.Errorf("%d workers: the merged state of %s differs from one worker's", of, id)
			}
		}
	}
}

// TestShardedWindowLastOnEveryShard: a part whose packets end windows
// before the others' still has its shard closed at the time the streams
// ended: the merged last window holds only the packets of that window, as
// one worker's does. Part 1 holds the first half of the trace, part 0 the
// rest (each a half of gen's trace of seed 3); without bringing part 1's
// shard to the end, its packets would count in the last window.
func TestShardedWindowLastOnEveryShard(t *testing.T) {
	half := &functions.Class{Name: "half", Params: []functions.Param{{Name: "k", Type: functions.Int, Default: "0"}},
		Validate: func(ctx *functions.Context) error { ctx.LinkType = functions.LinkEthernet; return nil },
		NewSource: func(ctx *functions.Context) (functions.Source, error) {
			first := ctx.Params.Int("k") == 1
			return &partSource{g: gen.New(gen.Config{Seed: 3, Packets: 10000}), rnd: 7,
				keep: func(i uint64) bool { return (i <= 5000) == first }}, nil
		}}
	reg := withClasses(t, half)
	run := func(expr string) FunctionState {
		rt := runToEnd(t, Config{Registry: reg}, expr)
		defer rt.Close()
		for _, f := range rt.Functions() {
			if f.Class == "counter" {
				return f
			}
		}
		t.Fatal("no counter")
		return FunctionState{}
	}
	term := "(counter,window=1ms)"
	one := run("(gen,seed=3,packets=10000,vlan=0,ipv6=0) > " + term)
	two := run("[(half,k=0)|(half,k=1)] > " + term)
	if one.In != 10000 || two.In != 10000 {
		t.Fatalf("in: %d and %d, want 10000", one.In, two.In)
	}
	p1, p2 := one.State["packets"], two.State["packets"]
	if fmt.Sprint(p1) != fmt.Sprint(p2) || fmt.Sprint(p1) == "0" {
		t.Errorf("last window: one worker counted %v packets, two shards %v", p1, p2)
	}
}

// TestShardedMergeConsistentWhileWorkersWrite: handlers and --json read a
// mergeable function while four workers write it (run it under -race).
// Every read sees a whole merge: a count-min sketch's rows each sum to
// its total, and counts never go back; at the end the merge holds every
// packet.
func TestShardedMergeConsistentWhileWorkersWrite(t *testing.T) {
	reg := withClasses(t, partClass())
	const of = 4
	var parts []string
	for k := range of {
		parts = append(parts, fmt.Sprintf("(part,k=%d,of=%d,packets=40000,batches=7,pause=20000)", k, of))
	}
	rt := New(Config{Registry: reg})
	defer rt.Close()
	req, err := rt.Populate("["+strings.Join(parts, "|")+"] > [n:(pktcount) | c:(cms,width=64,depth=3)]", RequestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	var cms *flowspaces.Node
	for _, f := range rt.snapshotFuncs() {
		if f.Label == "c" {
			cms = f.node
		}
	}
	if err := rt.Activate(context.Background()); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var reads, bad int
	wg.Add(1)
	go func() {
		defer wg.Done()
		var last uint64
		fs := cms.Flowspace.(*user.Flowspace)
		for {
			select {
			case <-done:
				return
			default:
			}
			for _, st := range req.Functions() {
				if st.Label == "n" {
					p := st.State["packets"].(uint64)
					if p < last {
						t.Errorf("the merged count went back from %d to %d", last, p)
					}
					last = p
				}
			}
			if _, err := req.Call("c", "summary", ""); err != nil {
				t.Error(err)
			}
			fs.Merged(cms, func() {
				m := cms.Function.(functions.Stateful).MBuf()
				total := m.Load64(functions.FieldOf(m, "total").Offset)
				ctr := m.Uint64s(functions.FieldOf(m, "counters"))
				for r := range 3 {
					var sum uint64
					for _, v := range ctr[r*64 : (r+1)*64] {
						sum += v
					}
					if sum != total {
						bad++
					}
				}
			})
			reads++
		}
	}()
	err = rt.Wait()
	close(done)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if bad > 0 {
		t.Errorf("%d of %d merges had a row of the sketch that did not sum to its total", bad, reads)
	}
	t.Logf("%d reads while the workers ran", reads)
	if reads < 3 {
		t.Errorf("only %d reads while the workers ran", reads)
	}
	st := stateByID(rt)
	if n := st["pktcount#1"]; n.State["packets"] != uint64(40000) || n.In != 40000 {
		t.Errorf("pktcount: %v packets, in %d; want 40000", n.State["packets"], n.In)
	}
	if c := st["cms#1"]; c.State["total"].(uint64)+c.State["nokey"].(uint64) != 40000 {
		t.Errorf("cms total %v and nokey %v, want 40000 in all", c.State["total"], c.State["nokey"])
	}
	if _, _, w := cms.Flowspace.(*user.Flowspace).Concurrency(cms); w != of {
		t.Errorf("the cms ran on %d shards, want %d", w, of)
	}
}

// TestShardsWithinTheStateBudget: a flowspace whose state budget holds one
// copy of a function's state, not two, runs it on one shard that both
// workers take in turn, with the same result as one worker.
func TestShardsWithinTheStateBudget(t *testing.T) {
	reg := withClasses(t, partClass())
	run := func(of int, limit int64) (FunctionState, int) {
		var parts []string
		for k := range of {
			parts = append(parts, fmt.Sprintf("(part,k=%d,of=%d,batches=3)", k, of))
		}
		root := user.New(user.Options{StateLimit: limit})
		rt := runToEnd(t, Config{Registry: reg, Hierarchy: root}, "["+strings.Join(parts, "|")+"] > (cms,width=512,depth=3)")
		defer rt.Close()
		for _, f := range rt.snapshotFuncs() {
			if f.node.Class.Name == "cms" {
				_, _, w := root.Concurrency(f.node)
				st := f.State()
				st.Params = nil
				return st, w
			}
		}
		t.Fatal("no cms")
		return FunctionState{}, 0
	}
	const size = 8 * (2 + 3*512) // the cms's state
	one, _ := run(1, -1)
	two, shards := run(2, size*3/2)
	if shards != 1 {
		t.Errorf("room for one copy of the state: %d shards", shards)
	}
	a, _ := json.Marshal(one)
	b, _ := json.Marshal(two)
	if string(a) != string(b) {
		t.Errorf("two workers on one shard: %s\none worker: %s", b, a)
	}
	if _, shards := run(2, size*3); shards != 2 {
		t.Errorf("room for three copies: %d shards, want 2", shards)
	}
}
