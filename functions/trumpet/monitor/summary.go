package monitor

// Summaries. Phase 1 can run below the monitor, in eBPF: per packet, the
// flow's 5-tuple and a per-CPU summary of the epoch (packets, the volume,
// TTL and CE marks with their sums, sums of squares, minima and maxima,
// the wire bytes), merged over the CPUs when the epoch has ended. The
// summary of a flow then stands for its packets: Summarise looks the flow
// up (a new one is matched against the trigger index, one back after an
// idle epoch is reset, as a packet's flow is) and fills the summary words
// its triggers need, so that the sweep reports what the packets would
// have given. Only events whose aggregates read count(), volume, ecn and
// ttl can run on summaries (Summarisable): the other variables need the
// order and times of a flow's packets, and TCP state that outlives an
// epoch, which per-CPU copies cannot keep.

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/ffpf-go/ffpf/functions/trumpet/event"
)

// Summary is what a flow's packets of one epoch give the summarisable
// variables: counts, sums, sums of squares, minima and maxima, the values
// a packet gives as Parse reads it (Volume is Packet.Payload, TTL the TTL
// or hop limit, CE the packets whose ECN field is 3).
type Summary struct {
	Packets                       uint64
	VolSum, VolSq, VolMin, VolMax uint64
	CE                            uint64
	TTLSum, TTLSq, TTLMin, TTLMax uint64
	Bytes                         uint64 // on the wire
}

// Add adds a packet to the summary.
func (s *Summary) Add(p *Packet) {
	if s.Packets == 0 {
		s.VolMin, s.TTLMin = math.MaxUint64, math.MaxUint64
	}
	s.Packets++
	v, t := uint64(p.Payload), uint64(p.TTL)
	s.VolSum += v
	s.VolSq += v * v
	s.VolMin, s.VolMax = min(s.VolMin, v), max(s.VolMax, v)
	if p.ECN == 3 {
		s.CE++
	}
	s.TTLSum += t
	s.TTLSq += t * t
	s.TTLMin, s.TTLMax = min(s.TTLMin, t), max(s.TTLMax, t)
	s.Bytes += uint64(p.WireLen)
}

// Merge adds o (the same flow and epoch, another CPU) into s.
func (s *Summary) Merge(o *Summary) {
	if o.Packets == 0 {
		return
	}
	if s.Packets == 0 {
		*s = *o
		return
	}
	s.Packets += o.Packets
	s.VolSum += o.VolSum
	s.VolSq += o.VolSq
	s.VolMin, s.VolMax = min(s.VolMin, o.VolMin), max(s.VolMax, o.VolMax)
	s.CE += o.CE
	s.TTLSum += o.TTLSum
	s.TTLSq += o.TTLSq
	s.TTLMin, s.TTLMax = min(s.TTLMin, o.TTLMin), max(s.TTLMax, o.TTLMax)
	s.Bytes += o.Bytes
}

// Summarisable says whether an event can be evaluated on summaries: every
// aggregate of its predicate is count() or an aggregate of volume, ecn or
// ttl. The error names the event and the variable that cannot.
func Summarisable(ev *event.Event) error {
	for _, a := range event.Aggregates(ev.Predicate) {
		switch {
		case a.Func == "":
			name := a.Var
			if aggPrev(a) {
				name += "_lastepoch"
			}
			return fmt.Errorf("event %s reads %s, a flow's TCP state over its packets in order, which per-CPU summaries cannot keep", ev.Name, name)
		case aggAnd(a) != "":
			return fmt.Errorf("event %s reads %s & %s, a product per packet, which per-CPU summaries cannot keep", ev.Name, a.Var, aggAnd(a))
		case a.Var == "" || a.Var == "volume" || a.Var == "ecn" || a.Var == "ttl":
		default:
			return fmt.Errorf("event %s reads %s, which needs per-flow TCP or timing state (the order and times of its packets) that per-CPU summaries cannot keep", ev.Name, a.Var)
		}
	}
	return nil
}

// Summarise adds flow k's summary of the current epoch, as its packets
// would have been added: the flow is looked up, and inserted and matched
// when new (when the full table has no room its packets count as
// overflow), reset when back after an idle epoch; then the summary words
// its triggers need are filled from s. A flow whose triggers need a
// variable s does not give (one Summarisable refuses) gets no value of
// it. The filter table (Config.DoS) needs the packets at hand: a monitor
// fed summaries admits every flow.
func (m *Monitor) Summarise(k *Key, s *Summary) {
	if s.Packets == 0 {
		return
	}
	m.Stats.Packets += s.Packets
	m.lastIdx = -1 // the lookup cache is Process's
	h := k.hash()
	idx := m.ft.find(k, h)
	fresh := idx < 0
	if fresh {
		idx = m.ft.insert(k, h)
		if idx < 0 && m.evict() {
			idx = m.ft.insert(k, h)
		}
		if idx < 0 {
			m.Stats.Overflow += s.Packets
			return
		}
		m.Stats.NewFlows++
		m.setup(idx)
	}
	f := &m.ft.pool[idx]
	if f.last != m.cur || fresh {
		if m.dead(f) {
			m.reset(idx)
		}
		f.last = m.cur
	}
	if f.units == 0 {
		return
	}
	w := m.epochWords(f, idx)
	n := float64(s.Packets)
	i := 0
	for u := f.units; u != 0; u &= u - 1 {
		k := bits.TrailingZeros64(u)
		if k == unitCount {
			w[i] += n
			i++
			continue
		}
		d := units[k]
		var sum, sq, lo, hi float64
		switch int(d.v) {
		case VVolume:
			sum, sq, lo, hi = float64(s.VolSum), float64(s.VolSq), float64(s.VolMin), float64(s.VolMax)
		case VTTL:
			sum, sq, lo, hi = float64(s.TTLSum), float64(s.TTLSq), float64(s.TTLMin), float64(s.TTLMax)
		case VECN:
			sum = float64(s.CE)
		default:
			i++
			continue
		}
		switch d.s {
		case sN:
			w[i] += n
		case sSum:
			w[i] += sum
		case sSq:
			w[i] += sq
		case sMin:
			w[i] = min(w[i], lo)
		case sMax:
			w[i] = max(w[i], hi)
		}
		i++
	}
}
