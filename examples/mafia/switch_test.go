package mafia_test

// The 13 use cases of MAFIA's Appendix A, each the .mafia file as it is,
// run on model switches (one, or a path of three, p4net) over a generated
// trace; what they measured (the functions' state read over P4Runtime,
// the copies they collected, the packets that left the path) equals an
// exact computation on the same packets written here: the switch's
// positions of a key (crc32 and crc16, flowkey.P4Index) and its one-slot
// tables simulated, or, for the estimates, within their stated bounds.

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"math/bits"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/ffpf-go/ffpf/flowspaces/p4/p4net"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/gen"
)

// The switches' trace: 20,000 packets at 1 Mpps (20 ms), 200 flows.
var swCfg = gen.Config{Seed: 11, Packets: 20000, Flows: 200, IPv6: 0.2, VLAN: 0.1}

var (
	swOnce  sync.Once
	swTrace []byte
	swPkts  []packet
)

// oneSwitch is one switch: the trace enters port 1, leaves by port 2.
const oneSwitch = `
switches: [{name: s1}]
ports: {"s1:1": "in:trace.pcap", "s1:2": "out:out.pcap"}
routes: {s1: {1: 2}}
`

// pathOfThree is MAFIA's path: first hop, intermediate, last hop.
const pathOfThree = `
switches:
  - {name: s1, role: first_hop}
  - {name: s2, role: intermediate}
  - {name: s3, role: last_hop}
links: ["s1:2 s2:1", "s2:2 s3:1"]
ports: {"s1:1": "in:trace.pcap", "s3:2": "out:out.pcap"}
routes: {s1: {1: 2}, s2: {1: 2}, s3: {1: 2}}
`

// swSetup writes the trace (once) into a new directory and returns it
// with the trace's packets.
func swSetup(t *testing.T) (string, []packet) {
	t.Helper()
	swOnce.Do(func() {
		var buf bytes.Buffer
		if err := gen.WritePcap(&buf, swCfg, 0); err != nil {
			t.Fatal(err)
		}
		swTrace = buf.Bytes()
		f := filepath.Join(t.TempDir(), "trace.pcap")
		if err := os.WriteFile(f, swTrace, 0o644); err != nil {
			t.Fatal(err)
		}
		swPkts = readPcap(t, f)
	})
	if len(swPkts) != int(swCfg.Packets) {
		t.Fatalf("the trace has %d packets", len(swPkts))
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "trace.pcap"), swTrace, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, swPkts
}

