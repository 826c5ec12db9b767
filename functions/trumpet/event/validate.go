package event

import (
	"math"
	"net/netip"
	"time"
)

// DefaultEpoch is the epoch when none is given: 10 ms, the paper's smallest
// T (§5.5) and the reference monitor's default sweep period
// (receiver/basicfwd.c: g.reportinterval = 10, in ms; the controller's
// EPOCH_NS 10000000 in controller/eventhandler.h).
const DefaultEpoch = 10 * time.Millisecond

// MinEpoch is the shortest epoch a monitor sweeps: the trumpet class and
// ffpf trumpet check both refuse a shorter one (CheckEpoch).
const MinEpoch = 100 * time.Microsecond

// CheckEpoch refuses an epoch shorter than MinEpoch.
func CheckEpoch(epoch time.Duration) error {
	if epoch < MinEpoch {
		return errorf("an epoch is at least %s, not %s", IntervalString(MinEpoch), IntervalString(epoch))
	}
	return nil
}

// Validate checks an event as the monitor will run it with the given epoch:
// every name it uses is known, its filter can match a packet, its
// granularity is no coarser than its filter can give, its predicate reads
// some variable, and its interval is a positive multiple of the epoch.
// Errors carry ev.Pos.
func Validate(ev Event, epoch time.Duration) error {
	if err := check(ev); err != nil {
		return at(ev.Pos, err)
	}
	if epoch <= 0 {
		return at(ev.Pos, errorf("event %s: the epoch %s is not positive", ev.Name, epoch))
	}
	if ev.Interval%epoch != 0 {
		return at(ev.Pos, inPart("interval", errorf("event %s: interval %s is not a multiple of the %s epoch; try %s",
			ev.Name, IntervalString(ev.Interval), IntervalString(epoch), IntervalString(roundUp(ev.Interval, epoch)))))
	}
	return nil
}

func roundUp(d, epoch time.Duration) time.Duration {
	if d > math.MaxInt64-epoch {
		return d / epoch * epoch
	}
	return (d + epoch - 1) / epoch * epoch
}

// ValidateAll validates each event and refuses a name defined twice.
func ValidateAll(evs []Event, epoch time.Duration) error {
	first := map[string]Pos{}
	for _, ev := range evs {
		if err := Validate(ev, epoch); err != nil {
			return err
		}
		if p, dup := first[ev.Name]; dup {
			return at(ev.Pos, errorf("event %s is defined twice (first at %s)", ev.Name, p))
		}
		first[ev.Name] = ev.Pos
	}
	return nil
}

// check is Validate without the epoch: what ParseLine can tell alone.
func check(ev Event) error {
	if err := checkName(ev.Name); err != nil {
		return err
	}
	if len(ev.Filters) == 0 {
		return errorf("event %s has no filter (write * for every packet)", ev.Name)
	}
	for _, f := range ev.Filters {
		if p := f.SrcIP; p.IsValid() && p.Masked() != p {
			return inPart("filter", errorf("event %s: filter srcip=%s has bits set past its prefix length", ev.Name, p))
		}
		if p := f.DstIP; p.IsValid() && p.Masked() != p {
			return inPart("filter", errorf("event %s: filter dstip=%s has bits set past its prefix length", ev.Name, p))
		}
		if err := checkFilter(f); err != nil {
			return inPart("filter", errorf("event %s: %s", ev.Name, msg(err)))
		}
	}
	if ev.Predicate == nil {
		return errorf("event %s has no predicate", ev.Name)
	}
	if err := checkExpr(ev.Predicate, 0); err != nil {
		return inPart("predicate", errorf("event %s: %s", ev.Name, msg(err)))
	}
	aggs := Aggregates(ev.Predicate)
	if len(aggs) == 0 {
		return inPart("predicate", errorf("event %s: predicate %s reads no variable, so it is the same in every interval", ev.Name, ExprString(ev.Predicate)))
	}
	if len(ev.Granularity) > 0 {
		for _, a := range aggs {
			if a.Func == "" {
				return inPart("granularity", errorf("event %s: %s is one flow's state, so it needs the 5-tuple granularity, not %s",
					ev.Name, a, GranularityString(ev.Granularity)))
			}
		}
	}
	if err := checkGranularity(ev); err != nil {
		return inPart("granularity", errorf("event %s: %s", ev.Name, msg(err)))
	}
	if ev.Interval <= 0 {
		return inPart("interval", errorf("event %s: interval %s must be positive", ev.Name, ev.Interval))
	}
	return nil
}

func checkExpr(e Expr, depth int) error {
	if depth > maxDepth {
		return errorf("predicate is nested deeper than %d", maxDepth)
	}
	switch e := e.(type) {
	case Num:
		if math.IsNaN(float64(e)) || math.IsInf(float64(e), 0) {
			return errorf("predicate holds %v, which is not a finite number", float64(e))
		}
	case Agg:
		return checkAgg(e)
	case Binary:
		if prec(e.Op) == 6 {
			return errorf("unknown operator %q", e.Op)
		}
		if e.L == nil || e.R == nil {
			return errorf("operator %s lacks an operand", e.Op)
		}
		if err := checkExpr(e.L, depth+1); err != nil {
			return err
		}
		return checkExpr(e.R, depth+1)
	default:
		return errorf("predicate holds an expression of an unknown kind")
	}
	return nil
}

// checkGranularity refuses unknown or repeated fields and a granularity
// coarser than a filter can give. A filter fixes the first N bits of an
// address (dstip=10.0.128.0/24 fixes 24); a granularity keeping fewer bits
// (dstip/16) would name buckets (10.0.0.0/16) that hold only what the filter
// passes (10.0.128.0/24), so every report would claim a wider range than it
// measured. The reference monitor widens such a granularity to the filter's
// mask (controller/usecase.c: e->fgmask.dstip |= e->mask.dstip;
// receiver/triggertable2.c, fgcounter_trigger_init: f->dstip |=
// mask->dstip); we say so instead of changing the definition silently.
func checkGranularity(ev Event) error {
	seen := map[string]bool{}
	for _, g := range ev.Granularity {
		if fieldIndex(g.Name) < 0 {
			return unknown("granularity field", g.Name, FieldNames)
		}
		if seen[g.Name] {
			return errorf("granularity field %s is given twice", g.Name)
		}
		seen[g.Name] = true
		addr := g.Name == "srcip" || g.Name == "dstip"
		if !addr && g.Bits != 0 || addr && (g.Bits < 0 || g.Bits > WholeAddress) {
			return errorf("granularity field %s has a prefix length %d out of range", g.Name, g.Bits)
		}
		if !addr {
			continue
		}
		for _, f := range ev.Filters {
			p := f.SrcIP
			if g.Name == "dstip" {
				p = f.DstIP
			}
			if !p.IsValid() {
				continue
			}
			kept := g.Bits
			if p.Addr().Is4() {
				if kept > 32 && kept < WholeAddress {
					return errorf("granularity %s is longer than the filter's IPv4 address %s=%s; write %s or %s/32",
						g, g.Name, prefixString(p), g.Name, g.Name)
				}
				kept = min(kept, 32)
			}
			if p.Bits() > kept {
				return errorf("granularity %s is coarser than the filter %s=%s can give (a bucket would name %s but hold only %s); use %s/%d or finer",
					g, g.Name, prefixString(p), netip.PrefixFrom(p.Addr(), kept).Masked(), p, g.Name, p.Bits())
			}
		}
	}
	return nil
}
