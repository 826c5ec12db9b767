package gen

import (
	"encoding/binary"
	"math"
	"time"
)

// MaxFrameLen is the longest frame the generator writes: a 1514-byte
// Ethernet frame (1500-byte MTU, no FCS) plus a QinQ double tag.
const MaxFrameLen = 1522

// MinFrameLen is the length short frames are padded to (Ethernet's 64-byte
// minimum without the 4-byte FCS). Only adversarial frames are shorter.
const MinFrameLen = 60

// DefaultStart is the timestamp of the first packet when Config.Start is
// zero: fixed, so that a trace depends on its Config only.
var DefaultStart = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Defaults applied by New to zero fields of Config.
const (
	DefaultFlows = 10000
	DefaultRate  = 1e6
)

// Config describes a synthetic trace. The same Config always gives the same
// bytes.
type Config struct {
	Seed      uint64
	Packets   int64     // 0 = unlimited
	Malformed float64   // fraction of adversarial frames (0..1)
	VLAN      float64   // fraction of 802.1Q-tagged frames (a fifth of them QinQ)
	IPv6      float64   // fraction of IPv6 among IP packets
	Flows     int       // number of distinct flows (default 10000)
	Start     time.Time // timestamp of the first packet (default DefaultStart)
	Rate      float64   // packets per second of the timestamps (default 1e6)
}

// Generator produces the frames of one trace. It is not safe for concurrent
// use.
type Generator struct {
	cfg      Config
	rng      rng
	n        int64
	start    int64   // ns
	interval float64 // ns between packets
	jitter   uint32  // < interval, ns

	malThresh uint64 // P(malformed) scaled to 2^64

	flows []flow
	prob  []uint32 // alias table: P(keep i) scaled to 2^32
	alias []uint32

	pat  [patLen + patSlack]byte // payload bytes
	psum [(patLen+patSlack)/2 + 1]uint64
	// scratch holds a frame when the caller's buffer is shorter than it.
	scratch [MaxFrameLen]byte
}

const (
	patLen   = 1 << 16
	patSlack = 2048
)

// New returns a generator for cfg, filling zero fields with defaults.
// All the memory the generator needs is allocated here.
func New(cfg Config) *Generator {
	if cfg.Flows <= 0 {
		cfg.Flows = DefaultFlows
	}
	if cfg.Start.IsZero() {
		cfg.Start = DefaultStart
	}
	if !(cfg.Rate > 0) || math.IsInf(cfg.Rate, 0) {
		cfg.Rate = DefaultRate
	}
	cfg.Malformed = clamp01(cfg.Malformed)
	cfg.VLAN = clamp01(cfg.VLAN)
	cfg.IPv6 = clamp01(cfg.IPv6)
	g := &Generator{cfg: cfg, rng: rng{cfg.Seed ^ 0x6666_7066_2d67_656e}}
	g.start = cfg.Start.UnixNano()
	g.interval = 1e9 / cfg.Rate
	if g.interval >= 2 {
		g.jitter = uint32(min(g.interval, 1<<31))
	}
	g.malThresh = fracThreshold(cfg.Malformed)
	for i := range g.pat {
		if i%8 == 0 {
			binary.LittleEndian.PutUint64(g.pat[i:], g.rng.next())
		}
	}
	for i := 0; i+1 < len(g.pat); i += 2 {
		g.psum[i/2+1] = g.psum[i/2] + uint64(binary.BigEndian.Uint16(g.pat[i:]))
	}
	g.buildFlows()
	return g
}

// Config returns the configuration with defaults applied.
func (g *Generator) Config() Config { return g.cfg }

// Count returns how many packets Next has produced.
func (g *Generator) Count() int64 { return g.n }

func clamp01(f float64) float64 {
	if !(f > 0) {
		return 0
	}
	return min(f, 1)
}

// fracThreshold maps a probability to a threshold on a uniform uint64.
func fracThreshold(p float64) uint64 {
	if p >= 1 {
		return math.MaxUint64
	}
	return uint64(p * (1 << 64))
}

// Next writes the next frame into dst, truncated to len(dst), and returns
// the bytes written (capLen), the frame's full length (wireLen) and its
// timestamp in nanoseconds since the Unix epoch. ok is false once
// Config.Packets frames have been produced. Next does not allocate.
func (g *Generator) Next(dst []byte) (capLen, wireLen int, ts int64, ok bool) {
	if g.cfg.Packets > 0 && g.n >= g.cfg.Packets {
		return 0, 0, 0, false
	}
	buf := dst
	if len(buf) < MaxFrameLen {
		buf = g.scratch[:]
	}
	i := g.n
	g.n++
	ts = g.start + int64(float64(i)*g.interval)
	if g.jitter != 0 {
		ts += int64(g.rng.intn(g.jitter))
	}
	f := &g.flows[g.pick()]
	if g.malThresh != 0 && g.rng.next() < g.malThresh {
		wireLen, capLen = g.malformed(buf, f)
	} else {
		wireLen = g.emit(buf, f)
		capLen = wireLen
	}
	capLen = min(capLen, len(dst))
	if len(dst) < MaxFrameLen {
		copy(dst, buf[:capLen])
	}
	return capLen, wireLen, ts, true
}

// pick draws a flow index from the Zipf weights (Vose's alias method: one
// random number, no search).
func (g *Generator) pick() int {
	r := g.rng.next()
	i := uint32((r >> 32) * uint64(len(g.prob)) >> 32)
	if uint32(r) < g.prob[i] {
		return int(i)
	}
	return int(g.alias[i])
}

// rng is splitmix64: small state, fast, and good enough for traffic.
type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// intn returns a uniform value in [0, n).
func (r *rng) intn(n uint32) uint32 { return uint32((r.next() >> 32) * uint64(n) >> 32) }

// between returns a uniform value in [lo, hi].
func (r *rng) between(lo, hi int) int { return lo + int(r.intn(uint32(hi-lo+1))) }

// float returns a uniform value in [0, 1).
func (r *rng) float() float64 { return float64(r.next()>>11) * (1.0 / (1 << 53)) }
