package bpf

import (
	"strings"
	"sync"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

func bind(t *testing.T, args ...functions.Arg) (*functions.Class, functions.Params) {
	t.Helper()
	c, ok := functions.Default.Lookup("BPF")
	if !ok {
		t.Fatal("class bpf is not registered")
	}
	p, err := c.Bind(args)
	if err != nil {
		t.Fatal(err)
	}
	return c, p
}

func TestClassRegistration(t *testing.T) {
	c, ok := functions.Default.Lookup("bpf")
	if !ok {
		t.Fatal("class bpf is not registered")
	}
	if c.MinInputs != 1 || c.MaxInputs != -1 || c.IsSource() || !c.Supports(functions.TargetUser) || !c.Supports(functions.TargetKernel) || !c.Supports(functions.TargetXDP) || c.Code == nil {
		t.Errorf("bad class shape: %+v", c)
	}
	if len(c.Params) != 1 || c.Params[0].Name != "expr" || !c.Params[0].Required || c.Params[0].Type != functions.String {
		t.Errorf("bad parameters: %+v", c.Params)
	}
	// (bpf,"tcp"): a bare value is the expression.
	_, p := bind(t, functions.Arg{Value: functions.Raw{Kind: functions.RawString, Text: "tcp and dst port 80"}})
	if got := p.Str("expr"); got != "tcp and dst port 80" {
		t.Errorf("expr = %q", got)
	}
	if _, err := c.Bind(nil); err == nil || !strings.Contains(err.Error(), "needs parameter expr") {
		t.Errorf("missing expr: %v", err)
	}
}

func TestClassValidate(t *testing.T) {
	c, p := bind(t, functions.Arg{Key: "expr", Value: functions.Raw{Kind: functions.RawString, Text: "tcp and dest 80"}})
	err := c.Validate(&functions.Context{ID: "bpf1", Params: p, LinkType: functions.LinkEthernet, Snaplen: 2048})
	if err == nil || err.Error() != `bad filter expression "tcp and dest 80": syntax error in filter expression` {
		t.Errorf("Validate: %v", err)
	}
	c, p = bind(t, functions.Arg{Value: functions.Raw{Kind: functions.RawWord, Text: "udp"}})
	if err := c.Validate(&functions.Context{Params: p, LinkType: functions.LinkEthernet, Snaplen: 2048}); err != nil {
		t.Errorf("Validate udp: %v", err)
	}
	// The link type matters: no VLANs on raw IP.
	c, p = bind(t, functions.Arg{Value: functions.Raw{Kind: functions.RawString, Text: "vlan 100"}})
	if err := c.Validate(&functions.Context{Params: p, LinkType: functions.LinkRaw, Snaplen: 2048}); err == nil {
		t.Error("vlan on RAW validated")
	}
}

// fillBatch stores pkts into a fresh PBuf and returns a batch of them, with
// entry i's class set to 1000+i.
func fillBatch(pkts [][]byte) *buffers.Batch {
	pb := buffers.NewPBuf(buffers.MaxBatch, 2048)
	b := buffers.NewBatch(pb, 0, buffers.MaxBatch, 0)
	for i, p := range pkts {
		if i == buffers.MaxBatch {
			break
		}
		b.Append(p, uint32(len(p)), int64(i))
		b.E[b.N-1].Class = uint32(1000 + i)
	}
	return b
}

func TestClassProcess(t *testing.T) {
	c, p := bind(t, functions.Arg{Value: functions.Raw{Kind: functions.RawString, Text: "tcp and dst port 80"}})
	fn, err := c.New(&functions.Context{ID: "bpf1", Params: p, LinkType: functions.LinkEthernet, Snaplen: 2048})
	if err != nil {
		t.Fatal(err)
	}
	f := fn.(*Filter)
	if f.Expr() != "tcp and dst port 80" || f.LinkType() != functions.LinkEthernet || len(f.Instructions()) != 16 {
		t.Errorf("filter: %q %s %d instructions", f.Expr(), f.LinkType(), len(f.Instructions()))
	}
	if last := f.Instructions()[14]; last.K != 2048 {
		t.Errorf("snaplen not used: %s", Disassemble(f.Instructions()))
	}
	var pkts [][]byte
	for _, pk := range baseCorpus(t) {
		pkts = append(pkts, pk.data)
	}
	b := fillBatch(pkts)
	in := b.N
	var want []buffers.Entry
	for _, e := range b.Entries() {
		if f.Program().Run(b.PBuf.Data(e.Slot), b.PBuf.Meta(e.Slot).WireLen) != 0 {
			want = append(want, e)
		}
	}
	fn.Process(b)
	if b.N != len(want) || b.N == 0 || b.N == in {
		t.Fatalf("kept %d of %d, want %d", b.N, in, len(want))
	}
	for i, e := range b.Entries() {
		if e != want[i] {
			t.Errorf("entry %d: %+v, want %+v (order and class kept)", i, e, want[i])
		}
	}
	if b.Dropped != 0 {
		t.Errorf("Dropped = %d", b.Dropped)
	}
	// Truncated copies are rejected the way libpcap rejects them.
	trunc := make([][]byte, 0, len(pkts))
	for _, p := range pkts {
		trunc = append(trunc, p[:min(len(p), 37)])
	}
	b = fillBatch(trunc)
	fn.Process(b)
	if b.N != 0 {
		t.Errorf("%d packets truncated to 37 bytes (one short of the TCP port) passed 'tcp and dst port 80'", b.N)
	}
}

func TestFilterAllocs(t *testing.T) {
	prog, err := CompileAndLoad("tcp and dst port 80 or ip6 protochain 6 or vlan 100", functions.LinkEthernet, 0)
	if err != nil {
		t.Fatal(err)
	}
	pkts := trafficMix(t, buffers.MaxBatch)
	b := fillBatch(pkts)
	full := b.E
	allocs := testing.AllocsPerRun(100, func() {
		b.E, b.N = full, buffers.MaxBatch
		prog.Filter(b)
	})
	if allocs != 0 {
		t.Fatalf("Filter allocates %v times per batch", allocs)
	}
	if b.N == 0 || b.N == buffers.MaxBatch {
		t.Fatalf("kept %d of %d: the batch does not exercise the filter", b.N, buffers.MaxBatch)
	}
}

// TestConcurrentFilter runs one program from several goroutines (a function
// shared between requests): run it with -race.
func TestConcurrentFilter(t *testing.T) {
	prog, err := CompileAndLoad("ip6 protochain 6 or tcp port 80", functions.LinkEthernet, 0)
	if err != nil {
		t.Fatal(err)
	}
	pkts := trafficMix(t, buffers.MaxBatch)
	ref := fillBatch(pkts)
	prog.Filter(ref)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := fillBatch(pkts)
			for i := 0; i < 20; i++ {
				c := *b
				prog.Filter(&c)
				if c.N != ref.N {
					t.Errorf("kept %d, want %d", c.N, ref.N)
					return
				}
			}
		}()
	}
	wg.Wait()
}
