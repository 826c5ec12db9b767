package measure_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/functions"
	_ "github.com/ffpf-go/ffpf/functions/builtin"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/gen"
)

// pkt is one packet of a trace, as a capture file holds it.
type pkt struct {
	data []byte
	wire uint32
	ts   int64
}

// genTrace generates a trace in memory.
func genTrace(cfg gen.Config) []pkt {
	g := gen.New(cfg)
	var out []pkt
	buf := make([]byte, gen.MaxFrameLen)
	for {
		c, w, ts, ok := g.Next(buf)
		if !ok {
			return out
		}
		out = append(out, pkt{append([]byte(nil), buf[:c]...), uint32(w), ts})
	}
}

// writePcap writes pkts as a nanosecond pcap file and returns its path.
func writePcap(t testing.TB, name string, pkts []pkt) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := pcapgo.NewWriterNanos(f)
	if err := w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	for _, p := range pkts {
		ci := captureInfo(p)
		if err := w.WritePacket(ci, p.data); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// readPcap reads a capture file with gopacket: the oracle's view of it.
func readPcap(t testing.TB, path string) []pkt {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out []pkt
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, pkt{data, uint32(ci.Length), ci.Timestamp.UnixNano()})
	}
}

// keyOf is the key of p as a JSON object string (flowkey's format), or
// "" for a packet without one.
func keyOf(sp *flowkey.Spec, p pkt) string {
	var k flowkey.Key
	if !sp.Extract(functions.LinkEthernet, p.data, &k) {
		return ""
	}
	return sp.Format(&k)
}

