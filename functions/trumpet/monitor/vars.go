package monitor

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/ffpf-go/ffpf/functions/trumpet/event"
)

// Table 1's variables, by index.
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

// A summary is kept as units: one float64 word each. Unit 0 counts the
// packets; each variable has five: how many packets defined it, their
// sum, sum of squares, minimum and maximum. A flow keeps only the units
// some trigger it matched needs, packed in unit order.
const (
	sN = iota
	sSum
	sSq
	sMin
	sMax
	nStats
)

const (
	unitCount = 0
	nUnits    = 1 + NVars*nStats // 51: a uint64 mask holds them
)

func unit(v, s int) int { return 1 + v*nStats + s }

// MaxUnits is the most summary words a flow keeps per epoch (and a trigger
// needs): every unit there is.
const MaxUnits = nUnits

// aggUnits is the mask of the units an aggregate reads.
func aggUnits(a event.Agg) (uint64, error) {
	if a.Func == "count" && a.Var == "" {
		return 1 << unitCount, nil
	}
	v := VarIndex(a.Var)
	if v < 0 {
		return 0, fmt.Errorf("unknown variable %q", a.Var)
	}
	b := func(s ...int) uint64 {
		var m uint64
		for _, s := range s {
			m |= 1 << unit(v, s)
		}
		return m
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
	case "max":
		return b(sN, sMax), nil
	}
	return 0, fmt.Errorf("unknown aggregate %s", a.Func)
}

// aggValue computes an aggregate from the words w of the units in mask
// (packed in unit order). An aggregate of no sample is 0 for sum and
// count, NaN (undefined: comparisons with it are false) for the others.
func aggValue(a event.Agg, mask uint64, w []float64) float64 {
	at := func(u int) float64 { return w[bits.OnesCount64(mask&(1<<u-1))] }
	if a.Var == "" {
		return at(unitCount)
	}
	v := VarIndex(a.Var)
	switch a.Func {
	case "sum":
		return at(unit(v, sSum))
	case "count":
		return at(unit(v, sN))
	}
	n := at(unit(v, sN))
	if n == 0 {
		return math.NaN()
	}
	switch a.Func {
	case "avg":
		return at(unit(v, sSum)) / n
	case "stddev":
		m := at(unit(v, sSum)) / n
		return math.Sqrt(max(at(unit(v, sSq))/n-m*m, 0))
	case "min":
		return at(unit(v, sMin))
	case "max":
		return at(unit(v, sMax))
	}
	return math.NaN()
}

// resetUnits empties the words of the units in mask.
func resetUnits(mask uint64, w []float64) {
	i := 0
	for m := mask; m != 0; m &= m - 1 {
		u := bits.TrailingZeros64(m)
		switch {
		case u > 0 && (u-1)%nStats == sMin:
			w[i] = math.Inf(1)
		case u > 0 && (u-1)%nStats == sMax:
			w[i] = math.Inf(-1)
		default:
			w[i] = 0
		}
		i++
	}
}

// mergeUnits adds the words src (units srcMask) into dst (units dstMask ⊆
// srcMask): counts and sums add, minima and maxima combine.
func mergeUnits(dstMask uint64, dst []float64, srcMask uint64, src []float64) {
	i := 0
	for m := dstMask; m != 0; m &= m - 1 {
		u := bits.TrailingZeros64(m)
		x := src[bits.OnesCount64(srcMask&(1<<u-1))]
		switch {
		case u > 0 && (u-1)%nStats == sMin:
			dst[i] = min(dst[i], x)
		case u > 0 && (u-1)%nStats == sMax:
			dst[i] = max(dst[i], x)
		default:
			dst[i] += x
		}
		i++
	}
}

// varsOf is the mask of the variables whose units are in mask.
func varsOf(mask uint64) uint16 {
	var v uint16
	for m := mask &^ 1; m != 0; m &= m - 1 {
		v |= 1 << ((bits.TrailingZeros64(m) - 1) / nStats)
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
