package p4test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/gen"
	"github.com/ffpf-go/ffpf/functions/p4gen"
	"github.com/ffpf-go/ffpf/lang"
	"github.com/ffpf-go/ffpf/lang/p4"
)

// Packet is a frame as it reaches a switch, and its time (ns since the
// Unix epoch).
type Packet struct {
	Data []byte
	Time int64
}

// Packets makes packets of frames, 1 µs apart.
func Packets(fs [][]byte) []Packet {
	ps := make([]Packet, len(fs))
	for i, f := range fs {
		ps[i] = Packet{Data: f, Time: gen.DefaultStart.UnixNano() + int64(i)*1000}
	}
	return ps
}

// Trace returns the packets of a generated trace: each frame as captured
// (an adversarial frame cut short is a short frame here).
func Trace(cfg gen.Config) []Packet {
	g := gen.New(cfg)
	var ps []Packet
	buf := make([]byte, gen.MaxFrameLen)
	for {
		n, _, ts, ok := g.Next(buf)
		if !ok {
			return ps
		}
		ps = append(ps, Packet{Data: append([]byte(nil), buf[:n]...), Time: ts})
	}
}

// Fn is a function of a class, from its expression.
type Fn struct {
	Class  *functions.Class
	Params functions.Params
	Expr   string
}

// Parse binds the one function of expr ("(cms,key=5tuple)") to its
// class, which the test's package registered.
func Parse(tb testing.TB, expr string) Fn {
	tb.Helper()
	req, err := lang.Parse(expr)
	if err != nil {
		tb.Fatalf("%s: %v", expr, err)
	}
	if len(req.Chains) != 1 || len(req.Chains[0].Terms) != 1 {
		tb.Fatalf("%s: one function, please", expr)
	}
	f, ok := req.Chains[0].Terms[0].(*lang.Func)
	if !ok {
		tb.Fatalf("%s: not a function", expr)
	}
	c, ok := functions.Default.Lookup(f.Class)
	if !ok {
		tb.Fatalf("%s: no class %s registered", expr, f.Class)
	}
	args := make([]functions.Arg, len(f.Args))
	for i, a := range f.Args {
		k := functions.RawWord
		switch a.Value.Kind {
		case lang.String:
			k = functions.RawString
		case lang.Number:
			k = functions.RawNumber
		}
		args[i] = functions.Arg{Key: a.Key, Value: functions.Raw{Kind: k, Text: a.Value.Text, Unit: a.Value.Unit}}
	}
	p, err := c.Bind(args)
	if err != nil {
		tb.Fatalf("%s: %v", expr, err)
	}
	return Fn{Class: c, Params: p, Expr: expr}
}

// Context returns the context of the function as id, on Ethernet frames,
// instantiated for target t ("" is userspace).
func (f Fn) Context(id string, t functions.Target) *functions.Context {
	return &functions.Context{ID: id, Params: f.Params, LinkType: functions.LinkEthernet, Snaplen: gen.MaxFrameLen,
		Flowspace: string(t), Target: t, Output: functions.LinkRecord}
}

// P4 returns the function's P4 code, or the class's refusal.
func (f Fn) P4(id string) (p4gen.Function, error) {
	if err := f.Class.CanRun(functions.TargetP4, f.Params); err != nil {
		return nil, err
	}
	if !f.Class.Supports(functions.TargetP4) {
		return nil, fmt.Errorf("class %s has no P4 target", f.Class.Name)
	}
	ctx := f.Context(id, functions.TargetP4)
	if f.Class.Validate != nil {
		if err := f.Class.Validate(ctx); err != nil {
			return nil, err
		}
	}
	return f.Class.P4(ctx)
}

// Uplink is the port Assemble sends the packets a program passes to.
const Uplink = 1

