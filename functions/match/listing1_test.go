package match_test

import (
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/gen"
	"github.com/ffpf-go/ffpf/functions/match"
)

func instantiate(t *testing.T, class string, args []functions.Arg, ann int, state map[string]functions.Function) functions.Function {
	t.Helper()
	c, ok := functions.Default.Lookup(class)
	if !ok {
		t.Fatalf("no class %s", class)
	}
	p, err := c.Bind(args)
	if err != nil {
		t.Fatal(err)
	}
	ctx := &functions.Context{ID: class, Params: p, LinkType: functions.LinkEthernet, Ann: ann,
		StateOf: func(l string) (functions.Function, bool) { f, ok := state[l]; return f, ok }}
	f, err := c.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func word(k, v string) functions.Arg {
	return functions.Arg{Key: k, Value: functions.Raw{Kind: functions.RawWord, Text: v}}
}

// TestListing1 runs MAFIA's Listing 1 (the first phase of two-phase heavy
// hitters, with a keyed counter in place of the count-min sketch) batch by
// batch, and checks every verdict against an exact computation: a packet
// passes when its flow's bytes exceed 1% of all bytes, both counted up to
// the end of the batch it is in (the writers process a batch before the
// reader).
func TestListing1(t *testing.T) {
	state := map[string]functions.Function{}
	state["total"] = instantiate(t, "counter", []functions.Arg{word("value", "bytes")}, 0, state)
	state["nbytes"] = instantiate(t, "counter", []functions.Arg{word("key", "5tuple"), word("value", "bytes")}, 0, state)
	m := instantiate(t, "match", []functions.Arg{{Value: functions.Raw{Kind: functions.RawString, Text: "nbytes.value > 0.01 * total.value"}}}, 0, state).(*match.Match)

	sp, _ := flowkey.Parse("5tuple")
	flows := map[flowkey.Key]uint64{}
	var total uint64
	g := gen.New(gen.Config{Seed: 11, Packets: 30000, Flows: 300, VLAN: 0.1, IPv6: 0.3})
	p := buffers.NewPBuf(buffers.MaxBatch, 2048)
	passed := 0
	for bs, done := 1, false; !done; bs = (bs*7+37)%buffers.MaxBatch + 1 { // batches of varying sizes
		b := buffers.NewBatch(p, 0, bs, 0)
		for b.Room() > 0 {
			n, w, ts, ok := g.Next(b.NextSlot())
			if !ok {
				done = true
				break
			}
			b.Commit(uint32(n), uint32(w), ts)
		}
		var k flowkey.Key
		for _, e := range b.Entries() {
			total += uint64(p.Meta(e.Slot).WireLen)
			if sp.Extract(functions.LinkEthernet, p.Data(e.Slot), &k) {
				flows[k] += uint64(p.Meta(e.Slot).WireLen)
			}
		}
		var want []uint32
		for _, e := range b.Entries() {
			if sp.Extract(functions.LinkEthernet, p.Data(e.Slot), &k) && float64(flows[k]) > 0.01*float64(total) {
				want = append(want, e.Slot)
			}
		}
		state["total"].Process(b)
		state["nbytes"].Process(b)
		m.Process(b)
		if b.N != len(want) {
			t.Fatalf("batch of %d: %d passed, want %d", bs, b.N, len(want))
		}
		for i, e := range b.Entries() {
			if e.Slot != want[i] {
				t.Fatalf("batch of %d: entry %d is slot %d, want %d", bs, i, e.Slot, want[i])
			}
		}
		passed += b.N
	}
	if passed == 0 || passed == 30000 {
		t.Errorf("%d of 30000 passed", passed)
	}
}