func mustSpec(t testing.TB, s string) *flowkey.Spec {
	t.Helper()
	sp, err := flowkey.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// window is the start of the window of length w that holds ts.
func window(ts, w int64) int64 { return ts / w * w }

// testRegistry is the default registry plus two test classes:
//
//   - replay: a source that replays pkts; with batchSeed ≠ 0 it fills
//     batches of pseudo-random sizes 1..256, as a live source would, so
//     that results can be checked for independence of batch size;
//   - probe,read=LABEL.NAME: reads the named state of the function
//     labelled LABEL for each packet (after the writer processed it) and
//     appends the value to *probed.
func testRegistry(t testing.TB, pkts []pkt, batchSeed uint64, probed *[]float64) *functions.Registry {
	reg := functions.NewRegistry()
	for _, c := range functions.Default.All() {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	err := reg.Register(&functions.Class{Name: "replay", Summary: "a test trace replayed in batches of random sizes",
		Validate: func(ctx *functions.Context) error { ctx.LinkType = functions.LinkEthernet; return nil },
		NewSource: func(*functions.Context) (functions.Source, error) {
			return &replay{pkts: pkts, rng: batchSeed}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	split := func(p functions.Params) (string, string) {
		l, n, _ := strings.Cut(p.Str("read"), ".")
		return l, n
	}
	err = reg.Register(&functions.Class{Name: "probe", Summary: "records a named state value per packet",
		MinInputs: 1, MaxInputs: 1,
		Params: []functions.Param{{Name: "read", Type: functions.String, Required: true}},
		Reads:  func(p functions.Params) ([]string, error) { l, _ := split(p); return []string{l}, nil },
		New: func(ctx *functions.Context) (functions.Function, error) {
			l, n := split(ctx.Params)
			w, ok := ctx.StateOf(l)
			if !ok {
				return nil, errors.New("probe: no state " + l)
			}
			rd, ok := w.(functions.Readable)
			if !ok {
				return nil, errors.New("probe: " + l + " is not readable")
			}
			r, err := rd.Read(n)
			if err != nil {
				return nil, err
			}
			return probe{r, probed}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

type replay struct {
	pkts []pkt
	next int
	rng  uint64
}

func (s *replay) Info() functions.SourceInfo {
	return functions.SourceInfo{Name: "replay", LinkType: functions.LinkEthernet, MaxCapLen: gen.MaxFrameLen}
}

func (s *replay) Fill(b *buffers.Batch) error {
	n := b.Room()
	if s.rng != 0 { // xorshift64
		s.rng ^= s.rng << 13
		s.rng ^= s.rng >> 7
		s.rng ^= s.rng << 17
		n = min(n, 1+int(s.rng%buffers.MaxBatch))
	}
	for ; n > 0 && s.next < len(s.pkts); n-- {
		p := s.pkts[s.next]
		b.Append(p.data, p.wire, p.ts)
		s.next++
	}
	if s.next == len(s.pkts) {
		return io.EOF
	}
	return nil
}

func (s *replay) Close() error { return nil }

type probe struct {
	r   functions.Reader
	out *[]float64
}

func (p probe) Process(b *buffers.Batch) {
	for _, e := range b.E[:b.N] {
		*p.out = append(*p.out, p.r(b.PBuf, e.Slot))
	}
}

// run runs expr, in which OUT names a JSON lines file, and returns its
// lines and the functions' states.
func run(t testing.TB, reg *functions.Registry, expr string) ([]string, []flowgraph.FunctionState) {
	t.Helper()
	return runIn(t, flowgraph.Config{Registry: reg}, expr)
}

// runIn is run with a configuration (a flowspace hierarchy).
func runIn(t testing.TB, cfg flowgraph.Config, expr string) ([]string, []flowgraph.FunctionState) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.jsonl")
	expr = strings.ReplaceAll(expr, "OUT", strconv.Quote(out))
	rt := flowgraph.New(cfg)
	if _, err := rt.Populate(expr, flowgraph.RequestOptions{}); err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	if err := rt.Activate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	// As --json shows them: numbers as float64.
	var states []flowgraph.FunctionState
	if b, err := json.Marshal(rt.Functions()); err != nil {
		t.Fatal(err)
	} else if err := json.Unmarshal(b, &states); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range states {
		if f.In != f.Out+f.Filtered+f.Dropped {
			t.Errorf("%s: in %d != out %d + filtered %d + dropped %d", f.ID, f.In, f.Out, f.Filtered, f.Dropped)
		}
	}
	b, err := os.ReadFile(out)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines, states
}

// rec is a report record as export format=jsonl writes it.
type rec struct {
	Function string          `json:"function"`
	TS       int64           `json:"ts"`
	Kind     string          `json:"kind"`
	Key      json.RawMessage `json:"key"`
	Value    *uint64         `json:"value"`
	Estimate *float64        `json:"estimate"`
	Rank     int             `json:"rank"`
	Packets  *uint64         `json:"packets"`
	Bytes    *uint64         `json:"bytes"`
}

func parse(t testing.TB, lines []string) []rec {
	t.Helper()
	out := make([]rec, len(lines))
	for i, l := range lines {
		dec := json.NewDecoder(strings.NewReader(l))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&out[i]); err != nil {
			t.Fatalf("line %d does not parse: %v: %s", i+1, err, l)
		}
		if out[i].Kind != "report" {
			t.Errorf("line %d: kind %q", i+1, out[i].Kind)
		}
	}
	return out
}

// byWindow groups records by their ts, in order of first appearance, and
// checks that windows come in increasing order.
func byWindow(t testing.TB, rs []rec) ([]int64, map[int64][]rec) {
	t.Helper()
	m := map[int64][]rec{}
	var order []int64
	for _, r := range rs {
		if _, ok := m[r.TS]; !ok {
			if len(order) > 0 && r.TS <= order[len(order)-1] {
				t.Errorf("window %d reported after %d", r.TS, order[len(order)-1])
			}
			order = append(order, r.TS)
		}
		m[r.TS] = append(m[r.TS], r)
	}
	return order, m
}

func sortedKeys[V any](m map[int64]V) []int64 {
	var ks []int64
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func captureInfo(p pkt) gopacket.CaptureInfo {
	return gopacket.CaptureInfo{Timestamp: time.Unix(0, p.ts), CaptureLength: len(p.data), Length: int(p.wire)}
}

// flowgraphPopulate populates and instantiates expr, and closes it.
func flowgraphPopulate(reg *functions.Registry, expr string) (*flowgraph.Request, error) {
	rt := flowgraph.New(flowgraph.Config{Registry: reg})
	defer rt.Close()
	req, err := rt.Populate(expr, flowgraph.RequestOptions{})
	if err != nil {
		return nil, err
	}
	return req, rt.Instantiate()
}