// runNet runs the example file on the network netYAML (its files in dir)
// as `ffpf p4 net` does, and returns what the controller read.
func runNet(t *testing.T, dir, netYAML, file string) *p4net.Result {
	t.Helper()
	// Room for the programs as ffpf compiles them (one function after
	// another, p4net.Build): some need more than Tofino-1's 12 stages
	// and 4 stateful ALUs a stage (README.md: resources).
	netYAML = strings.ReplaceAll(netYAML, "{name:", "{resources: {stages: 48, stateful_alus: 16}, name:")
	cfg, err := p4net.Parse([]byte(netYAML), filepath.Join(dir, "net.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	res := compileFile(t, file)
	var secs []p4net.Section
	for _, r := range res.Requests {
		secs = append(secs, p4net.Section{Role: r.Role, Req: r.Req, Copies: r.Copies})
	}
	progs, err := p4net.Programs(cfg, secs, nil)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	n, err := p4net.Start(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	out, err := p4net.Run(n, progs, p4net.RunOptions{})
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// fn returns the function labelled label on switch sw.
func fn(t *testing.T, res *p4net.Result, sw, label string) *p4net.FunctionResult {
	t.Helper()
	s := res.Switch(sw)
	if s == nil {
		t.Fatalf("no switch %s", sw)
	}
	f := s.Function(label)
	if f == nil {
		var have []string
		for _, f := range s.Functions {
			have = append(have, f.ID+"/"+f.Label)
		}
		t.Fatalf("%s has no function %s (%v)", sw, label, have)
	}
	return f
}

// cells returns the MBuf field name of a function's Go half, as the
// controller filled it from the switch.
func cells(t *testing.T, f *p4net.FunctionResult, name string) []uint64 {
	t.Helper()
	st, ok := f.Half.(functions.Stateful)
	if !ok || st.MBuf() == nil {
		t.Fatalf("%s keeps no state", f.ID)
	}
	m := st.MBuf()
	for _, fl := range m.Fields() {
		if fl.Name == name {
			out := make([]uint64, max(fl.Count, 1))
			for i := range out {
				out[i] = m.Uint64(fl.Offset + 8*i)
			}
			return out
		}
	}
	t.Fatalf("%s has no state field %s", f.ID, name)
	return nil
}

func summary(t *testing.T, f *p4net.FunctionResult, name string) float64 {
	t.Helper()
	v, ok := f.Summary[name]
	if !ok {
		t.Fatalf("%s's summary has no %s: %v", f.ID, name, f.Summary)
	}
	switch v := v.(type) {
	case uint64:
		return float64(v)
	case int:
		return float64(v)
	case float64:
		return v
	}
	t.Fatalf("%s's %s is %T", f.ID, name, v)
	return 0
}

// clock is a packet's time on a path's switches, in ns: the µs since one
// before the trace's first packet (p4net.Network.Now), times 1000.
func switchTime(pkts []packet, ts int64) uint64 { return uint64((ts-pkts[0].ts)/1000+1) * 1000 }

// hashes are a packet's key's hashes as a switch computes them.
func hashes(p *packet) (uint32, uint16) { return spec5.P4Hashes(&p.key) }

// cmsSim is a count-min sketch at a switch's positions.
type cmsSim struct {
	depth, bits int
	c           []uint64
}

func newCMS(depth, width int) *cmsSim {
	_, b := flowkey.Pow2(uint64(width))
	return &cmsSim{depth: depth, bits: b, c: make([]uint64, depth<<b)}
}

// add adds v to p's key's counters and returns the least of them.
func (s *cmsSim) add(p *packet, v uint64) uint64 {
	h1, h2 := hashes(p)
	est := uint64(math.MaxUint64)
	for i := range s.depth {
		c := &s.c[i<<s.bits+int(flowkey.P4Index(h1, h2, uint32(i), s.bits))]
		*c += v
		est = min(est, *c)
	}
	return est
}

// slots is a switch's keyed table: one slot per key (P4Index 0), the
// first key to reach a slot keeping it.
type slots struct {
	bits  int
	owner map[uint32]string
}

func newSlots(size int) *slots {
	_, b := flowkey.Pow2(uint64(size))
	return &slots{bits: b, owner: map[uint32]string{}}
}

// holds reports whether p's key has its slot.
func (s *slots) holds(p *packet) bool {
	h1, h2 := hashes(p)
	i := flowkey.P4Index(h1, h2, 0, s.bits)
	if o, ok := s.owner[i]; ok {
		return o == p.str
	}
	s.owner[i] = p.str
	return true
}

func sameCells(t *testing.T, what string, got, want []uint64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d cells, the computation %d", what, len(got), len(want))
	}
	nz := 0
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: cell %d is %d, the computation gives %d", what, i, got[i], want[i])
		}
		if got[i] != 0 {
			nz++
		}
	}
	if nz == 0 {
		t.Fatalf("%s: every cell 0; the test tests nothing", what)
	}
}

// ip4 is the offset of a frame's IPv4 header (after VLAN tags), or -1.
func ip4(f []byte) int {
	off := 12
	for off+2 <= len(f) {
		switch binary.BigEndian.Uint16(f[off:]) {
		case 0x8100, 0x88a8:
			off += 4
			continue
		case 0x0800:
			if off+2+20 <= len(f) {
				return off + 2
			}
		}
		return -1
	}
	return -1
}

// sameFrames fails unless got holds exactly the frames of want, in order.
func sameFrames(t *testing.T, what string, got, want []packet) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d packets, the exact computation gives %d", what, len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i].data, want[i].data) {
			t.Fatalf("%s: packet %d is %s, the exact computation gives %s", what, i, got[i].str, want[i].str)
		}
	}
	if len(got) == 0 {
		t.Fatalf("%s: no packets; the test tests nothing", what)
	}
}