// Switch assembles the functions of fs, a chain (each fed by the one
// before; ids f#1, f#2, …), alone in a program, and returns a switch
// running it with the entries of its tables installed, and the builders.
func Switch(tb testing.TB, fs ...Fn) (*p4gen.Switch, []*p4gen.Builder) {
	tb.Helper()
	var nodes []p4gen.Node
	for i, f := range fs {
		code, err := f.P4(fmt.Sprintf("f#%d", i+1))
		if err != nil {
			tb.Fatalf("%s: %v", f.Expr, err)
		}
		n := p4gen.Node{ID: fmt.Sprintf("f#%d", i+1), Fn: code}
		if i > 0 {
			n.Inputs = []int{i - 1}
		}
		nodes = append(nodes, n)
	}
	p, bs, err := p4gen.Assemble("test", nodes, Uplink)
	if err != nil {
		tb.Fatal(err)
	}
	Check(tb, p)
	return Install(p), bs
}

// Check prints p as P4_16 and fails the test unless our checker (lang/p4)
// parses and accepts the text. It returns the text.
func Check(tb testing.TB, p *p4gen.Program) []byte {
	tb.Helper()
	pr, err := p4gen.Print(p)
	if err != nil {
		tb.Fatalf("printing the program: %v", err)
	}
	ast, err := p4.Parse("test.p4", string(pr.Text))
	if err == nil {
		_, err = p4.Check("test.p4", string(pr.Text), ast)
	}
	if el, ok := err.(p4.ErrorList); ok {
		tb.Fatalf("the printed program does not check:\n%s", el.Format())
	} else if err != nil {
		tb.Fatalf("the printed program does not parse: %v", err)
	}
	return pr.Text
}

// Install returns a switch running p with the entries of its tables
// installed, as the controller installs them at start.
func Install(p *p4gen.Program) *p4gen.Switch {
	s := p4gen.NewSwitch(p)
	for _, t := range p.Tables {
		if !t.Const {
			s.Entries[t] = append([]p4gen.Entry(nil), t.Entries...)
		}
	}
	return s
}

// Time is a packet's time on the switch's clock: µs, as bmv2 keeps it.
func Time(ns int64) uint64 { return uint64(ns / p4gen.TimeUnit) }

// RunSwitch runs the packets through s and returns, for each, whether
// it left the switch (the program passed it), and the digests sent.
func RunSwitch(tb testing.TB, s *p4gen.Switch, ps []Packet) ([]bool, []p4gen.DigestMsg) {
	tb.Helper()
	out := make([]bool, len(ps))
	var ds []p4gen.DigestMsg
	for i, p := range ps {
		r, err := s.Process(p4gen.Arrival{Data: p.Data, Port: 2, Time: Time(p.Time)})
		if err != nil {
			tb.Fatalf("packet %d (% x): %v", i, p.Data, err)
		}
		for _, d := range r.Out {
			if d.Instance == p4gen.InstanceNormal {
				out[i] = true
			}
		}
		ds = append(ds, r.Digests...)
	}
	return out, ds
}

// RunGo runs the packets through fn, a Go function, in batches of up to
// 256, ticking a clocked function at its deadlines before the packet that
// reaches them as a flowspace does, and returns, for each packet, whether
// fn passed it.
func RunGo(tb testing.TB, fn functions.Function, ps []Packet) []bool {
	tb.Helper()
	pb := buffers.NewPBuf(buffers.MaxBatch, gen.MaxFrameLen)
	b := buffers.NewBatch(pb, 0, buffers.MaxBatch, 0)
	out := make([]bool, len(ps))
	clocked, _ := fn.(functions.Clocked)
	first := 0 // index of the batch's first packet
	flush := func() {
		if b.N == 0 {
			return
		}
		n := b.N
		fn.Process(b)
		for _, e := range b.E[:b.N] {
			out[first+int(e.Slot)] = true
		}
		first += n
		b.Reset()
	}
	for _, p := range ps {
		if clocked != nil && p.Time >= clocked.Deadline() {
			flush()
			for p.Time >= clocked.Deadline() {
				clocked.Tick(p.Time)
			}
		}
		if b.Room() == 0 {
			flush()
		}
		b.Append(p.Data, uint32(len(p.Data)), p.Time)
		b.Now = p.Time
	}
	flush()
	return out
}

