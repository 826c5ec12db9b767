package collector

// Ingest rates: the collector against a collector built on Go maps, in
// memory on one core, and over loopback UDP (scripts/bench.sh, section 10).

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ffpf-go/ffpf/functions/dta/wire"
)

// mapCollector is the collector a CPU would run without DTA's layout: a
// Go map per primitive, behind a lock (queries read while cores ingest),
// each report decoded and inserted one at a time.
type mapCollector struct {
	mu    sync.Mutex
	kw    map[uint32]uint32
	ki    map[uint32]uint64
	pc    map[uint32]*[MaxHops]uint32
	lists map[uint32][]uint32
	size  int
	n     uint64
}

func newMapCollector(size int) *mapCollector {
	return &mapCollector{kw: map[uint32]uint32{}, ki: map[uint32]uint64{}, pc: map[uint32]*[MaxHops]uint32{},
		lists: map[uint32][]uint32{}, size: size}
}

func (m *mapCollector) Ingest(r *wire.Report) {
	m.mu.Lock()
	switch r.Op {
	case wire.KeyWrite:
		m.kw[r.Key] = r.Data
	case wire.KeyIncrement:
		m.ki[r.Key] += r.Counter
	case wire.Postcarding:
		p := m.pc[r.Key]
		if p == nil {
			p = new([MaxHops]uint32)
			m.pc[r.Key] = p
		}
		p[r.Hop%MaxHops] = r.Data
	case wire.Append:
		l := m.lists[r.List]
		if len(l) == m.size { // a ring: the oldest entries go
			l = l[:0]
		}
		m.lists[r.List] = append(l, r.Data)
	}
	m.n++
	m.mu.Unlock()
}

func (m *mapCollector) IngestPayload(b []byte) Reason {
	var r wire.Report
	if why := decode(b, &r); why != 0 {
		return why
	}
	m.Ingest(&r)
	return 0
}

func (m *mapCollector) Flush()     {}
func (m *mapCollector) truncated() {}

// benchKeys is the keys of the benchmarks: 1M distinct keys in a random
// order, a working set at load 0.25 of 4M slots with N = 1 (0.5 with N = 2).
const benchKeys = 1 << 20

func benchReport(op wire.Opcode, i int) wire.Report {
	k := perm(uint32(i % benchKeys))
	switch op {
	case wire.KeyWrite:
		return wire.Report{Op: op, Redundancy: 2, Key: k, Data: uint32(i)}
	case wire.KeyIncrement:
		return wire.Report{Op: op, Redundancy: 2, Key: k, Counter: 1}
	case wire.Postcarding:
		return wire.Report{Op: op, Key: perm(uint32(i / 5 % benchKeys)), Hop: uint8(i % 5), Data: uint32(i) % (1 << 24)}
	}
	return wire.Report{Op: op, List: uint32(i % 16), Data: uint32(i)}
}

var benchConfig = Config{
	KeyWrite:     KeyWriteConfig{Slots: 4000000, Redundancy: 2},
	KeyIncrement: KeyIncrementConfig{Slots: 4000000, Redundancy: 2},
	Append:       AppendConfig{Lists: 16, Size: 1000000},
	Postcarding:  PostcardingConfig{Chunks: 1000000, Hops: 5},
}

func rate(b *testing.B, n int, unit string) {
	b.ReportMetric(float64(n)/b.Elapsed().Seconds()/1e6, unit)
}