// Approximate flow volume: the count-min sketch's cells are those of the
// switch's positions with each packet's bytes added; every flow's
// estimate is at least its volume.
func TestSwitchApproxFlowVolume(t *testing.T) {
	dir, pkts := swSetup(t)
	res := runNet(t, dir, oneSwitch, "approx-flow-volume.mafia")
	cm := newCMS(4, 256)
	exact, est := map[string]uint64{}, map[string]uint64{}
	var total uint64
	for i := range pkts {
		p := &pkts[i]
		if p.ok5 {
			total += uint64(len(p.data))
			exact[p.str] += uint64(len(p.data))
			est[p.str] = cm.add(p, uint64(len(p.data)))
		}
	}
	f := fn(t, res, "s1", "flow_size")
	sameCells(t, "flow_size", cells(t, f, "counters"), cm.c)
	if got := summary(t, f, "total"); got != float64(total) {
		t.Errorf("total %v, want %d", got, total)
	}
	over := 0
	for k, v := range exact {
		if est[k] < v {
			t.Errorf("%s: estimate %d below its volume %d", k, est[k], v)
		}
		if float64(est[k]) > float64(v)+math.E/256*float64(total) {
			over++
		}
	}
	// ε = e/256, δ = e^-4 per flow: a few flows may exceed εN.
	if lim := 3 + int(3*math.Exp(-4)*float64(len(exact))); over > lim {
		t.Errorf("%d of %d flows above volume + εN (δ allows about %d)", over, len(exact), lim)
	}
}

// Cardinality: HyperLogLog and PCSA estimate the distinct 5-tuples within
// four standard errors.
func TestSwitchCardinality(t *testing.T) {
	for _, tc := range []struct {
		file   string
		stderr float64
	}{{"cardinality-hll.mafia", 1.04 / 16}, {"cardinality-pcsa.mafia", 0.78 / math.Sqrt(128)}} {
		t.Run(tc.file, func(t *testing.T) {
			dir, pkts := swSetup(t)
			res := runNet(t, dir, oneSwitch, tc.file)
			keys := map[string]bool{}
			nokey := 0
			for i := range pkts {
				if pkts[i].ok5 {
					keys[pkts[i].str] = true
				} else {
					nokey++
				}
			}
			f := fn(t, res, "s1", "num_flows")
			est := summary(t, f, "estimate")
			if n := float64(len(keys)); math.Abs(est-n) > 4*tc.stderr*n {
				t.Errorf("estimate %.1f of %d distinct flows: beyond 4 standard errors (%.3f)", est, len(keys), tc.stderr)
			}
			if got := summary(t, f, "nokey"); got != float64(nokey) {
				t.Errorf("nokey %v, want %d", got, nokey)
			}
			t.Logf("%s: %.1f for %d flows", tc.file, est, len(keys))
		})
	}
}

