package flowspaces

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
)

func TestPathFields(t *testing.T) {
	p := Root.With(0, 0).With(1, 2).With(2, 14)
	if p != 0x02EFFFFF {
		t.Fatalf("path %s, want 0x02efffff", p)
	}
	if p.At(0) != 0 || p.At(1) != 2 || p.At(2) != 14 || p.At(3) != Invalid || p.At(8) != Invalid || p.At(-1) != Invalid {
		t.Errorf("subfields of %s: %d %d %d %d", p, p.At(0), p.At(1), p.At(2), p.At(3))
	}
	if p.Depth() != 3 || Root.Depth() != 0 || Path(0).Depth() != MaxLevels {
		t.Errorf("depths %d %d %d", p.Depth(), Root.Depth(), Path(0).Depth())
	}
	if c := p.Cut(1); c != 0x0FFFFFFF {
		t.Errorf("cut at 1: %s", c)
	}
	if p.Cut(0) != Root || p.Cut(8) != p {
		t.Errorf("cut at the ends: %s %s", p.Cut(0), p.Cut(8))
	}
	for _, tc := range []struct {
		in   []Path
		want Path
	}{
		{[]Path{0x012FFFFF}, 0x012FFFFF},
		{[]Path{0x012FFFFF, 0x013FFFFF}, 0x01FFFFFF},             // siblings at level 2: their parent
		{[]Path{0x012FFFFF, 0x0FFFFFFF}, 0x0FFFFFFF},             // one stops at level 1
		{[]Path{0x012FFFFF, 0x10FFFFFF}, Root},                   // different subtrees of the root
		{[]Path{0x0123FFFF, 0x012FFFFF, 0x01FFFFFF}, 0x01FFFFFF}, // three at different depths
		{nil, Root},
	} {
		if got := Merge(tc.in...); got != tc.want {
			t.Errorf("Merge(%v) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// fake is a flowspace that runs the classes it is given.
type fake struct {
	Position
	name    string
	classes []string
	ifaces  []string
	any     bool // captures any interface, like the tc hook
}

func (f *fake) Name() string             { return f.name }
func (f *fake) Kind() Kind               { return KindTest }
func (f *fake) Target() functions.Target { return functions.TargetUser }
func (f *fake) Stores() bool             { return true }
func (f *fake) Entry(n string) Entry {
	for _, i := range f.ifaces {
		if i == n {
			return OwnEntry
		}
	}
	if f.any {
		return AnyEntry
	}
	return NoEntry
}
func (f *fake) Host(n *Node) error {
	for _, c := range f.classes {
		if c == n.Class.Name {
			return nil
		}
	}
	return errors.New("no " + n.Class.Name)
}
func (f *fake) Instantiate(*Node) error        { return nil }
func (f *fake) Remove(*Node)                   {}
func (f *fake) Connect() error                 { return nil }
func (f *fake) Activate(context.Context) error { return nil }
func (f *fake) Wait() error                    { return nil }
func (f *fake) Stop()                          {}
func (f *fake) Close() error                   { return nil }

func TestPlaceDescendsAndBubblesUp(t *testing.T) {
	root := &fake{name: "user", classes: []string{"a", "b", "c", "cap"}}
	k := &fake{name: "kernel", classes: []string{"a", "b"}}
	n0 := &fake{name: "nic0", classes: []string{"a", "cap"}, ifaces: []string{"eth0"}}
	n1 := &fake{name: "nic1", classes: []string{"b"}, ifaces: []string{"eth1"}}
	for _, e := range []struct{ p, c Flowspace }{{root, k}, {k, n0}, {k, n1}} {
		if _, err := Attach(e.p, e.c, "test", CopyOnce); err != nil {
			t.Fatal(err)
		}
	}
	node := func(class string) *Node { return &Node{Class: &functions.Class{Name: class}} }
	for _, tc := range []struct {
		class, iface string
		path         Path
		want         string
		wantPath     Path
		passed       string
	}{
		{"a", "", 0x00FFFFFF, "nic0", 0x00FFFFFF, ""},
		{"b", "", 0x00FFFFFF, "kernel", 0x0FFFFFFF, "nic0"},
		{"c", "", 0x00FFFFFF, "user", Root, "nic0 kernel"},
		{"a", "", 0x0FFFFFFF, "kernel", 0x0FFFFFFF, ""},     // stops where the path says
		{"a", "", 0x01FFFFFF, "kernel", 0x0FFFFFFF, "nic1"}, // nic1 lacks a
		{"cap", "eth0", Root, "nic0", 0x00FFFFFF, ""},       // a capture descends to its interface
		{"cap", "eth1", Root, "user", Root, "nic1 kernel"},  // and bubbles up from there
		{"cap", "wlan0", Root, "user", Root, ""},            // an interface the tree lacks
		{"a", "", 0x05FFFFFF, "kernel", 0x0FFFFFFF, ""},     // no child 5: stop above it
	} {
		q := &Query{Node: node(tc.class), Iface: tc.iface, Path: tc.path}
		if !Place(root, q) {
			t.Fatalf("%+v: not placed", tc)
		}
		var passed []string
		for _, r := range q.Trail {
			passed = append(passed, r.Flowspace.Name())
		}
		if q.Placed.Name() != tc.want || q.Path != tc.wantPath || strings.Join(passed, " ") != tc.passed {
			t.Errorf("%s from %s: placed in %s with %s passing over %v; want %s with %s passing over %q",
				tc.class, tc.path, q.Placed.Name(), q.Path, passed, tc.want, tc.wantPath, tc.passed)
		}
		if PathOf(q.Placed) != q.Path || Resolve(root, q.Path) != q.Placed {
			t.Errorf("PathOf(%s) = %s, Resolve(%s) = %s", q.Placed.Name(), PathOf(q.Placed), q.Path, Resolve(root, q.Path).Name())
		}
	}
	if Place(root, &Query{Node: node("z"), Path: 0x00FFFFFF}) {
		t.Error("a class nobody runs was placed")
	}
}

// A capture goes to the flowspace that has its interface as its own, even
// past a sibling that can capture any interface.
func TestCapturePrefersOwnInterface(t *testing.T) {
	root := &fake{name: "user", classes: []string{"cap"}, any: true}
	k := &fake{name: "kernel", classes: []string{"cap"}, any: true}
	x := &fake{name: "xdp:eth0", classes: []string{"cap"}, ifaces: []string{"eth0"}}
	board := &fake{name: "board", classes: []string{"cap"}, ifaces: []string{"eth5"}}
	for _, e := range []struct{ p, c Flowspace }{{root, k}, {k, x}, {root, board}} {
		if _, err := Attach(e.p, e.c, "test", CopyOnce); err != nil {
			t.Fatal(err)
		}
	}
	for iface, want := range map[string]string{"eth5": "board", "eth0": "xdp:eth0", "wlan0": "kernel"} {
		q := &Query{Node: &Node{Class: &functions.Class{Name: "cap"}}, Iface: iface, Path: Root}
		if !Place(root, q) || q.Placed.Name() != want {
			t.Errorf("capture of %s placed in %v, want %s", iface, q.Placed, want)
		}
	}
}

func TestAttachLimits(t *testing.T) {
	root := &fake{name: "root"}
	for i := range MaxChildren {
		if _, err := Attach(root, &fake{name: string(rune('a' + i))}, "x", CopyOnce); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Attach(root, &fake{name: "p"}, "x", CopyOnce); err == nil || !strings.Contains(err.Error(), "more than 15 children") {
		t.Errorf("16th child: %v", err)
	}
	var fs Flowspace = &fake{name: "l0"}
	for l := 1; l < MaxLevels; l++ {
		c := &fake{name: "l"}
		if _, err := Attach(fs, c, "x", ZeroCopy); err != nil {
			t.Fatalf("level %d: %v", l, err)
		}
		fs = c
	}
	if _, err := Attach(fs, &fake{name: "deep"}, "x", CopyOnce); err == nil || !strings.Contains(err.Error(), "at most 8 levels") {
		t.Errorf("ninth level: %v", err)
	}
	if _, err := Attach(root, &fake{name: "q"}, "x", "teleport"); err == nil {
		t.Error("unknown strategy accepted")
	}
}
