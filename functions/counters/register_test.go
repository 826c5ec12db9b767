package counters

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/gen"
)

// registerOn instantiates a register with the raw arguments args (key=value).
func registerOn(t *testing.T, args map[string]string) *Register {
	t.Helper()
	c, _ := functions.Default.Lookup("register")
	var as []functions.Arg
	for k, v := range args {
		raw := functions.Raw{Kind: functions.RawString, Text: v}
		if k == "size" {
			raw = functions.Raw{Kind: functions.RawNumber, Text: strings.TrimSuffix(v, "K"), Unit: "K"}
		}
		as = append(as, functions.Arg{Key: k, Value: raw})
	}
	p, err := c.Bind(as)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRegister(&functions.Context{ID: "register#1", Params: p, LinkType: functions.LinkEthernet, Ann: 2})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// seen is one packet as the register processed it.
type seen struct {
	data []byte
	ts   int64
	old  uint64
}

// feed runs fn on n generated packets in batches of random sizes, and
// returns each packet with the annotation word at.
func feed(t *testing.T, fn functions.Function, cfg gen.Config, at int) []seen {
	t.Helper()
	g := gen.New(cfg)
	pb := buffers.NewPBuf(buffers.MaxBatch, gen.MaxFrameLen)
	b := buffers.NewBatch(pb, 0, buffers.MaxBatch, 0)
	rng := rand.New(rand.NewPCG(1, 2))
	var out []seen
	for done := false; !done; {
		b.Reset()
		want := 1 + rng.IntN(buffers.MaxBatch)
		for b.N < want {
			n, w, ts, ok := g.Next(b.NextSlot())
			if !ok {
				done = true
				break
			}
			b.Commit(uint32(n), uint32(w), ts)
		}
		in := b.N
		fn.Process(b)
		if b.N != in {
			t.Fatalf("a register passes every packet: %d of %d", b.N, in)
		}
		for _, e := range b.E[:b.N] {
			out = append(out, seen{append([]byte(nil), pb.Data(e.Slot)...), pb.Meta(e.Slot).Timestamp, pb.Ann(e.Slot)[at]})
		}
	}
	return out
}

// TestRegisterFlowTimes: each flow's first and last time, and what each
// packet found, equal an exact computation on the same packets, in batches
// of any size; the counts account for every packet.
func TestRegisterFlowTimes(t *testing.T) {
	cfg := gen.Config{Seed: 9, Packets: 20000, Flows: 300, IPv6: 0.2, VLAN: 0.1, Malformed: 0.02}
	first := registerOn(t, map[string]string{"key": "5tuple", "size": "4K", "set": "pkt.ts", "if": "old == 0"})
	last := registerOn(t, map[string]string{"key": "5tuple", "size": "4K", "set": "pkt.ts"})
	pf, pl := feed(t, first, cfg, 2), feed(t, last, cfg, 2)
	sp, _ := flowkey.Parse("5tuple")
	type times struct{ first, last uint64 }
	exact := map[flowkey.Key]*times{}
	var k flowkey.Key
	nokey := 0
	for i, p := range pf {
		if !sp.Extract(functions.LinkEthernet, p.data, &k) {
			nokey++
			if p.old != 0 || pl[i].old != 0 {
				t.Fatalf("packet %d has no key, and found %d, %d", i, p.old, pl[i].old)
			}
			continue
		}
		e := exact[k]
		var wantFirst, wantLast uint64
		if e != nil {
			wantFirst, wantLast = e.first, e.last
		} else {
			e = &times{first: uint64(p.ts)}
			exact[k] = e
		}
		if p.old != wantFirst || pl[i].old != wantLast {
			t.Fatalf("packet %d found first %d last %d, exactly %d %d", i, p.old, pl[i].old, wantFirst, wantLast)
		}
		e.last = uint64(p.ts)
	}
	got := map[flowkey.Key]*times{}
	first.Each(func(k *flowkey.Key, v uint64) { got[*k] = &times{first: v} })
	last.Each(func(k *flowkey.Key, v uint64) { got[*k].last = v })
	if len(got) != len(exact) || len(exact) < 200 {
		t.Fatalf("%d flows held, %d exactly", len(got), len(exact))
	}
	long := 0
	for k, e := range exact {
		if g := got[k]; g == nil || *g != *e {
			t.Fatalf("flow %v: %+v, exactly %+v", sp.Format(&k), got[k], e)
		}
		if e.last > e.first {
			long++
		}
	}
	if long < len(exact)/2 {
		t.Fatalf("only %d of %d flows last longer than a packet: the test tells first from last too little", long, len(exact))
	}
	s := first.Summary()
	if s["nokey"] != uint64(nokey) || s["keys"] != uint64(len(exact)) || s["updates"] != uint64(len(exact)) || s["dropped"] != uint64(0) {
		t.Errorf("first: %v; %d flows, %d without a key", s, len(exact), nokey)
	}
	if s := last.Summary(); s["updates"] != uint64(len(pf)-nokey) {
		t.Errorf("last: %v; %d packets with a key", s, len(pf)-nokey)
	}
}

// TestRegisterClock: an unkeyed Lamport clock of 8 bits over the packets'
// TTLs; IPv6 packets have none, leave the cell alone and count as
// missing.
func TestRegisterClock(t *testing.T) {
	r := registerOn(t, map[string]string{"set": "max(old + 1, ipv4.ttl) & 255"})
	ps := feed(t, r, gen.Config{Seed: 4, Packets: 3000, IPv6: 0.3}, 2)
	var cell uint64
	missing := 0
	for i, p := range ps {
		if p.old != cell {
			t.Fatalf("packet %d found %d, the clock is %d", i, p.old, cell)
		}
		if len(p.data) < 23 || p.data[12] != 0x08 || p.data[13] != 0 {
			missing++
			continue
		}
		cell = max(cell+1, uint64(p.data[14+8])) & 255
	}
	if s := r.Summary(); s["cell"] != cell || s["missing"] != uint64(missing) || missing == 0 || s["updates"] != uint64(len(ps)-missing) {
		t.Errorf("%v; want cell %d, %d missing of %d", s, cell, missing, len(ps))
	}
}

// TestRegisterReads: functions after a register read the cell as the
// packet left it (value) and as it found it (old).
func TestRegisterReads(t *testing.T) {
	r := registerOn(t, map[string]string{"set": "old + pkt.len"})
	val, err := r.ReadInt("value")
	if err != nil {
		t.Fatal(err)
	}
	old, _ := r.ReadInt("old")
	pb := buffers.NewPBuf(4, 100)
	b := buffers.NewBatch(pb, 0, 4, 0)
	for _, n := range []int{60, 70, 80} {
		b.Append(make([]byte, n), uint32(n), 1)
	}
	r.Process(b)
	if o := []int64{old(pb, 0), old(pb, 1), old(pb, 2)}; o[0] != 0 || o[1] != 60 || o[2] != 130 || val(pb, 2) != 210 {
		t.Errorf("old %v value %d", o, val(pb, 2))
	}
	if _, err := r.ReadInt("nope"); err == nil {
		t.Error("an unknown name read")
	}
}

func TestRegisterNoAllocs(t *testing.T) {
	r := registerOn(t, map[string]string{"key": "5tuple", "set": "old + pkt.len", "if": "tcp"})
	g := gen.New(gen.Config{Seed: 1, Packets: buffers.MaxBatch})
	pb := buffers.NewPBuf(buffers.MaxBatch, gen.MaxFrameLen)
	b := buffers.NewBatch(pb, 0, buffers.MaxBatch, 0)
	for b.Room() > 0 {
		n, w, ts, _ := g.Next(b.NextSlot())
		b.Commit(uint32(n), uint32(w), ts)
	}
	if a := testing.AllocsPerRun(50, func() { b.N = buffers.MaxBatch; r.Process(b) }); a != 0 {
		t.Errorf("%v allocations per batch", a)
	}
}