// Flow volume with duration: each flow's bytes, packets, first and last
// time seen (the switch's clock: µs) as the switch's one-slot tables hold
// them.
func TestSwitchFlowVolume(t *testing.T) {
	dir, pkts := swSetup(t)
	res := runNet(t, dir, oneSwitch, "flow-volume.mafia")
	tab := newSlots(1024)
	first, last := map[string]uint64{}, map[string]uint64{}
	var dropped, nokey, total uint64
	for i := range pkts {
		p := &pkts[i]
		total += uint64(len(p.data))
		if !p.ok5 {
			nokey++
			continue
		}
		if !tab.holds(p) {
			dropped++
			continue
		}
		now := switchTime(pkts, p.ts)
		if _, ok := first[p.str]; !ok {
			first[p.str] = now
		}
		last[p.str] = now
	}
	pc := fn(t, res, "s1", "packet_counter")
	bc := fn(t, res, "s1", "byte_counter")
	for _, c := range []struct {
		f    *p4net.FunctionResult
		name string
		want uint64
	}{{pc, "keys", uint64(len(first))}, {pc, "dropped", dropped}, {pc, "nokey", nokey}, {bc, "dropped", dropped}} {
		if got := summary(t, c.f, c.name); got != float64(c.want) {
			t.Errorf("%s's %s: %v, want %d", c.f.Label, c.name, got, c.want)
		}
	}
	if got := summary(t, pc, "packets"); got != float64(len(pkts)) {
		t.Errorf("packet_counter counted %v packets of %d", got, len(pkts))
	}
	if got := summary(t, bc, "bytes"); got != float64(total) {
		t.Errorf("byte_counter counted %v bytes of %d", got, total)
	}
	for _, r := range []struct {
		label string
		want  map[string]uint64
	}{{"start_ts", first}, {"last_ts", last}} {
		h, ok := fn(t, res, "s1", r.label).Half.(interface {
			Each(func(*flowkey.Key, uint64))
			Spec() *flowkey.Spec
		})
		if !ok {
			t.Fatalf("%s is not a keyed register", r.label)
		}
		got := map[string]uint64{}
		h.Each(func(k *flowkey.Key, v uint64) { got[h.Spec().Format(k)] = v })
		if len(got) != len(r.want) {
			t.Fatalf("%s holds %d flows, the computation %d", r.label, len(got), len(r.want))
		}
		for k, v := range r.want {
			if got[k] != v {
				t.Fatalf("%s of %s: %d, the computation gives %d", r.label, k, got[k], v)
			}
		}
	}
	long := 0
	for k := range first {
		if last[k]-first[k] > 1000000 { // flows lasting over 1 ms
			long++
		}
	}
	if long == 0 {
		t.Fatal("no flow lasts over 1 ms: durations untested")
	}
}

// Deterministic sampling: the samples are packets 11–15 of every 64 of
// each flow the table holds.
func TestSwitchDeterministicSampling(t *testing.T) {
	dir, pkts := swSetup(t)
	runNet(t, dir, oneSwitch, "deterministic-sampling.mafia")
	tab := newSlots(1024)
	n := map[string]uint64{}
	var want []packet
	for i := range pkts {
		p := &pkts[i]
		if !p.ok5 || !tab.holds(p) {
			continue
		}
		n[p.str]++
		if m := n[p.str] % 64; m > 10 && m <= 15 {
			want = append(want, *p)
		}
	}
	sameFrames(t, "samples.pcap", readPcap(t, filepath.Join(dir, "samples.pcap")), want)
	sameFrames(t, "out.pcap", readPcap(t, filepath.Join(dir, "out.pcap")), pkts)
}

// Counter thresholds: a flow's packets after its 100th, or once its
// bytes pass 64 KB, are collected (once each).
func TestSwitchCounterThresholds(t *testing.T) {
	dir, pkts := swSetup(t)
	runNet(t, dir, oneSwitch, "counter-thresholds.mafia")
	tab := newSlots(1024)
	np, nb := map[string]uint64{}, map[string]uint64{}
	var want []packet
	for i := range pkts {
		p := &pkts[i]
		if !p.ok5 || !tab.holds(p) {
			continue
		}
		np[p.str]++
		nb[p.str] += uint64(len(p.data))
		if np[p.str] > 100 || nb[p.str] > 64*1024 {
			want = append(want, *p)
		}
	}
	sameFrames(t, "exceeded.pcap", readPcap(t, filepath.Join(dir, "exceeded.pcap")), want)
}

// Stochastic sampling: the samples are packets of the trace, in order,
// as many as 5% within five standard deviations.
func TestSwitchStochasticSampling(t *testing.T) {
	dir, pkts := swSetup(t)
	runNet(t, dir, oneSwitch, "stochastic-sampling.mafia")
	got := readPcap(t, filepath.Join(dir, "samples.pcap"))
	j := 0
	for _, s := range got {
		for j < len(pkts) && !bytes.Equal(pkts[j].data, s.data) {
			j++
		}
		if j == len(pkts) {
			t.Fatal("a sample is not a packet of the trace, in order")
		}
		j++
	}
	n, p := float64(len(pkts)), 0.05
	if d := math.Abs(float64(len(got)) - n*p); d > 5*math.Sqrt(n*p*(1-p)) {
		t.Errorf("%d samples of %d packets at 5%%", len(got), len(pkts))
	}
}

