package sketch_test

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/gen"
	"github.com/ffpf-go/ffpf/functions/internal/p4test"
	"github.com/ffpf-go/ffpf/functions/measure"
	"github.com/ffpf-go/ffpf/functions/sketch"
)

// exact counts the packets (or bytes) of each key of fn's key=, keyed by
// the key's words, and keeps a packet of each.
func exact(fn p4test.Fn, ps []p4test.Packet) (map[flowkey.Key]uint64, map[flowkey.Key][]byte, uint64) {
	sp := measure.Spec(fn.Params)
	counts, first := map[flowkey.Key]uint64{}, map[flowkey.Key][]byte{}
	var n uint64
	_, hasValue := fn.Class.Param("value")
	bytes := hasValue && measure.Bytes(fn.Params)
	for _, p := range ps {
		var k flowkey.Key
		if !sp.Extract(functions.LinkEthernet, p.Data, &k) {
			continue
		}
		v := uint64(1)
		if bytes {
			v = uint64(len(p.Data))
		}
		counts[k] += v
		n += v
		if first[k] == nil {
			first[k] = p.Data
		}
	}
	return counts, first, n
}

func withinBound(bad, n int, delta float64) bool {
	mean := delta * float64(n)
	return float64(bad) <= mean+3*math.Sqrt(mean)+1
}

// cms on a switch keeps, byte for byte, the rows its Go half computes
// with the switch's positions; its total and nokey are userspace's; and
// its estimates hold count-min's bound: never below a key's count, above
// it by more than εN (ε = e/width, the width rounded up to a power of
// two) for at most a δ = e^−depth share of the keys.
func TestP4CMSEqualsGoAndHoldsItsBound(t *testing.T) {
	ps := p4test.Trace(gen.Config{Seed: 21, Packets: 6000, Malformed: 0.05, VLAN: 0.2, IPv6: 0.3, Flows: 2000})
	ps = append(ps, p4test.Packets(p4test.Cuts(p4test.Adversarial()[:40]))...)
	for _, expr := range []string{"(cms,key=5tuple)", "(cms,key=srcip/24,value=bytes,width=50,depth=3)", "(cms,key=dstport,width=16,depth=2)"} {
		fn := p4test.Parse(t, expr)
		r := p4test.Run(t, fn, ps)
		r.SamePasses(t, ps)
		r.SameModel(t)
		p4s, user := r.P4.(functions.Summarizer).Summary(), r.User.(functions.Summarizer).Summary()
		for _, f := range []string{"total", "nokey"} {
			if p4s[f] != user[f] {
				t.Errorf("%s: %s is %v on the switch, %v in userspace", expr, f, p4s[f], user[f])
			}
		}
		counts, first, n := exact(fn, ps)
		rd, err := r.P4.(functions.Readable).Read("min")
		if err != nil {
			t.Fatal(err)
		}
		width, depth := float64(p4s["width"].(int)), float64(p4s["depth"].(int))
		if w := fn.Params.Int("width"); width < float64(w) || width >= 2*float64(w) {
			t.Fatalf("%s: width %v on the switch for width=%d", expr, width, w)
		}
		eps := math.E / width * float64(n)
		bad := 0
		for k, c := range counts {
			est := p4test.Read(rd, first[k])
			if est < float64(c) {
				t.Fatalf("%s: a key of %d has estimate %v", expr, c, est)
			}
			if est > float64(c)+eps {
				bad++
			}
		}
		if !withinBound(bad, len(counts), math.Exp(-depth)) {
			t.Errorf("%s: %d of %d keys beyond εN = %.1f, δ = %.4f", expr, bad, len(counts), eps, math.Exp(-depth))
		}
		if len(counts) < 10 {
			t.Errorf("%s: %d keys", expr, len(counts))
		}
		t.Logf("%s: %d keys, %d beyond εN = %.1f", expr, len(counts), bad, eps)
	}
}

