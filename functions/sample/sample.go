// Package sample is the sample function class, MAFIA's Sample primitive:
// it passes a deterministic 1 in N of the packets that reach it, or each
// with probability P, and filters the others.
//
// Random sampling draws from a counter-based generator seeded by seed=:
// the number of the i-th packet the function sees is a hash of (seed, i),
// so a capture file gives the same sample on every run, whatever the
// batch size or the number of threads. The number is written as an
// annotation (readable as LABEL.rand, uniform in [0,1)) so a later
// function can sample the sample again without a second generator.
package sample

import (
	"errors"
	"fmt"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

var state = &functions.State{Fields: []functions.StateField{
	{Name: "seen", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum, Summary: "packets that reached the function"},
	{Name: "sampled", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum, Summary: "packets it passed"},
}}

func init() {
	functions.Register(&functions.Class{
		Name:      "sample",
		Readable:  func(p functions.Params) []string { return sampleReads(p.Has("every")) },
		Summary:   "pass 1 in N packets, or each with probability P from a seeded generator (MAFIA's Sample)",
		MinInputs: 1, MaxInputs: -1,
		Params: []functions.Param{
			{Name: "rate", Type: functions.Float, Summary: "pass each packet with this probability (0..1)",
				Check: func(v functions.Value) error {
					if !(v.Float >= 0 && v.Float <= 1) {
						return errors.New("rate is a probability, 0 to 1")
					}
					return nil
				}},
			{Name: "every", Type: functions.Int, Unit: "packets", Summary: "pass the 1st of every N packets",
				Check: func(v functions.Value) error {
					if v.Int < 1 {
						return errors.New("every is at least 1")
					}
					return nil
				}},
			{Name: "seed", Type: functions.Int, With: "rate", Summary: "seed of the generator (rate=; 1 when unset): the same seed gives the same sample; given, it keeps rate= in userspace"},
		},
		State:     state,
		Targets:   []functions.Target{functions.TargetUser, functions.TargetKernel, functions.TargetXDP, functions.TargetP4},
		Runs:      runs,
		Code:      functions.Codes(functions.EBPFCode(ebpfCode), functions.P4Code(p4Code)),
		Annotates: 1,
		Validate: func(ctx *functions.Context) error {
			if ctx.Params.Has("rate") == ctx.Params.Has("every") {
				return errors.New("sample takes one of rate=P (random) and every=N (deterministic)")
			}
			return nil
		},
		New: func(ctx *functions.Context) (functions.Function, error) { return New(ctx) },
	})
}

// Sample passes a sample of the packets.
type Sample struct {
	m       *buffers.MBuf
	seenOff int
	sampOff int
	at      int
	every   uint64 // 0: random
	rate    float64
	limit   uint64 // a packet is sampled when its number is below it
	all     bool   // rate=1
	seed    uint64
	n       uint64 // packets seen: the next packet's index
}

// New instantiates a sample function.
func New(ctx *functions.Context) (*Sample, error) {
	m, err := state.NewMBuf(functions.TargetUser, ctx.Params)
	if err != nil {
		return nil, err
	}
	s := &Sample{m: m, seenOff: functions.FieldOf(m, "seen").Offset, sampOff: functions.FieldOf(m, "sampled").Offset,
		at: ctx.Ann, every: uint64(ctx.Params.Int("every")), seed: 1}
	if ctx.Params.Has("seed") {
		s.seed = uint64(ctx.Params.Int("seed"))
	}
	if s.every == 0 {
		s.rate = ctx.Params.Float("rate")
		s.all = s.rate >= 1
		s.limit = uint64(s.rate * (1 << 64)) // rate < 1: below 2^64
	}
	return s, nil
}

// Draw is the random number of the packet with index i (from 0) of a
// function seeded with seed: splitmix64's output function on
// seed·φ + (i+1)·γ, a bijection of its input, so numbers of different
// packets are independent for a fixed seed.
func Draw(seed, i uint64) uint64 {
	z := seed*0xd1b54a32d192ed03 + (i+1)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// Process keeps the sampled entries, in order.
func (s *Sample) Process(b *buffers.Batch) {
	p, k := b.PBuf, 0
	for _, e := range b.E[:b.N] {
		i := s.n
		s.n++
		var keep bool
		if s.every > 0 {
			keep = i%s.every == 0
		} else {
			r := Draw(s.seed, i)
			p.Ann(e.Slot)[s.at] = r
			keep = s.all || r < s.limit
		}
		if keep {
			b.E[k] = e
			k++
		}
	}
	s.m.Add64(s.seenOff, uint64(b.N))
	s.m.Add64(s.sampOff, uint64(k))
	b.N = k
}

// MBuf implements functions.Stateful.
func (s *Sample) MBuf() *buffers.MBuf { return s.m }

// ReadNames implements functions.Readable.
func (s *Sample) ReadNames() []string { return sampleReads(s.every > 0) }

func sampleReads(every bool) []string {
	if every {
		return []string{"seen", "sampled"}
	}
	return []string{"rand", "seen", "sampled"}
}

// Read implements functions.Readable: rand, the packet's random number in
// [0,1) (rate= only), and the counts seen and sampled.
func (s *Sample) Read(name string) (functions.Reader, error) {
	switch name {
	case "rand":
		if s.every > 0 {
			return nil, errors.New("sample with every= draws no random number (rand is for rate=)")
		}
		at := s.at
		return func(p *buffers.PBuf, slot uint32) float64 { return float64(p.Ann(slot)[at]>>11) / (1 << 53) }, nil
	case "seen", "sampled":
		off := s.seenOff
		if name == "sampled" {
			off = s.sampOff
		}
		return func(*buffers.PBuf, uint32) float64 { return float64(s.m.Load64(off)) }, nil
	}
	return nil, fmt.Errorf("sample has no %q to read (it has %v)", name, s.ReadNames())
}

var (
	_ functions.Readable = (*Sample)(nil)
	_ functions.Stateful = (*Sample)(nil)
)