// Heavy hitters (Listing 1): the alarms are exactly the packets the
// definition gives at the switch's positions (the total, the count-min
// estimate, γ, the Bloom filter's partitions, in order), each with its
// estimate written into the copy's IPv4 checksum.
func TestSwitchHeavyHitters(t *testing.T) {
	dir, pkts := swSetup(t)
	res := runNet(t, dir, oneSwitch, "heavy-hitter.mafia")
	cm := newCMS(4, 256)
	bloom := make([]bool, 4*16)
	var total uint64
	var want []packet
	var ests []uint64
	for i := range pkts {
		p := &pkts[i]
		total += uint64(len(p.data))
		if !p.ok5 {
			continue
		}
		est := cm.add(p, uint64(len(p.data)))
		if !(float64(est) > 0.01*float64(total)) {
			continue
		}
		h1, h2 := hashes(p)
		present := true
		for i := range 4 {
			c := &bloom[i*16+int(flowkey.P4Index(h1, h2, uint32(i), 4))]
			present = present && *c
			*c = true
		}
		if !present {
			want = append(want, *p)
			ests = append(ests, est)
		}
	}
	alarms := readPcap(t, filepath.Join(dir, "alarms.pcap"))
	if len(alarms) != len(want) || len(want) == 0 {
		t.Fatalf("%d alarms, the computation gives %d", len(alarms), len(want))
	}
	for i, a := range alarms {
		w := bytes.Clone(want[i].data)
		if ip := ip4(w); ip >= 0 {
			binary.BigEndian.PutUint16(w[ip+10:], uint16(ests[i]))
		}
		if !bytes.Equal(a.data, w) {
			t.Fatalf("alarm %d (%s) differs from the packet with its estimate %d as checksum", i, want[i].str, ests[i])
		}
	}
	sameCells(t, "nbytes", cells(t, fn(t, res, "s1", "nbytes"), "counters"), cm.c)
}

// Postcards on a path of three: each switch collects a copy of every
// packet, an IPv4 one with its input port, output port and switch id in
// its checksum, identification and ToS; the packets leave the path as
// they entered.
func TestSwitchPostcards(t *testing.T) {
	dir, pkts := swSetup(t)
	runNet(t, dir, pathOfThree, "postcards.mafia")
	sameFrames(t, "out.pcap", readPcap(t, filepath.Join(dir, "out.pcap")), pkts)
	cards := readPcap(t, filepath.Join(dir, "postcards.pcap"))
	if len(cards) != 3*len(pkts) {
		t.Fatalf("%d postcards of %d packets on 3 switches", len(cards), len(pkts))
	}
	// The copies reach the controller from three switches: each
	// switch's, in order, is the packet as it writes it.
	want := map[string]int{}
	for i := range pkts {
		for sw := 1; sw <= 3; sw++ {
			w := bytes.Clone(pkts[i].data)
			if ip := ip4(w); ip >= 0 {
				binary.BigEndian.PutUint16(w[ip+10:], 1)
				binary.BigEndian.PutUint16(w[ip+4:], 2)
				w[ip+1] = byte(sw)
			}
			want[string(w)]++
		}
	}
	for i, c := range cards {
		if want[string(c.data)] == 0 {
			t.Fatalf("postcard %d is no packet as a switch of the path writes it", i)
		}
		want[string(c.data)]--
	}
}

