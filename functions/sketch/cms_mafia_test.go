package sketch

import (
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/gen"
)

// TestCMSValueAndAggregates: value= a packet's number (its IPv4 ID, what
// MAFIA's congested flows sum) adds that number; max, sum and avg read the
// key's counters as min does, and bound its exact sum from above.
func TestCMSValueAndAggregates(t *testing.T) {
	p, err := cmsClass.Bind([]functions.Arg{word("value", "ipv4.id"), num("width", "64"), num("depth", "4")})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCMS(&functions.Context{ID: "cms#1", Params: p, LinkType: functions.LinkEthernet})
	if err != nil {
		t.Fatal(err)
	}
	readers := map[string]functions.Reader{}
	for _, n := range []string{"min", "max", "sum", "avg"} {
		if readers[n], err = c.Read(n); err != nil {
			t.Fatal(err)
		}
	}
	g := gen.New(gen.Config{Seed: 2, Packets: buffers.MaxBatch, Flows: 20, IPv6: 0.2})
	pb := buffers.NewPBuf(buffers.MaxBatch, gen.MaxFrameLen)
	b := buffers.NewBatch(pb, 0, buffers.MaxBatch, 0)
	for b.Room() > 0 {
		n, w, ts, _ := g.Next(b.NextSlot())
		b.Commit(uint32(n), uint32(w), ts)
	}
	sp, _ := flowkey.Parse("5tuple")
	exact := map[flowkey.Key]uint64{}
	var total uint64
	var k flowkey.Key
	for i := range uint32(b.N) {
		d := pb.Data(i)
		if !sp.Extract(functions.LinkEthernet, d, &k) {
			continue
		}
		if off := ipv4At(d); off >= 0 {
			v := uint64(d[off+4])<<8 | uint64(d[off+5])
			exact[k] += v
			total += v
		} else {
			exact[k] += 0 // an IPv6 packet adds 0
		}
	}
	c.Process(b)
	if got := c.m.Load64(c.total); got != total || total == 0 {
		t.Fatalf("total %d, exactly %d", got, total)
	}
	for i := range uint32(b.N) {
		if !sp.Extract(functions.LinkEthernet, pb.Data(i), &k) {
			continue
		}
		mn, mx, sum, avg := readers["min"](pb, i), readers["max"](pb, i), readers["sum"](pb, i), readers["avg"](pb, i)
		if mn < float64(exact[k]) || mx < mn || sum < 4*mn || avg != sum/4 {
			t.Fatalf("key %s: min %v max %v sum %v avg %v, exactly %d", sp.Format(&k), mn, mx, sum, avg, exact[k])
		}
	}
	if _, err := cmsClass.Bind([]functions.Arg{word("value", "ipv4.id >")}); err == nil {
		t.Error("a bad value= expression bound")
	}
	if err := cmsRuns(p); err == nil {
		t.Error("value= an expression may run in eBPF")
	}
}
