package flowgraph

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/user"
	"github.com/ffpf-go/ffpf/functions"
)

// fsDef describes a test flowspace: a Go flowspace that stands in for a
// board, with a class repertoire and simulated interfaces.
type fsDef struct {
	name     string
	classes  []string // nil: every class
	ifaces   []string // simulated; each replays (src,n=traffic)
	inPlace  bool
	strategy flowspaces.Strategy
	kids     []fsDef
}

// placeRegistry is the test registry plus cap (a capture source whose
// interface is its "if" parameter), p4only (no Go implementation) and
// pbufs (counts the distinct PBufs its batches come from).
func placeRegistry(t testing.TB) *functions.Registry {
	r := testRegistry(t)
	must := func(c *functions.Class) {
		if err := r.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	must(&functions.Class{Name: "cap", Params: []functions.Param{{Name: "if", Type: functions.String, Required: true}},
		Interface: func(p functions.Params) string { return p.Str("if") },
		NewSource: func(*functions.Context) (functions.Source, error) {
			return nil, fmt.Errorf("no real capture in tests")
		}})
	must(&functions.Class{Name: "p4only", MinInputs: 1, MaxInputs: -1, Targets: []functions.Target{functions.TargetP4},
		New: func(*functions.Context) (functions.Function, error) {
			return keepIf(func([]byte) bool { return true }), nil
		}})
	must(&functions.Class{Name: "keep", MinInputs: 1, MaxInputs: -1,
		Params: []functions.Param{{Name: "mod", Type: functions.Int, Default: "2"}, {Name: "at", Type: functions.Int}},
		New: func(ctx *functions.Context) (functions.Function, error) {
			mod, at := byte(ctx.Params.Int("mod")), byte(ctx.Params.Int("at"))
			return keepIf(func(p []byte) bool { return p[0]%mod == at%mod }), nil
		}})
	must(&functions.Class{Name: "all", MinInputs: 1, MaxInputs: -1, New: func(*functions.Context) (functions.Function, error) {
		return keepIf(func([]byte) bool { return true }), nil
	}})
	must(&functions.Class{Name: "pbufs", MinInputs: 1, MaxInputs: -1, State: counterState("pbufs"), New: func(*functions.Context) (functions.Function, error) {
		return &pbufCounter{seen: map[*buffers.PBuf]bool{},
			m: buffers.NewMBuf(8, buffers.Native, buffers.Field{Name: "pbufs", Type: buffers.U64})}, nil
	}})
	return r
}

type pbufCounter struct {
	seen map[*buffers.PBuf]bool
	m    *buffers.MBuf
}

func (p *pbufCounter) Process(b *buffers.Batch) {
	if !p.seen[b.PBuf] {
		p.seen[b.PBuf] = true
		p.m.Add64(0, 1)
	}
}
func (p *pbufCounter) MBuf() *buffers.MBuf { return p.m }

// tree builds the hierarchy def (root: userspace) in which every simulated
// interface delivers traffic packets.
func tree(t testing.TB, reg *functions.Registry, def fsDef, traffic int) flowspaces.Flowspace {
	return treeWith(t, reg, def, "src", traffic)
}

// treeWith is tree with simulated interfaces that replay (class,n=traffic).
func treeWith(t testing.TB, reg *functions.Registry, def fsDef, class string, traffic int) flowspaces.Flowspace {
	t.Helper()
	src, _ := reg.Lookup(class)
	params, err := src.Bind([]functions.Arg{{Key: "n", Value: functions.Raw{Kind: functions.RawNumber, Text: fmt.Sprint(traffic)}}})
	if err != nil {
		t.Fatal(err)
	}
	var build func(d fsDef, parent flowspaces.Flowspace) flowspaces.Flowspace
	build = func(d fsDef, parent flowspaces.Flowspace) flowspaces.Flowspace {
		opts := user.Options{Name: d.name, Kind: flowspaces.KindTest, Classes: d.classes, InPlace: d.inPlace,
			Interfaces: map[string]*user.Traffic{}}
		if parent == nil {
			opts = user.Options{Name: d.name}
		}
		for _, i := range d.ifaces {
			opts.Interfaces[i] = &user.Traffic{Term: "(src)", Class: src, Params: params}
		}
		fs := user.New(opts)
		if parent != nil {
			s := d.strategy
			if s == "" {
				s = flowspaces.CopyOnce
			}
			if _, err := flowspaces.Attach(parent, fs, "test", s); err != nil {
				t.Fatal(err)
			}
		}
		for _, k := range d.kids {
			build(k, fs)
		}
		return fs
	}
	return build(def, nil)
}

// fig4 is a four-level hierarchy: the host's kernel (in place), two
// boards of which one has micro-engines beneath, and a plain NIC.
var fig4 = fsDef{name: "user", kids: []fsDef{
	{name: "kernel", classes: []string{"even", "keep", "count", "pbufs"}, inPlace: true, strategy: flowspaces.ZeroCopy, kids: []fsDef{
		{name: "ixp0", classes: []string{"even", "keep", "mod3"}, ifaces: []string{"eth3"}, strategy: flowspaces.ZeroCopy, kids: []fsDef{
			{name: "me0", classes: []string{"even", "keep"}, ifaces: []string{"eth2"}},
		}},
		{name: "nic0", classes: []string{"even", "keep"}, ifaces: []string{"eth0"}},
		{name: "nic1", classes: []string{"even", "keep"}, ifaces: []string{"eth1"}},
	}},
}}

func place(t *testing.T, def fsDef, exprs ...string) (*Runtime, map[string]PlannedFunction) {
	t.Helper()
	reg := placeRegistry(t)
	rt := New(Config{Registry: reg, Hierarchy: tree(t, reg, def, 1000)})
	for _, e := range exprs {
		if _, err := rt.Populate(e, RequestOptions{}); err != nil {
			t.Fatalf("populate %q: %v", e, err)
		}
	}
	out := map[string]PlannedFunction{}
	for _, f := range rt.Plan().Functions {
		out[f.ID] = f
	}
	return rt, out
}

func TestPlacement(t *testing.T) {
	// Paths: user 0xffffffff; kernel 0x0fffffff; ixp0 0x00ffffff; me0
	// 0x000fffff; nic0 0x01ffffff; nic1 0x02ffffff.
	for _, tc := range []struct {
		name, expr string
		want       map[string]string // id -> "flowspace path"
	}{
		{"lowest level", `(cap,if=eth0) > (even)`,
			map[string]string{"cap#1": "nic0 0x01ffffff", "even#1": "nic0 0x01ffffff"}},
		{"deepest level", `(cap,if=eth2) > (even) > (mod3)`,
			map[string]string{"cap#1": "me0 0x000fffff", "even#1": "me0 0x000fffff", "mod3#1": "ixp0 0x00ffffff"}},
		{"up once: never below an input", `(cap,if=eth0) > (count) > (even)`,
			map[string]string{"count#1": "kernel 0x0fffffff", "even#1": "kernel 0x0fffffff"}},
		{"up once from the micro-engines", `(cap,if=eth2) > (mod3) > (even)`,
			map[string]string{"mod3#1": "ixp0 0x00ffffff", "even#1": "ixp0 0x00ffffff"}},
		{"common successor of two", `[(cap,if=eth0)|(cap,if=eth1)] > (even)`,
			map[string]string{"cap#1": "nic0 0x01ffffff", "cap#2": "nic1 0x02ffffff", "even#1": "kernel 0x0fffffff"}},
		{"common successor of two at different depths", `[(cap,if=eth2)|(cap,if=eth3)] > (even)`,
			map[string]string{"cap#1": "me0 0x000fffff", "cap#2": "ixp0 0x00ffffff", "even#1": "ixp0 0x00ffffff"}},
		{"common successor of three at different depths", `[(cap,if=eth2)|(cap,if=eth0)|(cap,if=eth3)] > (even)`,
			map[string]string{"cap#1": "me0 0x000fffff", "cap#2": "nic0 0x01ffffff", "cap#3": "ixp0 0x00ffffff", "even#1": "kernel 0x0fffffff"}},
		{"class missing at the common successor", `[(cap,if=eth0)|(cap,if=eth1)] > (all)`,
			map[string]string{"all#1": "user 0xffffffff"}},
		{"a filtered input keeps its place", `[(cap,if=eth0) > (even) | (cap,if=eth1)] > (count)`,
			map[string]string{"even#1": "nic0 0x01ffffff", "count#1": "kernel 0x0fffffff"}},
		{"files are read in userspace", `(src) > (even)`,
			map[string]string{"src#1": "user 0xffffffff", "even#1": "user 0xffffffff"}},
		{"an interface the tree lacks is captured in userspace", `(cap,if=wlan0) > (even)`,
			map[string]string{"cap#1": "user 0xffffffff", "even#1": "user 0xffffffff"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, got := place(t, fig4, tc.expr)
			for id, want := range tc.want {
				f, ok := got[id]
				if !ok {
					t.Fatalf("no function %s in %v", id, got)
				}
				if s := f.Flowspace + " " + f.Path; s != want {
					t.Errorf("%s: placed %s, want %s (%s)", id, s, want, f.Reason)
				}
			}
		})
	}
}

// TestPlacementRules checks the three rules on every function of a set of
// random-ish graphs: never below an input, at or above the inputs' common
// successor, and no lower flowspace on the way could have run it.
func TestPlacementRules(t *testing.T) {
	ifaces := []string{"eth0", "eth1", "eth2", "eth3", "wlan0"}
	classes := []string{"even", "mod3", "count", "all"}
	for i := range 400 {
		a, b := ifaces[i%5], ifaces[(i/5)%5]
		c1, c2, c3 := classes[i%4], classes[(i/4)%4], classes[(i/16)%4]
		if c3 == "mod3" {
			c3 = "even"
		}
		expr := fmt.Sprintf("[(cap,if=%s) > (%s) | (cap,if=%s) > (%s) > (%s)] > (%s)", a, c1, b, c2, c1, c3)
		rt, _ := place(t, fig4, expr)
		for _, f := range rt.snapshotFuncs() {
			n := f.node
			if flowspaces.PathOf(n.Flowspace) != n.Path {
				t.Fatalf("%s: %s: path %s, but %s has path %s", expr, n.ID, n.Path, n.Flowspace.Name(), flowspaces.PathOf(n.Flowspace))
			}
			for _, in := range n.Inputs {
				if !flowspaces.Above(n.Flowspace, in.Flowspace) {
					t.Fatalf("%s: %s in %s is below or beside its input %s in %s", expr, n.ID, n.Flowspace.Name(), in.ID, in.Flowspace.Name())
				}
			}
			for _, r := range f.PassedOver {
				if r.Flowspace.Host(n) == nil {
					t.Fatalf("%s: %s passed over %s, which runs it", expr, n.ID, r.Flowspace.Name())
				}
			}
		}
	}
}

// TestFigure2 is FFPF's Figure 2 reduced to its point: two boards under
// the host that both filter; a filter fed by both runs at their common
// successor, the host, not on the first board probed.
func TestFigure2(t *testing.T) {
	fig2 := fsDef{name: "user", kids: []fsDef{
		{name: "ixp0", classes: []string{"even"}, ifaces: []string{"ixp0"}},
		{name: "ixp1", classes: []string{"even"}, ifaces: []string{"ixp1"}},
	}}
	_, got := place(t, fig2, `[(cap,if=ixp0)|(cap,if=ixp1)] > (even)`, `(cap,if=ixp1) > (even)`)
	for id, want := range map[string]string{"cap#1": "ixp0 0x0fffffff", "cap#2": "ixp1 0x1fffffff",
		"even#1": "user 0xffffffff", "even#2": "ixp1 0x1fffffff"} {
		if f := got[id]; f.Flowspace+" "+f.Path != want {
			t.Errorf("%s placed in %s %s, want %s", id, f.Flowspace, f.Path, want)
		}
	}
}

func TestPlanReasons(t *testing.T) {
	_, got := place(t, fig4, `[(cap,if=eth0)|(cap,if=eth1)] > (all)`)
	want := "lowest flowspace with class all at or above kernel, the lowest common successor of cap#1 (nic0) and cap#2 (nic1)"
	if r := got["all#1"].Reason; r != want {
		t.Errorf("reason %q\nwant   %q", r, want)
	}
	po := got["all#1"].PassedOver
	if len(po) != 1 || po[0].Flowspace != "kernel" || po[0].Reason != "kernel does not run class all" {
		t.Errorf("passed over %+v", po)
	}
	if r := got["cap#1"].Reason; r != "lowest flowspace with class cap at or above nic0, where packets of eth0 enter" {
		t.Errorf("source reason %q", r)
	}
}

func TestUnplaceableRequestFailsWhole(t *testing.T) {
	reg := placeRegistry(t)
	rt := New(Config{Registry: reg, Hierarchy: tree(t, reg, fig4, 1000)})
	if _, err := rt.Populate(`(cap,if=eth0) > (even) > (count)`, RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	before := len(rt.Functions())
	opened := nOpened.Load()
	_, err := rt.Populate(`(cap,if=eth0) > (even) > [(count,tag=new) | (p4only)]`, RequestOptions{})
	if err == nil || !IsInvalid(err) {
		t.Fatalf("err = %v, want a validation error", err)
	}
	for _, want := range []string{"cannot place p4only#1", "no flowspace from nic0 up can run it",
		"nic0: class p4only has no Go implementation", "kernel: class p4only has no Go implementation", "user: class p4only has no Go implementation"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if n := len(rt.Functions()); n != before {
		t.Errorf("a failed request left %d functions, want %d", n, before)
	}
	if nOpened.Load() != opened {
		t.Error("a failed request instantiated something")
	}
	// The ids of the failed request are not spent.
	req, err := rt.Populate(`(cap,if=eth0) > (even) > (count,tag=new)`, RequestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if fs := req.Functions(); fs[len(fs)-1].ID != "count#2" {
		t.Errorf("new function is %s, want count#2", fs[len(fs)-1].ID)
	}
}

func TestFigure9PBufs(t *testing.T) {
	// FFPF Figure 9: F1 and F2 on two boards store their packets in local
	// PBufs (mapped into the host: zero-copy); F3 at their common
	// successor refers to both. F4 and F5 work on packets of a plain NIC
	// in the kernel, which keeps no PBuf. F6 in userspace refers to the
	// two board PBufs and to a new one for the packets from F5.
	fig9 := fsDef{name: "user", kids: []fsDef{
		{name: "kernel", classes: []string{"even", "mod3", "count"}, inPlace: true, strategy: flowspaces.ZeroCopy, kids: []fsDef{
			{name: "ixp0", classes: []string{"even"}, ifaces: []string{"ixp0"}, strategy: flowspaces.ZeroCopy},
			{name: "ixp1", classes: []string{"even"}, ifaces: []string{"ixp1"}, strategy: flowspaces.ZeroCopy},
			{name: "nic0", classes: []string{}, ifaces: []string{"eth0"}},
		}},
	}}
	expr := `[[(cap,if=ixp0) > F1:(even) | (cap,if=ixp1) > F2:(even)] > F3:(count,tag=f3) | (cap,if=eth0) > F4:(mod3) > F5:(count,tag=f5)] > F6:(pbufs)`
	rt, got := place(t, fig9, expr)
	byLabel := map[string]PlannedFunction{}
	for _, f := range got {
		byLabel[f.Label] = f
	}
	want := map[string]string{
		"F1": "ixp0 [pbuf:cap#1@ixp0]",
		"F2": "ixp1 [pbuf:cap#2@ixp1]",
		"F3": "kernel [pbuf:cap#1@ixp0 pbuf:cap#2@ixp1]",
		"F4": "kernel [in place]",
		"F5": "kernel [in place]",
		"F6": "user [pbuf:cap#1@ixp0 pbuf:cap#2@ixp1 pbuf:cap#3@user]",
	}
	for l, w := range want {
		f := byLabel[l]
		if s := fmt.Sprintf("%s %v", f.Flowspace, f.PBufs); s != w {
			t.Errorf("%s: %s, want %s", l, s, w)
		}
	}
	// And the flowspaces do as planned: F6 sees batches from three PBufs.
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Activate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	rt.Close()
	for _, f := range rt.Functions() {
		if f.Label == "F6" && f.State["pbufs"] != uint64(3) {
			t.Errorf("F6 saw batches of %v PBufs, want 3", f.State["pbufs"])
		}
	}
}

// TestHierarchyRunsLikeUserspace: the same graph gives the same counts
// when its functions are spread over a four-level hierarchy of Go
// flowspaces with bridges between them as when all of it runs in
// userspace (the simulated interfaces replay the same traffic).
func TestHierarchyRunsLikeUserspace(t *testing.T) {
	exprs := []string{
		`[(cap,if=eth0)|(cap,if=eth1)] > (even) > [(count,tag=a) | (mod3) > (count,tag=b)]`,
		`[(cap,if=eth2) > (even) | (cap,if=eth3) > (mod3)] > (count,tag=c)`,
		`[(cap,if=eth2) > (even) > (mod3) | (cap,if=eth0)] > (count,tag=d)`,
		`(cap,if=eth2) > [(even) | (mod3)] > (count,tag=e)`,
	}
	flat := fsDef{name: "user", kids: []fsDef{{name: "all", ifaces: []string{"eth0", "eth1", "eth2", "eth3"}}}}
	for _, expr := range exprs {
		counts := func(def fsDef) (map[string][4]uint64, map[string]string) {
			out, where := map[string][4]uint64{}, map[string]string{}
			for _, f := range runOn(t, def, 5000, expr).Functions() {
				out[f.ID] = [4]uint64{f.In, f.Out, f.Filtered, f.Dropped}
				where[f.ID] = f.Flowspace
			}
			return out, where
		}
		want, _ := counts(flat)
		got, where := counts(fig4)
		spread := map[string]bool{}
		for id := range want {
			spread[where[id]] = true
			if got[id] != want[id] {
				t.Errorf("%s: %s in %s counted %v, in userspace %v", expr, id, where[id], got[id], want[id])
			}
		}
		if len(spread) < 2 {
			t.Errorf("%s: everything ran in %v", expr, spread)
		}
	}
}

// runOn runs expr to its end on the hierarchy def whose simulated
// interfaces replay traffic packets, checks that every counter adds up and
// that no bridge dropped anything, and returns the closed runtime.
func runOn(t *testing.T, def fsDef, traffic int, expr string) *Runtime {
	t.Helper()
	reg := placeRegistry(t)
	rt := New(Config{Registry: reg, Hierarchy: tree(t, reg, def, traffic)})
	if _, err := rt.Populate(expr, RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Activate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, expr, rt)
	for _, b := range rt.Bridges() {
		if b.Dropped != 0 {
			t.Errorf("%s: bridge %s>%s dropped %d", expr, b.From, b.To, b.Dropped)
		}
	}
	return rt
}