// Result is a function run on a switch and in userspace on the same
// packets.
type Result struct {
	Switch  *p4gen.Switch
	Builder *p4gen.Builder
	// P4 is the function's Go half on the switch (instantiated for
	// TargetP4), its MBuf filled from the switch's registers and counters
	// as the controller fills it; User the function in userspace; Model
	// a Go half for TargetP4 that processed the packets itself, in Go:
	// the switch's state as the Go half computes it with the switch's
	// indexing.
	P4, User, Model  functions.Function
	PassP4, PassUser []bool
	Digests          []p4gen.DigestMsg
	// PassModel is what the Go half passed when it ran on the packets.
	PassModel []bool
}

// Run runs fn alone on a switch and in userspace on ps.
func Run(tb testing.TB, fn Fn, ps []Packet) *Result {
	tb.Helper()
	const id = "f#1"
	s, bs := Switch(tb, fn)
	r := &Result{Switch: s, Builder: bs[0]}
	r.PassP4, r.Digests = RunSwitch(tb, s, ps)
	var err error
	if r.P4, err = fn.Class.New(fn.Context(id, functions.TargetP4)); err != nil {
		tb.Fatal(err)
	}
	if err := fn.Class.CheckState(functions.TargetP4, fn.Params, r.P4); err != nil {
		tb.Fatal(err)
	}
	if st, ok := r.P4.(functions.Stateful); ok {
		Fill(tb, s, id, st.MBuf())
	}
	if r.User, err = fn.Class.New(fn.Context(id, "")); err != nil {
		tb.Fatal(err)
	}
	r.PassUser = RunGo(tb, r.User, ps)
	if r.Model, err = fn.Class.New(fn.Context(id, functions.TargetP4)); err != nil {
		tb.Fatal(err)
	}
	r.PassModel = RunGo(tb, r.Model, ps)
	return r
}

// firstDiff names the first field in which two MBufs differ.
func firstDiff(got, want *buffers.MBuf) string {
	g, w := got.Snapshot(), want.Snapshot()
	for _, f := range got.Fields() {
		if fmt.Sprint(g[f.Name]) != fmt.Sprint(w[f.Name]) {
			return fmt.Sprintf("field %s: the switch's %v, the Go half's %v", f.Name, trim(g[f.Name]), trim(w[f.Name]))
		}
	}
	return "no field differs"
}

// SameModel fails the test unless the switch's state, as the controller
// reads it, is byte for byte the state the Go half computed on the same
// packets.
func (r *Result) SameModel(tb testing.TB) {
	tb.Helper()
	got, want := r.P4.(functions.Stateful).MBuf(), r.Model.(functions.Stateful).MBuf()
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		tb.Fatalf("the switch's state differs from the Go half's: %s", firstDiff(got, want))
	}
}