// Top-k congested flows: on a path whose first two links are slower than
// the trace, the first hop marks IPv4 packets and starts their sum of
// queue lengths in the identification, the intermediate adds its own,
// and the last hop's sketches hold, at the switch's positions, the
// packets and the sums of the packets that reached it.
func TestSwitchCongestedFlows(t *testing.T) {
	dir, pkts := swSetup(t)
	net := strings.Replace(pathOfThree, "{name: s1, role: first_hop}", "{name: s1, role: first_hop, rates: {2: 900000}}", 1)
	net = strings.Replace(net, "{name: s2, role: intermediate}", "{name: s2, role: intermediate, rates: {2: 800000}}", 1)
	res := runNet(t, dir, net, "congested-flows.mafia")
	out := readPcap(t, filepath.Join(dir, "out.pcap"))
	if len(out) >= len(pkts) || len(out) < len(pkts)/2 {
		t.Fatalf("%d of %d packets left the path: the queues did not fill as the test needs", len(out), len(pkts))
	}
	total, sums := newCMS(4, 1024), newCMS(4, 1024)
	var maxID uint16
	for i := range out {
		p := &out[i]
		ip := ip4(p.data)
		if ip < 0 || p.data[ip+1]&1 == 0 || !p.ok5 {
			continue
		}
		id := binary.BigEndian.Uint16(p.data[ip+4:])
		maxID = max(maxID, id)
		total.add(p, 1)
		sums.add(p, uint64(id))
	}
	if maxID == 0 || maxID > 2*64 {
		t.Fatalf("the largest sum of queue lengths is %d: want 1..128 (two queues of 64)", maxID)
	}
	sameCells(t, "total_pkts", cells(t, fn(t, res, "s3", "total_pkts"), "counters"), total.c)
	sameCells(t, "path_q_len", cells(t, fn(t, res, "s3", "path_q_len"), "counters"), sums.c)
}

// Trajectory encoding on a path of three: the first hop marks an IPv4
// packet of a flow not verified within 1 ms, the intermediate ORs its
// location's Bloom bits into the checksum, and the last hop reports each
// marked packet with its own id and output port.
func TestSwitchTrajectory(t *testing.T) {
	dir, pkts := swSetup(t)
	runNet(t, dir, pathOfThree, "trajectory.mafia")
	tab := newSlots(1024)
	verified := map[string]uint64{}
	var want []packet
	for i := range pkts {
		p := &pkts[i]
		ip := ip4(p.data)
		now := switchTime(pkts, p.ts)
		// The register's table: a key claims a free slot only with a
		// write (if= with old 0: now > 1 ms); a packet whose slot holds
		// another key, or that has no key, finds old 0 and writes
		// nothing.
		pass := now > 1000000
		if p.ok5 {
			h1, h2 := hashes(p)
			i := flowkey.P4Index(h1, h2, 0, tab.bits)
			o, used := tab.owner[i]
			if !used && pass {
				tab.owner[i], o, used = p.str, p.str, true
			}
			if used && o == p.str {
				if pass = now-verified[p.str] > 1000000; pass {
					verified[p.str] = now
				}
			}
		}
		if ip >= 0 && (pass || p.data[ip+1]&1 == 1) {
			want = append(want, *p)
		}
	}
	reports := readPcap(t, filepath.Join(dir, "trajectories.pcap"))
	if len(reports) != len(want) || len(want) == 0 {
		t.Fatalf("%d reports, the computation gives %d", len(reports), len(want))
	}
	var path uint16
	for i, r := range reports {
		w, ip := bytes.Clone(want[i].data), ip4(want[i].data)
		csum := binary.BigEndian.Uint16(r.data[ip+10:])
		orig := binary.BigEndian.Uint16(w[ip+10:])
		if csum&orig != orig {
			t.Fatalf("report %d: checksum %#x lost bits of %#x", i, csum, orig)
		}
		path |= csum &^ orig
		w[ip+1] = 3
		binary.BigEndian.PutUint16(w[ip+4:], 2)
		binary.BigEndian.PutUint16(w[ip+10:], csum)
		if !bytes.Equal(r.data, w) {
			t.Fatalf("report %d is not packet %s with tos 3, id 2", i, want[i].str)
		}
	}
	if n := bits.OnesCount16(path); n == 0 || n > 4 {
		t.Fatalf("the intermediate's location sets %d bits (%#x): want 1..4", n, path)
	}
}

