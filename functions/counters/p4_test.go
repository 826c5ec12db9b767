package counters_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
	_ "github.com/ffpf-go/ffpf/functions/counters"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/gen"
	"github.com/ffpf-go/ffpf/functions/internal/p4test"
	"github.com/ffpf-go/ffpf/functions/measure"
)

// frames is what the counters' tests run: generated traffic (VLAN, IPv6,
// malformed frames) and the adversarial frames cut at every length.
func frames() []p4test.Packet {
	ps := p4test.Trace(gen.Config{Seed: 11, Packets: 3000, Malformed: 0.1, VLAN: 0.2, IPv6: 0.3})
	return append(ps, p4test.Packets(p4test.Cuts(p4test.Adversarial()))...)
}

// pktcount and bytecount on a switch count what they count in userspace,
// and pass every packet.
func TestP4CountersEqualGo(t *testing.T) {
	ps := frames()
	for _, expr := range []string{"(pktcount)", "(bytecount)"} {
		r := p4test.Run(t, p4test.Parse(t, expr), ps)
		r.SamePasses(t, ps)
		got, want := r.P4.(functions.Stateful).MBuf().Bytes(), r.User.(functions.Stateful).MBuf().Bytes()
		if !bytes.Equal(got, want) || bytes.Equal(want, make([]byte, len(want))) {
			t.Errorf("%s: the switch's state % x, userspace's % x", expr, got, want)
		}
	}
}

// counter on a switch: without a key its state is userspace's; with one,
// its totals and nokey are userspace's, the table the switch keeps is
// the one its Go half computes with the switch's indexing, and each key
// the table holds has its exact count (one slot per key: a key whose slot
// another holds is counted in dropped, whole).
func TestP4CounterEqualsGo(t *testing.T) {
	ps := frames()
	r := p4test.Run(t, p4test.Parse(t, "(counter,value=bytes)"), ps)
	r.SamePasses(t, ps)
	if got, want := r.P4.(functions.Stateful).MBuf().Bytes(), r.User.(functions.Stateful).MBuf().Bytes(); !bytes.Equal(got, want) {
		t.Errorf("unkeyed: the switch's state % x, userspace's % x", got, want)
	}
	for _, expr := range []string{"(counter,key=5tuple,size=4K)", "(counter,key=srcip/24,value=bytes,size=64)", "(counter,key=dstport,size=100)"} {
		fn := p4test.Parse(t, expr)
		r := p4test.Run(t, fn, ps)
		r.SamePasses(t, ps)
		r.SameModel(t)
		p4s, user := r.P4.(functions.Summarizer).Summary(), r.User.(functions.Summarizer).Summary()
		for _, f := range []string{"packets", "bytes", "nokey"} {
			if p4s[f] != user[f] {
				t.Errorf("%s: %s is %v on the switch, %v in userspace", expr, f, p4s[f], user[f])
			}
		}
		exact, dropped := exactCounts(fn, ps), uint64(0)
		stored := map[string]bool{}
		var held uint64
		top, err := r.P4.(functions.Handlers).Handlers()[2].Call("65536")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range top.([]map[string]any) {
			k := string(e["key"].(json.RawMessage))
			stored[k] = true
			held++
			if e["value"].(uint64) != exact[k].value {
				t.Errorf("%s: key %s counts %v on the switch, %d exactly", expr, k, e["value"], exact[k].value)
			}
		}
		for k, v := range exact {
			if !stored[k] {
				dropped += v.packets
			}
		}
		if p4s["dropped"] != dropped || p4s["keys"] != held {
			t.Errorf("%s: the switch holds %v keys and dropped %v packets; its table says %d and %d", expr, p4s["keys"], p4s["dropped"], held, dropped)
		}
		if held < 10 || (expr != "(counter,key=5tuple,size=4K)" && dropped == 0) {
			t.Errorf("%s: %d keys held, %d packets dropped: the test compares too little", expr, held, dropped)
		}
	}
}

type counts struct{ packets, value uint64 }

// exactCounts counts the packets of ps, and their value, per key of fn's
// key= as Extract reads it, by the key's JSON.
func exactCounts(fn p4test.Fn, ps []p4test.Packet) map[string]counts {
	sp := measure.Spec(fn.Params)
	out := map[string]counts{}
	var k flowkey.Key
	for _, p := range ps {
		if !sp.Extract(functions.LinkEthernet, p.Data, &k) {
			continue
		}
		c := out[sp.Format(&k)]
		c.packets++
		c.value++
		if measure.Bytes(fn.Params) {
			c.value += uint64(len(p.Data)) - 1
		}
		out[sp.Format(&k)] = c
	}
	return out
}