// hll and pcsa on a switch keep the registers (bitmaps) their Go halves
// compute from crc32 (hll the larger rank, not the last), nokey is
// userspace's, and the estimate is within 3 standard errors (1.04/√m,
// 0.78/√m, m as the switch rounds it, never fewer than asked) of the
// number of distinct keys.
func TestP4CardinalityEqualsGoAndHoldsItsBound(t *testing.T) {
	ps := p4test.Trace(gen.Config{Seed: 5, Packets: 12000, Malformed: 0.05, VLAN: 0.1, IPv6: 0.3, Flows: 8000})
	for _, c := range []struct {
		expr     string
		m        string  // the summary's count of registers or bitmaps
		asked, c float64 // m asked for; the standard error is c/√m
	}{
		{"(hll,key=dstip)", "registers", 1 << 14, 1.04},
		{"(hll,key=5tuple,precision=10)", "registers", 1 << 10, 1.04},
		{"(hll,key=srcport,precision=6)", "registers", 1 << 6, 1.04},
		{"(pcsa,key=5tuple,bitmaps=256)", "bitmaps", 256, 0.78},
		{"(pcsa,key=srcip,bitmaps=100)", "bitmaps", 100, 0.78},
	} {
		fn := p4test.Parse(t, c.expr)
		r := p4test.Run(t, fn, ps)
		r.SamePasses(t, ps)
		r.SameModel(t)
		p4s, user := r.P4.(functions.Summarizer).Summary(), r.User.(functions.Summarizer).Summary()
		if p4s["nokey"] != user["nokey"] {
			t.Errorf("%s: nokey %v on the switch, %v in userspace", c.expr, p4s["nokey"], user["nokey"])
		}
		counts, _, _ := exact(fn, ps)
		n, est, m := float64(len(counts)), p4s["estimate"].(float64), float64(p4s[c.m].(int))
		if m < c.asked || math.Abs(est-n) > 3*c.c/math.Sqrt(m)*n {
			t.Errorf("%s: estimate %v of %v distinct keys with m = %v", c.expr, est, n, m)
		}
		t.Logf("%s: %v distinct, estimate %v (userspace %v)", c.expr, n, est, user["estimate"])
	}
}

// cms and hll with window= on a switch: each window the switch measures
// holds what the Go half computes on its packets (and total and nokey
// are userspace's when the switch measured the whole window); after an
// idle window the first packets of the next clear its half.
func TestP4SketchWindows(t *testing.T) {
	ps := p4test.Trace(gen.Config{Seed: 8, Packets: 7000, Malformed: 0.05, VLAN: 0.2, IPv6: 0.3, Flows: 500})
	ps = p4test.WithGap(ps, 10, 2)
	for _, expr := range []string{"(cms,key=5tuple,width=256,depth=3,window=1024us)", "(hll,key=dstip,precision=8,window=1024us)"} {
		fn := p4test.Parse(t, expr)
		p4test.CheckWindows(t, fn, ps, 10, func(p4, user map[string]any) error {
			for _, f := range []string{"total", "nokey"} {
				if p4[f] != user[f] {
					return fmt.Errorf("%s: %s %v on the switch, %v in userspace", expr, f, p4[f], user[f])
				}
			}
			return nil
		})
	}
}

// A window that is not a power of two of the switch's µs clock stays
// above the switch, with the nearest that runs there in the reason.
func TestP4WindowRefused(t *testing.T) {
	fn := p4test.Parse(t, "(cms,window=1ms)")
	_, err := fn.P4("f#1")
	if err == nil || !strings.Contains(err.Error(), "window=512µs or 1.024ms") {
		t.Errorf("window=1ms on a switch: %v", err)
	}
}