// Path changes: a flow moved from s2 to s4 midway carries the other
// location's Bloom bits to the last hop, whose store sketch finds the
// new path and whose count-min counts the changes: both equal, cell for
// cell, the computation on the packets as they reached it.
func TestSwitchPathChanges(t *testing.T) {
	dir, pkts := swSetup(t)
	net := `
switches:
  - {name: s1, role: first_hop}
  - {name: s2, role: intermediate}
  - {name: s3, role: last_hop}
  - {name: s4, role: intermediate}
links: ["s1:2 s2:1", "s2:2 s3:1", "s1:3 s4:1", "s4:2 s3:3"]
ports: {"s1:1": "in:trace.pcap", "s3:2": "out:out.pcap"}
routes: {s1: {1: 2}, s2: {1: 2}, s3: {1: 2, 3: 2}, s4: {1: 2}}
changes:
  - {at: 10ms, switch: s1, routes: {1: 3}}
`
	res := runNet(t, dir, net, "path-changes.mafia")
	out := readPcap(t, filepath.Join(dir, "out.pcap"))
	if len(out) != len(pkts) {
		t.Fatalf("%d of %d packets left the path", len(out), len(pkts))
	}
	const width, depth = 256, 4
	_, b := flowkey.Pow2(width)
	store := make([]uint64, depth<<b)
	changes := newCMS(depth, width)
	values := map[uint16]int{}
	for i := range out {
		p := &out[i]
		ip := ip4(p.data)
		if ip < 0 || !p.ok5 {
			continue
		}
		v := uint64(binary.BigEndian.Uint16(p.data[ip+10:]))
		values[uint16(v)]++
		h1, h2 := hashes(p)
		held := false
		for r := range depth {
			c := &store[r<<b+int(flowkey.P4Index(h1, h2, uint32(r), b))]
			held = held || *c == v
			*c = v
		}
		if !held {
			changes.add(p, 1)
		}
	}
	if len(values) != 2 {
		t.Fatalf("the packets reached the last hop with %d paths' values (%v): want 2", len(values), values)
	}
	sameCells(t, "paths_sketch", cells(t, fn(t, res, "s3", "paths_sketch"), "cells"), store)
	sameCells(t, "n_change_sketch", cells(t, fn(t, res, "s3", "n_change_sketch"), "counters"), changes.c)
}

