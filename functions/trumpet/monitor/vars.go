package monitor

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/ffpf-go/ffpf/functions/trumpet/event"
)

// Table 1's variables, by index; then the products of two flags (an
// aggregate's "is_lost & is_burst"); then the flow state a predicate reads
// bare (ack, seq, dup and their _lastepoch).
const (
	VVolume = iota
	VECN
	VRwnd
	VTTL
	VRTT
	VLost
	VBurst
	VAck
	VSeq
	VDup
	NVars
	VECNLost = iota - 1 // ecn & is_lost
	VECNBurst
	VLostBurst
	SAck // the flow's latest ack
	SSeq // its highest sequence number
	SDup // its dup estimate
	nValues
)

// VarNames are the variables as an event names them, by index.
var VarNames = [NVars]string{"volume", "ecn", "rwnd", "ttl", "rtt", "is_lost", "is_burst", "ack", "seq", "dup"}

// VarIndex returns the index of a variable, or -1.
func VarIndex(name string) int {
	for i, n := range VarNames {
		if n == name {
			return i
		}
	}
	return -1
}

func isFlag(v int) bool { return v == VECN || v == VLost || v == VBurst }

// pairOf is the product value of two flags, or -1.
func pairOf(a, b int) int {
	if a > b {
		a, b = b, a
	}
	switch {
	case a == VECN && b == VLost:
		return VECNLost
	case a == VECN && b == VBurst:
		return VECNBurst
	case a == VLost && b == VBurst:
		return VLostBurst
	}
	return -1
}

// A summary is kept as units: one float64 word each. Unit 0 counts the
// packets. A variable that is not a flag has five: how many packets
// defined it, their sum, sum of squares, minimum and maximum; a flag (and a
// product of flags) two, the count and the sum, from which every aggregate
// of 0/1 values follows; a state variable two, its value after the epoch's
// last packet and its value before the epoch's first. A flow keeps only
// the units some trigger it matched needs, packed in unit order.
const (
	sN = iota
	sSum
	sSq
	sMin
	sMax
	sLast
	sPrev
	nStats
)

var (
	units   []struct{ v, s int8 }
	unitOf  [nValues][nStats]int8
	nUnits  int
	flagVal [nValues]bool
)

const unitCount = 0

func init() {
	for v := range unitOf {
		for s := range unitOf[v] {
			unitOf[v][s] = -1
		}
	}
	add := func(v int, ss ...int) {
		for _, s := range ss {
			unitOf[v][s] = int8(len(units))
			units = append(units, struct{ v, s int8 }{int8(v), int8(s)})
		}
	}
	units = append(units, struct{ v, s int8 }{-1, -1}) // the count
	for v := range nValues {
		switch {
		case v < NVars && !isFlag(v):
			add(v, sN, sSum, sSq, sMin, sMax)
		case v < SAck:
			flagVal[v] = true
			add(v, sN, sSum)
		default:
			add(v, sLast, sPrev)
		}
	}
	nUnits = len(units)
	if nUnits != MaxUnits {
		panic("monitor: MaxUnits is not the number of summary units")
	}
	unitsVolume = 1 << unitOf[VVolume][sSum]
	unitsCountVolume = 1<<unitCount | unitsVolume
}

// MaxUnits is the most summary words a flow keeps per epoch: every unit.
const MaxUnits = 54

// aggSpec is an aggregate resolved to the value it reads.
func aggSpec(a event.Agg) (v int, err error) {
	if a.Func == "" {
		switch a.Var {
		case "ack":
			return SAck, nil
		case "seq":
			return SSeq, nil
		case "dup":
			return SDup, nil
		}
		return 0, fmt.Errorf("%s is not a state variable (ack, seq, dup)", a.Var)
	}
	if a.Func == "count" && a.Var == "" {
		return -1, nil
	}
	v = VarIndex(a.Var)
	if v < 0 {
		return 0, fmt.Errorf("unknown variable %q", a.Var)
	}
	if aggAnd(a) != "" {
		w := VarIndex(aggAnd(a))
		if w < 0 || !isFlag(v) || !isFlag(w) || v == w {
			return 0, fmt.Errorf("%s & %s: & joins two different flags (ecn, is_lost, is_burst)", a.Var, aggAnd(a))
		}
		v = pairOf(v, w)
	}
	switch a.Func {
	case "sum", "count", "avg", "stddev", "min", "max":
		return v, nil
	}
	return 0, fmt.Errorf("unknown aggregate %s", a.Func)
}