// BenchmarkIngest is in-memory ingest on one core: decoded reports into
// the collector (Ingester.Ingest) and into the map collector, each with
// its working set in place before the clock starts.
func BenchmarkIngest(b *testing.B) {
	for _, op := range []wire.Opcode{wire.KeyWrite, wire.Append, wire.KeyIncrement, wire.Postcarding} {
		// A stream over the whole working set: every key once in 1M reports.
		reports := make([]wire.Report, benchKeys)
		for i := range reports {
			reports[i] = benchReport(op, i*17)
		}
		name := op.String()
		if op == wire.KeyWrite || op == wire.KeyIncrement {
			name += "-N2"
		}
		var c *Collector
		b.Run(name+"/dta", func(b *testing.B) {
			if c == nil {
				c = newTest(b, only(op))
			}
			in := c.NewIngester()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				in.Ingest(&reports[i&(len(reports)-1)])
			}
			in.Flush()
			rate(b, b.N, "Mreports/s")
		})
		var m *mapCollector
		b.Run(name+"/map", func(b *testing.B) {
			if m == nil {
				m = newMapCollector(1000000)
				for i := range benchKeys {
					m.Ingest(&wire.Report{Op: op, Key: perm(uint32(i)), List: uint32(i % 16)})
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				m.Ingest(&reports[i&(len(reports)-1)])
			}
			rate(b, b.N, "Mreports/s")
		})
	}
	// Append as the translator writes it: batches of B entries.
	var c *Collector
	for _, batch := range []int{1, 4, 8, 16} {
		b.Run("append-batch/B"+itoa(batch), func(b *testing.B) {
			if c == nil {
				c = newTest(b, only(wire.Append))
			}
			entries := make([]uint32, batch)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				entries[0] = uint32(i)
				c.ap.write(uint32(i)&15, entries)
			}
			rate(b, b.N*batch, "Mentries/s")
		})
	}
}

// only is benchConfig with one primitive.
func only(op wire.Opcode) Config {
	var c Config
	switch op {
	case wire.KeyWrite:
		c.KeyWrite = benchConfig.KeyWrite
	case wire.KeyIncrement:
		c.KeyIncrement = benchConfig.KeyIncrement
	case wire.Append:
		c.Append = benchConfig.Append
	case wire.Postcarding:
		c.Postcarding = benchConfig.Postcarding
	}
	return c
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// BenchmarkUDP is ingest over loopback UDP: a sender writes reports with
// sendmmsg as fast as it can, and the rate is the reports the collector
// ingested per second (the rest the socket dropped, counted). The
// machine's cores are shared by the sender and the collector.
func BenchmarkUDP(b *testing.B) {
	for _, op := range []wire.Opcode{wire.KeyWrite, wire.Append} {
		for _, kind := range []string{"dta", "map"} {
			b.Run(op.String()+"/"+kind, func(b *testing.B) {
				cfg := ServerConfig{Config: only(op), Listen: "127.0.0.1:0", Sockets: 1}
				var m *mapCollector
				if kind == "map" {
					m = newMapCollector(1000000)
					cfg.sink = func() ingester { return m }
				}
				s, err := NewServer(cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				pkts := make([][]byte, 4096)
				for i := range pkts {
					pkts[i] = payload(benchReport(op, i*17))
				}
				b.ResetTimer()
				sent := sendAll(b, s.Addr(), pkts, b.N)
				var st Stats
				deadline := time.Now().Add(30 * time.Second)
				for {
					st = s.Stats()
					if st.Datagrams+st.Dropped["socket"] >= uint64(sent) || time.Now().After(deadline) {
						break
					}
					time.Sleep(time.Millisecond)
				}
				b.StopTimer()
				rate(b, int(st.Datagrams), "Mreports/s")
				b.ReportMetric(float64(st.Dropped["socket"])/float64(sent), "dropped/sent")
			})
		}
	}
}

// sendAll sends n datagrams, cycling through pkts, 64 per sendmmsg.
func sendAll(b *testing.B, to *net.UDPAddr, pkts [][]byte, n int) int {
	conn, err := net.DialUDP("udp", nil, to)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	rc, _ := conn.SyscallConn()
	const batch = 64
	hdrs := make([]unix.Mmsghdr, batch)
	iovs := make([]unix.Iovec, batch)
	sent := 0
	var werr atomic.Value
	for sent < n {
		k := min(batch, n-sent)
		for i := range k {
			p := pkts[(sent+i)%len(pkts)]
			iovs[i].Base = &p[0]
			iovs[i].SetLen(len(p))
			hdrs[i].Hdr.Iov = &iovs[i]
			hdrs[i].Hdr.SetIovlen(1)
		}
		var m int
		rc.Write(func(fd uintptr) bool {
			r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&hdrs[0])), uintptr(k), unix.MSG_DONTWAIT, 0, 0)
			if e == unix.EAGAIN {
				return false
			}
			if e != 0 {
				werr.Store(e)
			}
			m = int(r)
			return true
		})
		if e := werr.Load(); e != nil {
			b.Fatal(e)
		}
		sent += m
	}
	return sent
}