// counter with window= on a switch: each window the switch measures holds
// what its Go half computes on that window's packets, and userspace's
// totals for a window the switch measured whole; after an idle window
// the packets of the next clear its half first (MAFIA's incremental
// reset), and those are counted as not measured.
func TestP4CounterWindows(t *testing.T) {
	ps := p4test.Trace(gen.Config{Seed: 3, Packets: 7000, Malformed: 0.05, VLAN: 0.2, IPv6: 0.3, Flows: 300})
	ps = p4test.WithGap(ps, 10, 3)
	for _, expr := range []string{"(counter,value=bytes,window=1024us)", "(counter,key=srcip,size=64,window=1024us)"} {
		fn := p4test.Parse(t, expr)
		p4test.CheckWindows(t, fn, ps, 10, func(p4, user map[string]any) error {
			for _, f := range []string{"packets", "bytes", "nokey"} {
				if p4[f] != user[f] {
					return fmt.Errorf("%s: %s %v on the switch, %v in userspace", expr, f, p4[f], user[f])
				}
			}
			return nil
		})
	}
}

// report= on a switch: at a window's end the controller fills a Go half
// with the window's state and ticks it, and the Go half reports the
// window. For each window the switch measured whole, that is the report
// userspace makes of it: the total; with key=, the K largest values, and
// the same keys but among equal values (which of them a report of K keeps
// depends on the order of the table).
func TestP4CounterReports(t *testing.T) {
	ps := p4test.Trace(gen.Config{Seed: 3, Packets: 7000, Malformed: 0.05, VLAN: 0.2, IPv6: 0.3, Flows: 300})
	for _, expr := range []string{"(counter,value=bytes,window=1024us,report=1)", "(counter,key=proto,size=256,window=1024us,report=3)"} {
		fn := p4test.Parse(t, expr)
		wins, measured := p4test.RunWindows(t, fn, ps)
		user, err := fn.Class.New(fn.Context("f#1", ""))
		if err != nil {
			t.Fatal(err)
		}
		urecs := p4test.Records(t, user)
		p4test.RunGo(t, user, ps)
		user.(functions.Flusher).Flush(ps[len(ps)-1].Time)
		byStart := map[any][]map[string]any{}
		for _, r := range *urecs {
			m := decode(t, r)
			byStart[m["ts"]] = append(byStart[m["ts"]], m)
		}
		first := map[uint64]int64{} // a window's first packet's time
		whole := map[uint64]bool{}
		for i, p := range ps {
			n := uint64(p4test.Time(p.Time)) >> 10 & 0xffffffff
			if _, ok := first[n]; !ok {
				first[n], whole[n] = p.Time, true
			}
			whole[n] = whole[n] && measured[i]
		}
		compared := 0
		for _, w := range wins {
			if w.Half == nil || !whole[w.Number] {
				continue
			}
			if d, ok := w.Half.(functions.Summarizer).Summary()["dropped"]; ok && d != uint64(0) {
				continue // a key found its slot taken
			}
			var got []map[string]any
			for _, r := range w.Report(t, first[w.Number]) {
				got = append(got, decode(t, r))
			}
			if len(got) == 0 {
				t.Fatalf("%s: window %d: no report", expr, w.Number)
			}
			want := byStart[got[0]["ts"]]
			if err := sameReport(got, want); err != nil {
				t.Fatalf("%s: window %d: %v\nswitch    %v\nuserspace %v", expr, w.Number, err, got, want)
			}
			compared++
		}
		if compared < 4 {
			t.Errorf("%s: %d windows compared", expr, compared)
		}
		t.Logf("%s: %d windows reported as userspace reports them", expr, compared)
	}
}

// decode decodes a record, its numbers as they are written.
func decode(tb testing.TB, rec string) map[string]any {
	var m map[string]any
	d := json.NewDecoder(strings.NewReader(rec))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		tb.Fatal(err)
	}
	return m
}

// sameReport compares a report's records: the same number, the same
// values rank by rank, and the same records where a value is larger than
// the last (equal values may be other keys).
func sameReport(got, want []map[string]any) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d records, userspace %d", len(got), len(want))
	}
	last := want[len(want)-1]["value"]
	for i := range got {
		g, w := fmt.Sprint(got[i]), fmt.Sprint(want[i])
		if got[i]["value"] != want[i]["value"] || (last == nil || got[i]["value"] != last) && g != w {
			return fmt.Errorf("record %d differs", i)
		}
	}
	return nil
}
