package counters_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/counters"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/gen"
	"github.com/ffpf-go/ffpf/functions/internal/p4test"
)

// register on a switch (p4gen's reference semantics): its state, as the
// controller reads it, is what the Go half computes on the same packets
// with the switch's indexing; unkeyed, it is userspace's; keyed, every
// flow the switch holds has its exact first (or last) time, and the
// flows whose slot another holds are counted in dropped.
func TestP4RegisterEqualsGo(t *testing.T) {
	ps := p4test.Trace(gen.Config{Seed: 21, Packets: 3000, Flows: 60, Malformed: 0.05, VLAN: 0.2, IPv6: 0.3})
	for _, expr := range []string{`(register,set="max(old + 1, ipv4.ttl) & 255")`, `(register,set="old + pkt.len",if="tcp")`} {
		r := p4test.Run(t, p4test.Parse(t, expr), ps)
		r.SamePasses(t, ps)
		r.SameModel(t)
		if got, want := r.P4.(functions.Summarizer).Summary(), r.User.(functions.Summarizer).Summary(); got["cell"] != want["cell"] || got["updates"] != want["updates"] || got["missing"] != want["missing"] {
			t.Errorf("%s: the switch %v, userspace %v", expr, got, want)
		}
	}
	sp, _ := flowkey.Parse("5tuple")
	for _, tc := range []struct {
		expr  string
		first bool
	}{{`(register,key=5tuple,size=1024,set=pkt.ts,if="old == 0")`, true}, {`(register,key=5tuple,size=1024,set=pkt.ts)`, false}} {
		r := p4test.Run(t, p4test.Parse(t, tc.expr), ps)
		r.SamePasses(t, ps)
		r.SameModel(t)
		exact := map[flowkey.Key]uint64{}
		var k flowkey.Key
		for _, p := range ps {
			if !sp.Extract(functions.LinkEthernet, p.Data, &k) {
				continue
			}
			if _, seen := exact[k]; !seen || !tc.first {
				exact[k] = (uint64(p.Time) / 1000 & (1<<48 - 1)) * 1000 // the switch's clock, in ns
			}
		}
		held := 0
		r.P4.(*counters.Register).Each(func(k *flowkey.Key, v uint64) {
			held++
			if v != exact[*k] {
				t.Errorf("%s: flow %s holds %d on the switch, exactly %d", tc.expr, sp.Format(k), v, exact[*k])
			}
		})
		if held < len(exact)*3/4 {
			t.Errorf("%s: the switch holds %d of %d flows", tc.expr, held, len(exact))
		}
		if s := r.P4.(functions.Summarizer).Summary(); s["keys"] != uint64(held) {
			t.Errorf("%s: %v, %d held", tc.expr, s, held)
		}
	}
}

// With hash=switch a keyed counter or register in userspace keeps the
// switch's one-slot table: the same keys held, the same slots, the same
// values (a value the switch's clock does not write), the same packets
// dropped for want of a slot; with the default it keeps its own table,
// which holds keys the switch drops.
func TestHashSwitchTablesInUserspace(t *testing.T) {
	ps := p4test.Trace(gen.Config{Seed: 22, Packets: 4000, Flows: 900, Malformed: 0.05, VLAN: 0.2, IPv6: 0.3})
	for _, expr := range []string{
		`(counter,key=5tuple,size=512,value=bytes%s)`,
		`(register,key=srcip,size=256,set="old + pkt.len",if="old < 5000"%s)`,
	} {
		r := p4test.Run(t, p4test.Parse(t, fmt.Sprintf(expr, ",hash=switch")), ps)
		r.SamePasses(t, ps)
		got, want := r.User.(functions.Stateful).MBuf(), r.P4.(functions.Stateful).MBuf()
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("%s: userspace's table differs from the switch's: %v / %v", expr,
				r.User.(functions.Summarizer).Summary(), r.P4.(functions.Summarizer).Summary())
		}
		dropped := r.P4.(functions.Summarizer).Summary()["dropped"]
		own := p4test.Run(t, p4test.Parse(t, fmt.Sprintf(expr, "")), ps)
		if d := own.User.(functions.Summarizer).Summary()["dropped"]; d == dropped || dropped == uint64(0) {
			t.Fatalf("%s: the switch drops %v packets, userspace's own table %v: the test shows nothing", expr, dropped, d)
		}
	}
	fn := p4test.Parse(t, `(counter,key=5tuple,hash=switch,window=1s)`)
	if err := fn.Class.Runs(functions.TargetUser, fn.Params); err == nil {
		t.Error("a windowed keyed counter with hash=switch runs in userspace")
	}
}
