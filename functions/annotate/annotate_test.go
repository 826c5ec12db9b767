package annotate_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/annotate"
	_ "github.com/ffpf-go/ffpf/functions/builtin"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/gen"
)

func run(t *testing.T, expr string) map[string]flowgraph.FunctionState {
	t.Helper()
	rt := flowgraph.New(flowgraph.Config{})
	defer rt.Close()
	if _, err := rt.Populate(expr, flowgraph.RequestOptions{}); err != nil {
		t.Fatalf("%s: %v", expr, err)
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
	out := map[string]flowgraph.FunctionState{}
	for _, f := range rt.Functions() {
		out[f.ID] = f
	}
	return out
}

func TestGraph(t *testing.T) {
	start := time.Now().UnixNano()
	st := run(t, `(gen,packets=20000) > [a:(tag,value=7) > p:(timestamp) > w:(timestamp,clock=wall) >
		(match,"a.value == 7 and p.ts == pkt.ts and w.ts >= `+itoa(start)+` and w.age >= 0 and w.age < 1000s") > (pktcount) |
		b:(tag,value=-3) > (match,"b.value == -3") > (pktcount)]`)
	for _, id := range []string{"match#1", "match#2"} {
		if m := st[id]; m.In != 20000 || m.Out != 20000 {
			t.Errorf("%s: %+v", id, m)
		}
	}
	// The packet clock is the capture time: gen stamps from DefaultStart on.
	st = run(t, `(gen,packets=1000) > p:(timestamp) > (match,"p.ts >= `+itoa(gen.DefaultStart.UnixNano())+` and p.ts < `+itoa(gen.DefaultStart.UnixNano())+` + 1s") > (pktcount)`)
	if m := st["match#1"]; m.Out != 1000 {
		t.Errorf("packet clock: %+v", m)
	}
	for expr, want := range map[string]string{
		`(gen) > (match,"t.value == 1") > t:(tag,value=1)`:   "must come after",
		`(gen) > [t:(tag,value=1) | (match,"t.value == 1")]`: "must come after",
		`(gen) > (tag)`:                                             "one of value=N",
		`(gen) > (tag,value=1,key=srcip)`:                           "one of value=N",
		`(gen) > (tag,key=srcpt)`:                                   "srcpt",
		`(gen) > (timestamp,clock=cpu)`:                             "not one of",
		`(gen) > (tag,field=ipv4.tso,value=1)`:                      `tag cannot write field "ipv4.tso"`,
		`(gen) > (tag,field=ipv4.dscp,value=64)`:                    "ipv4.dscp holds 0 to 63, not 64",
		`(gen) > (tag,field=vlan.id,key=srcip)`:                     "give value=, not key=",
		`(gen) > (counter,report=1) > (tag,field=ipv4.ttl,value=1)`: "tag reads packet headers, but counter feeds it records",
	} {
		rt := flowgraph.New(flowgraph.Config{})
		if _, err := rt.Populate(expr, flowgraph.RequestOptions{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", expr, err, want)
		}
		rt.Close()
	}
	// age is readable with clock=wall only: refused at populate.
	rt := flowgraph.New(flowgraph.Config{})
	defer rt.Close()
	if _, err := rt.Populate(`(gen,packets=10) > p:(timestamp) > (match,"p.age > 0")`, flowgraph.RequestOptions{}); err == nil || !strings.Contains(err.Error(), `p:timestamp has no "age" to read (it has ts)`) {
		t.Errorf("age on the packet clock: %v", err)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// TestFlowTag: a packet's tag is the top 53 bits of its key's hash, and 0
// (counted) for a packet without the key's layers.
func TestFlowTag(t *testing.T) {
	c, _ := functions.Default.Lookup("tag")
	p, err := c.Bind([]functions.Arg{{Key: "key", Value: functions.Raw{Kind: functions.RawWord, Text: "5tuple"}},
		{Key: "seed", Value: functions.Raw{Kind: functions.RawNumber, Text: "42"}}})
	if err != nil {
		t.Fatal(err)
	}
	tag, err := annotate.NewTag(&functions.Context{Params: p, Ann: 5, LinkType: functions.LinkEthernet})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckState(functions.TargetUser, p, tag); err != nil {
		t.Fatal(err)
	}
	rd, _ := tag.ReadInt("value")
	sp, _ := flowkey.Parse("5tuple")
	g := gen.New(gen.Config{Seed: 2, Packets: 2000, VLAN: 0.2, IPv6: 0.3, Malformed: 0.1})
	pb := buffers.NewPBuf(buffers.MaxBatch, 2048)
	var nokey uint64
	var k flowkey.Key
	for done := false; !done; {
		b := buffers.NewBatch(pb, 0, buffers.MaxBatch, 0)
		for b.Room() > 0 {
			n, w, ts, ok := g.Next(b.NextSlot())
			if !ok {
				done = true
				break
			}
			b.Commit(uint32(n), uint32(w), ts)
		}
		tag.Process(b)
		if b.N != b.Cap && !done {
			t.Fatalf("tag passed %d of %d", b.N, b.Cap)
		}
		for _, e := range b.Entries() {
			want := int64(0)
			if sp.Extract(functions.LinkEthernet, pb.Data(e.Slot), &k) {
				want = int64(sp.Hash(&k, 42) >> 11)
			} else {
				nokey++
			}
			if got := rd(pb, e.Slot); got != want {
				t.Fatalf("slot %d: tag %d, want %d", e.Slot, got, want)
			}
		}
	}
	if got := tag.MBuf().Load64(functions.FieldOf(tag.MBuf(), "nokey").Offset); got != nokey || nokey == 0 {
		t.Errorf("nokey %d, want %d", got, nokey)
	}
}