// bloom on a switch keeps the cells its Go half computes, passes what it
// passes (pass=new: a key's first packet, pass=member: the others), never
// forgets a key, and its false positives stay within 1.5× of
// (1 − e^(−kn/m))^k.
func TestP4BloomEqualsGoAndHoldsItsBound(t *testing.T) {
	ps := p4test.Trace(gen.Config{Seed: 4, Packets: 8000, Malformed: 0.05, VLAN: 0.1, IPv6: 0.3, Flows: 3000})
	for _, expr := range []string{"(bloom,key=5tuple,bits=4K,hashes=3)", "(bloom,key=dstip,bits=1000,hashes=2,pass=member)", "(bloom,key=srcport,pass=all)"} {
		fn := p4test.Parse(t, expr)
		r := p4test.Run(t, fn, ps)
		r.SameModel(t)
		r.SameModelPasses(t, ps)
		if fn.Params.Str("pass") == "all" {
			r.SamePasses(t, ps)
		}
		p4s, user := r.P4.(functions.Summarizer).Summary(), r.User.(functions.Summarizer).Summary()
		if p4s["nokey"] != user["nokey"] {
			t.Errorf("%s: nokey %v on the switch, %v in userspace", expr, p4s["nokey"], user["nokey"])
		}
		counts, first, _ := exact(fn, ps)
		rd, err := r.P4.(functions.Readable).Read("member")
		if err != nil {
			t.Fatal(err)
		}
		for k := range counts {
			if p4test.Read(rd, first[k]) != 1 {
				t.Fatalf("%s: a key the switch inserted is not a member", expr)
			}
		}
		// False positives: the keys of another trace that are not members.
		others := p4test.Trace(gen.Config{Seed: 99, Packets: 4000, Flows: 4000})
		fp, tested := 0, 0
		sp := measure.Spec(fn.Params)
		for _, p := range others {
			var k flowkey.Key
			if !sp.Extract(functions.LinkEthernet, p.Data, &k) || counts[k] > 0 {
				continue
			}
			tested++
			if p4test.Read(rd, p.Data) == 1 {
				fp++
			}
		}
		kk, bits := int(fn.Params.Int("hashes")), functions.FieldOf(r.P4.(functions.Stateful).MBuf(), "cells").Count
		want := sketch.BloomFalsePositive(bits, kk, len(counts))
		if tested < 500 || float64(fp)/float64(tested) > 1.5*want+3*math.Sqrt(want/float64(tested)) {
			t.Errorf("%s: %d false positives of %d keys, theory %.4f", expr, fp, tested, want)
		}
		t.Logf("%s: %d keys; %d false positives of %d (theory %.4f)", expr, len(counts), fp, tested, want)
	}
}

// store on a switch keeps the cells its Go half computes with the
// switch's positions, passes what it passes (pass=new: a change, pass=old:
// none), and counts the same changes, missing and nokey.
func TestP4StoreEqualsGo(t *testing.T) {
	ps := p4test.Trace(gen.Config{Seed: 6, Packets: 5000, Malformed: 0.05, VLAN: 0.1, IPv6: 0.3, Flows: 300})
	ps = append(ps, p4test.Packets(p4test.Cuts(p4test.Adversarial()[:40]))...)
	for _, expr := range []string{"(store,value=\"ipv4.id & 8\",pass=new)", "(store,key=dstip,value=ipv4.ttl,width=64,depth=2,pass=old)", "(store,key=srcport,value=ipv4.tos)"} {
		fn := p4test.Parse(t, expr)
		r := p4test.Run(t, fn, ps)
		r.SameModel(t)
		r.SameModelPasses(t, ps)
		if fn.Params.Str("pass") == "all" {
			r.SamePasses(t, ps)
		}
		p4s, model := r.P4.(functions.Summarizer).Summary(), r.Model.(functions.Summarizer).Summary()
		for _, f := range []string{"changes", "missing", "nokey"} {
			if fmt.Sprint(p4s[f]) != fmt.Sprint(model[f]) {
				t.Errorf("%s: %s is %v on the switch, %v in its Go half", expr, f, p4s[f], model[f])
			}
		}
		t.Logf("%s: %v changes", expr, p4s["changes"])
	}
}

