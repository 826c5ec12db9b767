package gen

import (
	"fmt"
	"io"
	"sync/atomic"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

func init() {
	functions.Register(&functions.Class{
		Name:    "gen",
		Summary: "synthetic traffic: a deterministic, realistic mix of Ethernet frames",
		Params: []functions.Param{
			{Name: "packets", Type: functions.Int, Default: "1M", Unit: "packets",
				Summary: "how many packets to generate (0: no end)", Check: nonNegative},
			{Name: "seed", Type: functions.Int, Default: "1",
				Summary: "random seed: the same parameters give the same packets"},
			{Name: "malformed", Type: functions.Float, Default: "0", Unit: "fraction",
				Summary: "fraction of adversarial frames (truncated, bogus lengths, fragments, runts…)", Check: fraction},
			{Name: "vlan", Type: functions.Float, Default: "0.05", Unit: "fraction",
				Summary: "fraction of 802.1Q-tagged frames (a fifth of them QinQ)", Check: fraction},
			{Name: "ipv6", Type: functions.Float, Default: "0.2", Unit: "fraction",
				Summary: "fraction of IPv6 among IP packets", Check: fraction},
			{Name: "flows", Type: functions.Int, Default: "10000", Unit: "flows",
				Summary: "number of distinct flows (a few carry most packets)", Check: flowCount},
		},
		Targets: []functions.Target{functions.TargetUser},
		// Validate reports the link type of the packets: Ethernet.
		Validate: func(ctx *functions.Context) error {
			ctx.LinkType = functions.LinkEthernet
			return nil
		},
		NewSource: newSource,
	})
}

func nonNegative(v functions.Value) error {
	if v.Int < 0 {
		return fmt.Errorf("%d is negative", v.Int)
	}
	return nil
}

func fraction(v functions.Value) error {
	if !(v.Float >= 0 && v.Float <= 1) {
		return fmt.Errorf("%g is not a fraction between 0 and 1", v.Float)
	}
	return nil
}

// MaxFlows bounds the flows parameter (the flow table is allocated at
// instantiation, about 130 bytes per flow).
const MaxFlows = 1 << 22

func flowCount(v functions.Value) error {
	if v.Int < 1 || v.Int > MaxFlows {
		return fmt.Errorf("%d flows is not between 1 and %d", v.Int, MaxFlows)
	}
	return nil
}

// ConfigFromParams returns the Config a gen function's parameters describe.
func ConfigFromParams(p functions.Params) Config {
	return Config{
		Seed:      uint64(p.Int("seed")),
		Packets:   p.Int("packets"),
		Malformed: p.Float("malformed"),
		VLAN:      p.Float("vlan"),
		IPv6:      p.Float("ipv6"),
		Flows:     int(p.Int("flows")),
	}
}

func newSource(ctx *functions.Context) (functions.Source, error) {
	return NewSource(ConfigFromParams(ctx.Params)), nil
}

// Source is the gen class's source function: it fills batches from a
// Generator.
type Source struct {
	g      *Generator
	total  int64
	done   atomic.Int64
	closed atomic.Bool
}

// NewSource returns a source that produces the trace cfg describes.
func NewSource(cfg Config) *Source {
	return &Source{g: New(cfg), total: cfg.Packets}
}

// Info describes the frames: Ethernet, at most MaxFrameLen bytes.
func (s *Source) Info() functions.SourceInfo {
	return functions.SourceInfo{Name: "gen", LinkType: functions.LinkEthernet, MaxCapLen: MaxFrameLen}
}

// Fill writes packets straight into the batch's PBuf slots. It returns
// io.EOF, with an empty batch, once all packets have been produced or the
// source is closed; it never returns an error together with packets.
func (s *Source) Fill(b *buffers.Batch) error {
	if s.closed.Load() {
		return io.EOF
	}
	n0, end := b.N, false
	for b.Room() > 0 {
		c, w, ts, ok := s.g.Next(b.NextSlot())
		if !ok {
			end = true
			break
		}
		b.Commit(uint32(c), uint32(w), ts)
	}
	s.done.Store(s.g.n)
	if end && b.N == n0 {
		return io.EOF
	}
	return nil
}

// Progress reports packets produced out of the total (0 when unlimited).
func (s *Source) Progress() (done, total int64) { return s.done.Load(), s.total }

// Close stops the source: the next Fill returns io.EOF.
func (s *Source) Close() error {
	s.closed.Store(true)
	return nil
}

var (
	_ functions.Source     = (*Source)(nil)
	_ functions.Progresser = (*Source)(nil)
)