// segwayTrace is ez-Segway's messages, UDP to port 6655: a third of
// them "good to move" (3), each with a logical clock.
func segwayTrace(t *testing.T, dir string) []packet {
	t.Helper()
	var buf bytes.Buffer
	w := newPcapWriter(t, &buf)
	for i := range 600 {
		f := make([]byte, 14+20+8+16)
		binary.BigEndian.PutUint16(f[12:], 0x0800)
		ip := f[14:]
		ip[0], ip[8], ip[9] = 0x45, 64, 17
		binary.BigEndian.PutUint16(ip[2:], 20+8+16)
		copy(ip[12:], []byte{10, 0, 0, byte(i % 7)})
		copy(ip[16:], []byte{10, 0, 1, 1})
		udp := ip[20:]
		binary.BigEndian.PutUint16(udp[0:], 5000)
		binary.BigEndian.PutUint16(udp[2:], 6655)
		binary.BigEndian.PutUint16(udp[4:], 8+16)
		msg := udp[8:]
		msg[0] = byte(1 + i%3) // 3: good to move
		msg[1] = byte(i * 37 % 251)
		copy(msg[2:8], "keepme")
		w(f, int64(1_700_000_000_000_000_000+i*25_000))
	}
	if err := os.WriteFile(filepath.Join(dir, "trace.pcap"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return readPcap(t, filepath.Join(dir, "trace.pcap"))
}

// Path change latency (ez-Segway): at each good-to-move message the
// logical clock becomes max(clock + 1, the message's), written into the
// message forwarded; the controller's copy carries it and the time.
func TestSwitchPathChangeLatency(t *testing.T) {
	dir := t.TempDir()
	pkts := segwayTrace(t, dir)
	runNet(t, dir, oneSwitch, "path-change-latency.mafia")
	var clock uint64
	var fwd, copies []packet
	for _, p := range pkts {
		msg := p.data[14+20+8:]
		q := p
		if msg[0] == 3 {
			clock = max(clock+1, uint64(msg[1])) & 255
			q.data = bytes.Clone(p.data)
			q.data[14+20+8+1] = byte(clock)
			c := q
			c.data = bytes.Clone(q.data)
			binary.BigEndian.PutUint64(c.data[14+20+8+8:], switchTime(pkts, p.ts))
			copies = append(copies, c)
		}
		fwd = append(fwd, q)
	}
	sameFrames(t, "out.pcap", readPcap(t, filepath.Join(dir, "out.pcap")), fwd)
	sameFrames(t, "segway.pcap", readPcap(t, filepath.Join(dir, "segway.pcap")), copies)
}

func TestSwitchUseCasesCovered(t *testing.T) {
	files, err := filepath.Glob("*.mafia")
	if err != nil {
		t.Fatal(err)
	}
	tested := map[string]bool{}
	for _, f := range []string{"approx-flow-volume", "cardinality-hll", "cardinality-pcsa", "flow-volume",
		"deterministic-sampling", "counter-thresholds", "stochastic-sampling", "heavy-hitter", "postcards",
		"congested-flows", "trajectory", "path-changes", "path-change-latency"} {
		tested[f+".mafia"] = true
	}
	for _, f := range files {
		if !tested[f] {
			t.Errorf("%s has no test on a switch", f)
		}
	}
	if len(files) != 13 {
		t.Errorf("%d use cases, MAFIA's Appendix A has 13", len(files))
	}
}

// newPcapWriter returns a function writing an Ethernet frame at a time
// (ns) into w as a pcap file of nanoseconds.
func newPcapWriter(t *testing.T, w io.Writer) func([]byte, int64) {
	t.Helper()
	pw := pcapgo.NewWriterNanos(w)
	if err := pw.WriteFileHeader(65536, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	return func(f []byte, ns int64) {
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, ns), CaptureLength: len(f), Length: len(f)}
		if err := pw.WritePacket(ci, f); err != nil {
			t.Fatal(err)
		}
	}
}

// collect to a UDP collector: the heavy hitters' alarms sent as
// datagrams, one frame each, are the alarms the file collects.
func TestSwitchCollectUDP(t *testing.T) {
	dir, _ := swSetup(t)
	runNet(t, dir, oneSwitch, "heavy-hitter.mafia")
	want := readPcap(t, filepath.Join(dir, "alarms.pcap"))

	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	src, err := os.ReadFile("heavy-hitter.mafia")
	if err != nil {
		t.Fatal(err)
	}
	prog := bytes.Replace(src, []byte(`"file:alarms.pcap"`), []byte(`"udp:`+pc.LocalAddr().String()+`"`), 1)
	if bytes.Equal(prog, src) {
		t.Fatal("heavy-hitter.mafia collects elsewhere than file:alarms.pcap")
	}
	dir2, _ := swSetup(t)
	file := filepath.Join(dir2, "hh-udp.mafia")
	if err := os.WriteFile(file, prog, 0o644); err != nil {
		t.Fatal(err)
	}
	got := make(chan [][]byte, 1)
	go func() {
		var ds [][]byte
		buf := make([]byte, 65536)
		for {
			pc.SetReadDeadline(time.Now().Add(2 * time.Second))
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				got <- ds
				return
			}
			ds = append(ds, bytes.Clone(buf[:n]))
		}
	}()
	runNet(t, dir2, oneSwitch, file)
	ds := <-got
	if len(ds) != len(want) {
		t.Fatalf("%d datagrams, the file collected %d alarms", len(ds), len(want))
	}
	for i := range ds {
		if !bytes.Equal(ds[i], want[i].data) {
			t.Fatalf("datagram %d is not alarm %d", i, i)
		}
	}
}

// path.yaml, the network README.md runs the path programs on (`ffpf p4
// net [--mafia FILE] examples/mafia/path.yaml`), has room for each of
// them: every switch's program is built (trajectory's first hop needs
// more than Tofino-1's 12 stages).
func TestPathFileHoldsThePathPrograms(t *testing.T) {
	src, err := os.ReadFile("path.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := p4net.Parse(src, "path.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"postcards.mafia", "trajectory.mafia", "congested-flows.mafia"} {
		var secs []p4net.Section
		for _, r := range compileFile(t, file).Requests {
			secs = append(secs, p4net.Section{Role: r.Role, Req: r.Req, Copies: r.Copies})
		}
		if _, err := p4net.Programs(cfg, secs, nil); err != nil {
			t.Errorf("%s on path.yaml: %v", file, err)
		}
	}
}