// cms value= an expression on a switch adds the same numbers to the same
// rows as its Go half, and totals them as userspace does.
func TestP4CMSValueExpr(t *testing.T) {
	ps := p4test.Trace(gen.Config{Seed: 7, Packets: 4000, Malformed: 0.05, VLAN: 0.1, IPv6: 0.3, Flows: 500})
	fn := p4test.Parse(t, "(cms,key=5tuple,value=ipv4.ttl,width=128,depth=2)")
	r := p4test.Run(t, fn, ps)
	r.SameModel(t)
	r.SamePasses(t, ps)
	p4s, user := r.P4.(functions.Summarizer).Summary(), r.User.(functions.Summarizer).Summary()
	if p4s["total"] != user["total"] || p4s["total"] == uint64(0) {
		t.Errorf("total %v on the switch, %v in userspace", p4s["total"], user["total"])
	}
}

// With hash=switch, a function in userspace keeps what it keeps on a
// switch, byte for byte (the same layout and positions), and passes the
// same packets; with the default hash its state is its own.
func TestHashSwitchInUserspaceIsTheSwitch(t *testing.T) {
	ps := p4test.Trace(gen.Config{Seed: 23, Packets: 4000, Malformed: 0.05, VLAN: 0.2, IPv6: 0.3, Flows: 500})
	ps = append(ps, p4test.Packets(p4test.Cuts(p4test.Adversarial()[:40]))...)
	for _, expr := range []string{
		"(cms,key=5tuple,width=256,depth=4,value=bytes%s)",
		"(cms,key=srcip,width=100,depth=3%s)",
		"(bloom,key=5tuple,bits=64,hashes=4%s)",
		"(hll,key=dstip,precision=8%s)",
		"(pcsa,key=5tuple,bitmaps=100%s)",
		"(store,key=5tuple,value=ipv4.id,pass=new%s)",
	} {
		r := p4test.Run(t, p4test.Parse(t, fmt.Sprintf(expr, ",hash=switch")), ps)
		r.SamePasses(t, ps)
		got, want := r.User.(functions.Stateful).MBuf(), r.P4.(functions.Stateful).MBuf()
		if !bytes.Equal(got.Bytes(), want.Bytes()) || len(got.Fields()) != len(want.Fields()) {
			t.Fatalf("%s: userspace's state differs from the switch's", expr)
		}
		own := p4test.Run(t, p4test.Parse(t, fmt.Sprintf(expr, "")), ps)
		if m := own.User.(functions.Stateful).MBuf(); bytes.Equal(m.Bytes(), want.Bytes()) {
			t.Fatalf("%s: without hash=switch userspace keeps the switch's state too", expr)
		}
	}
}

// hash=switch runs in userspace and on a switch, without the window and
// reports that only a switch's incremental reset or the host's hash keep.
func TestHashSwitchRefusals(t *testing.T) {
	for _, tc := range []struct {
		expr   string
		target functions.Target
		want   string
	}{
		{"(cms,hash=switch)", functions.TargetXDP, "eBPF positions keys by flowkey's hash"},
		{"(bloom,hash=switch)", functions.TargetKernel, "eBPF positions keys by flowkey's hash"},
		{"(hll,hash=switch,window=1s)", functions.TargetUser, "window= with hash=switch runs on a switch"},
		{"(cms,hash=switch,report=5)", functions.TargetUser, "report= with hash=switch"},
		{"(bloom,hash=switch,counting=true)", functions.TargetUser, "hash=switch: a counting Bloom filter"},
		{"(store,value=ipv4.id,hash=switch,window=1s)", functions.TargetUser, "window= with hash=switch"},
	} {
		fn := p4test.Parse(t, tc.expr)
		err := fn.Class.Runs(tc.target, fn.Params)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s in %s: %v, want %q", tc.expr, tc.target, err, tc.want)
		}
	}
	for _, expr := range []string{"(cms,hash=switch)", "(hll,hash=switch)", "(pcsa,hash=switch)", "(bloom,hash=switch)"} {
		fn := p4test.Parse(t, expr)
		for _, tg := range []functions.Target{functions.TargetUser, functions.TargetP4} {
			if err := fn.Class.Runs(tg, fn.Params); err != nil {
				t.Errorf("%s in %s: %v", expr, tg, err)
			}
		}
	}
}