func trim(v any) string {
	s := fmt.Sprint(v)
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// SamePasses fails the test at the first packet that one side passed and
// the other did not.
func (r *Result) SamePasses(tb testing.TB, ps []Packet) {
	tb.Helper()
	samePasses(tb, ps, r.PassP4, r.PassUser, "userspace")
}

func samePasses(tb testing.TB, ps []Packet, p4, other []bool, name string) {
	tb.Helper()
	for i := range ps {
		if p4[i] != other[i] {
			tb.Fatalf("packet %d (% x): the switch passes it: %v, %s: %v", i, ps[i].Data, p4[i], name, other[i])
		}
	}
}

// Read returns what reader rd gives for a packet of data.
func Read(rd functions.Reader, data []byte) float64 {
	pb := buffers.NewPBuf(1, max(len(data), 1))
	b := buffers.NewBatch(pb, 0, 1, 0)
	b.Append(data, uint32(len(data)), 0)
	return rd(pb, 0)
}

// CheckWindows runs fn, which has window= of 2^shift µs, on a switch whose
// controller reads each window (RunWindows), and checks every window the
// switch measured against its Go half run in Go on the packets of the
// window the switch measured (byte for byte) and against the function in
// userspace when the switch measured all of them (same, a comparison of
// the two windows' summaries). The packets must make six windows or more,
// after an idle one (WithGap): it fails the test when fewer than five
// were measured or none of them lost packets. It returns the windows and
// how many packets the switch did not measure.
func CheckWindows(tb testing.TB, fn Fn, ps []Packet, shift int, same func(p4, user map[string]any) error) ([]Window, int) {
	tb.Helper()
	wins, measured := RunWindows(tb, fn, ps)
	byWindow := map[uint64][]Packet{}
	all := map[uint64]int{}
	lost := 0
	for i, p := range ps {
		n := uint64(Time(p.Time)) >> shift & 0xffffffff
		all[n]++
		if measured[i] {
			byWindow[n] = append(byWindow[n], p)
		} else {
			lost++
		}
	}
	user, err := fn.Class.New(fn.Context("f#1", ""))
	if err != nil {
		tb.Fatal(err)
	}
	userSum := userWindows(tb, user, ps, shift)
	for _, w := range wins {
		if w.Half == nil {
			if len(byWindow[w.Number]) > 0 {
				tb.Fatalf("window %d: %d packets measured, and the controller finds it not measured", w.Number, len(byWindow[w.Number]))
			}
			continue
		}
		model, err := fn.Class.New(fn.Context("f#1", functions.TargetP4))
		if err != nil {
			tb.Fatal(err)
		}
		RunGo(tb, model, byWindow[w.Number])
		got, want := w.Half.(functions.Stateful).MBuf(), model.(functions.Stateful).MBuf()
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			tb.Fatalf("window %d: the switch's state differs from its Go half's on the %d packets it measured: %s",
				w.Number, len(byWindow[w.Number]), firstDiff(got, want))
		}
		if len(byWindow[w.Number]) == all[w.Number] && same != nil {
			if err := same(w.Half.(functions.Summarizer).Summary(), userSum[w.Number]); err != nil {
				tb.Fatalf("window %d: %v", w.Number, err)
			}
		}
	}
	full := 0
	for _, w := range wins {
		if w.Half != nil {
			full++
		}
	}
	if len(wins) < 6 || full < 5 || lost == 0 {
		tb.Errorf("%s: %d windows, %d measured, %d packets not measured: the test compares too little", fn.Expr, len(wins), full, lost)
	}
	tb.Logf("%s: %d windows, %d measured, %d packets not measured", fn.Expr, len(wins), full, lost)
	return wins, lost
}

// userWindows runs a windowed function in userspace and returns the
// summary of each window as it closes, by window number.
func userWindows(tb testing.TB, fn functions.Function, ps []Packet, shift int) map[uint64]map[string]any {
	tb.Helper()
	out := map[uint64]map[string]any{}
	cur := uint64(0)
	var part []Packet
	flush := func() {
		if len(part) > 0 {
			RunGo(tb, fn, part)
			out[cur&0xffffffff] = fn.(functions.Summarizer).Summary()
		}
		part = part[:0]
	}
	for _, p := range ps {
		n := uint64(Time(p.Time)) >> shift
		if n != cur {
			flush()
			cur = n
		}
		part = append(part, p)
	}
	flush()
	return out
}

// WithGap returns ps without the packets of one window of 2^shift µs, the
// k-th window the packets reach, so that the window after it starts on
// the half of the window before it, which no packet cleared.
func WithGap(ps []Packet, shift, k int) []Packet {
	first := uint64(Time(ps[0].Time)) >> shift
	var out []Packet
	for _, p := range ps {
		if uint64(Time(p.Time))>>shift != first+uint64(k) {
			out = append(out, p)
		}
	}
	return out
}

// SameModelPasses fails the test at the first packet the switch passes
// and the Go half, run in Go on the same packets, does not (or the other
// way round).
func (r *Result) SameModelPasses(tb testing.TB, ps []Packet) {
	tb.Helper()
	samePasses(tb, ps, r.PassP4, r.PassModel, "its Go half")
}