// aggUnits is the mask of the units an aggregate reads.
func aggUnits(a event.Agg) (uint64, error) {
	v, err := aggSpec(a)
	if err != nil {
		return 0, err
	}
	b := func(ss ...int) uint64 {
		var m uint64
		for _, s := range ss {
			m |= 1 << unitOf[v][s]
		}
		return m
	}
	switch {
	case v < 0:
		return 1 << unitCount, nil
	case v >= SAck && aggPrev(a):
		return b(sPrev), nil
	case v >= SAck:
		return b(sLast), nil
	case flagVal[v]:
		if a.Func == "sum" {
			return b(sSum), nil
		}
		return b(sN, sSum), nil
	}
	switch a.Func {
	case "sum":
		return b(sSum), nil
	case "count":
		return b(sN), nil
	case "avg":
		return b(sN, sSum), nil
	case "stddev":
		return b(sN, sSum, sSq), nil
	case "min":
		return b(sN, sMin), nil
	default: // max
		return b(sN, sMax), nil
	}
}

// aggValue computes an aggregate from the words w of the units in mask
// (packed in unit order). An aggregate of no sample is 0 for sum and
// count, NaN (undefined: comparisons with it are false) for the others,
// and so is a state variable the flow has not had.
func aggValue(a event.Agg, v int, mask uint64, w []float64) float64 {
	at := func(u int8) float64 { return w[bits.OnesCount64(mask&(1<<u-1))] }
	if v < 0 {
		return at(unitCount)
	}
	if v >= SAck {
		s := sLast
		if aggPrev(a) {
			s = sPrev
		}
		x := at(unitOf[v][s])
		if math.IsInf(x, 1) {
			return math.NaN()
		}
		return x
	}
	if a.Func == "sum" {
		return at(unitOf[v][sSum])
	}
	n := at(unitOf[v][sN])
	if a.Func == "count" {
		return n
	}
	if n == 0 {
		return math.NaN()
	}
	sum := at(unitOf[v][sSum])
	if flagVal[v] {
		switch a.Func {
		case "avg":
			return sum / n
		case "stddev":
			p := sum / n
			return math.Sqrt(max(p-p*p, 0))
		case "min":
			return truth(sum == n)
		default:
			return truth(sum > 0)
		}
	}
	switch a.Func {
	case "avg":
		return sum / n
	case "stddev":
		m := sum / n
		return math.Sqrt(max(at(unitOf[v][sSq])/n-m*m, 0))
	case "min":
		return at(unitOf[v][sMin])
	default:
		return at(unitOf[v][sMax])
	}
}

func truth(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// resetUnits empties the words of the units in mask: a bucket's or an
// epoch's start. A state's last value is NaN (not seen); its previous
// value is +Inf, "not taken yet", which the first epoch merged replaces.
func resetUnits(mask uint64, w []float64) {
	i := 0
	for m := mask; m != 0; m &= m - 1 {
		switch units[bits.TrailingZeros64(m)].s {
		case sMin, sPrev:
			w[i] = math.Inf(1)
		case sMax:
			w[i] = math.Inf(-1)
		case sLast:
			w[i] = math.NaN()
		default:
			w[i] = 0
		}
		i++
	}
}

// mergeUnits adds the words src (units srcMask) of a later epoch into dst
// (units dstMask ⊆ srcMask): counts and sums add, minima and maxima
// combine, a state's last value is the later one seen, its previous value
// the earlier one.
func mergeUnits(dstMask uint64, dst []float64, srcMask uint64, src []float64) {
	i := 0
	for m := dstMask; m != 0; m &= m - 1 {
		u := bits.TrailingZeros64(m)
		x := src[bits.OnesCount64(srcMask&(1<<u-1))]
		switch units[u].s {
		case sMin:
			dst[i] = min(dst[i], x)
		case sMax:
			dst[i] = max(dst[i], x)
		case sLast:
			if x == x {
				dst[i] = x
			}
		case sPrev:
			if math.IsInf(dst[i], 1) {
				dst[i] = x
			}
		default:
			dst[i] += x
		}
		i++
	}
}

// varsOf is the mask of the values computed for units mask.
func varsOf(mask uint64) uint32 {
	var v uint32
	for m := mask &^ 1; m != 0; m &= m - 1 {
		v |= 1 << units[bits.TrailingZeros64(m)].v
	}
	return v
}

// relayout moves words w of units old into the packing of units new (old ⊆
// new), emptying the new units.
func relayout(old, new uint64, w []float64) {
	var tmp [MaxUnits]float64
	copy(tmp[:], w[:bits.OnesCount64(old)])
	resetUnits(new, w)
	i := 0
	for m := new; m != 0; m &= m - 1 {
		u := bits.TrailingZeros64(m)
		if old&(1<<u) != 0 {
			w[i] = tmp[bits.OnesCount64(old&(1<<u-1))]
		}
		i++
	}
}
