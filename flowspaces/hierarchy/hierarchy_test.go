package hierarchy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/kernel"
	"github.com/ffpf-go/ffpf/flowspaces/p4"
	"github.com/ffpf-go/ffpf/flowspaces/user"
	"github.com/ffpf-go/ffpf/functions"
	_ "github.com/ffpf-go/ffpf/functions/builtin"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

const examples = "../../examples/hierarchy/"

func format(t *testing.T, fs flowspaces.Flowspace) string {
	t.Helper()
	var b strings.Builder
	if err := Format(&b, fs); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// The example files load, and show as these trees.
func TestExamples(t *testing.T) {
	want := map[string]string{
		"two-nics.yaml": `
user        user  level 0  path 0xffffffff  stores packets
└─ kernel   test  level 1  path 0x0fffffff  in place        via user/kernel, zero-copy  classes: bpf, bytecount, pktcount
   ├─ nic0  test  level 2  path 0x00ffffff  stores packets  via pci, copy-once          classes: bpf                       interfaces: eth0 (gen,seed=1,packets=20000)
   └─ nic1  test  level 2  path 0x01ffffff  stores packets  via pci, copy-once          classes: bpf                       interfaces: eth1 (gen,seed=2,packets=20000)
`,
		"figure4.yaml": `
user          user  level 0  path 0xffffffff  stores packets
└─ kernel     test  level 1  path 0x0fffffff  in place        via user/kernel, zero-copy  classes: bpf, bytecount, pktcount
   ├─ ixp0    test  level 2  path 0x00ffffff  stores packets  via pci, zero-copy          classes: bpf, pktcount
   │  └─ me0  test  level 3  path 0x000fffff  stores packets  via on-chip, zero-copy      classes: bpf                       interfaces: ixp0-port0 (gen,seed=1,packets=20000)
   ├─ ixp1    test  level 2  path 0x01ffffff  stores packets  via pci, zero-copy          classes: bpf, pktcount
   │  └─ me1  test  level 3  path 0x010fffff  stores packets  via on-chip, zero-copy      classes: bpf                       interfaces: ixp1-port0 (gen,seed=2,packets=20000)
   └─ nic0    test  level 2  path 0x02ffffff  stores packets  via pci, copy-once          classes: none                      interfaces: eth0 (gen,seed=3,packets=20000)
`,
		"figure9.yaml": `
user        user  level 0  path 0xffffffff  stores packets
└─ kernel   test  level 1  path 0x0fffffff  in place        via user/kernel, zero-copy  classes: bpf, bytecount, pktcount
   ├─ ixp0  test  level 2  path 0x00ffffff  stores packets  via pci, zero-copy          classes: bpf                       interfaces: ixp0 (gen,seed=1,packets=20000)
   ├─ ixp1  test  level 2  path 0x01ffffff  stores packets  via pci, zero-copy          classes: bpf                       interfaces: ixp1 (gen,seed=2,packets=20000)
   └─ nic0  test  level 2  path 0x02ffffff  stores packets  via pci, copy-once          classes: none                      interfaces: eth0 (gen,seed=3,packets=20000)
`,
		"tor.yaml": `
user            user    level 0  path 0xffffffff  stores packets
└─ kernel       kernel  level 1  path 0x0fffffff  in place        via user/kernel, copy-once
   └─ xdp:eth0  xdp     level 2  path 0x00ffffff  in place        via driver, copy-once                interfaces: eth0
      └─ tor    p4      level 3  path 0x000fffff  in place        via network link to eth0, copy-once  interfaces: swp1 (port 1)  P4Runtime 127.0.0.1:9559, device 1
`,
	}
	files, _ := filepath.Glob(examples + "*.yaml")
	if len(files) != len(want) {
		t.Errorf("examples/hierarchy has %d files, the test knows %d", len(files), len(want))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			root, err := Load(f, nil)
			if err != nil {
				t.Fatal(err)
			}
			w, ok := want[filepath.Base(f)]
			if !ok {
				t.Fatalf("no expected tree for %s", f)
			}
			if got := format(t, root); got != w[1:] {
				t.Errorf("Format:\n%s\nwant:\n%s", got, w[1:])
			}
			// Every simulated interface replays its traffic.
			flowspaces.Walk(root, func(fs flowspaces.Flowspace) {
				u, ok := fs.(*user.Flowspace)
				if !ok || fs.Kind() != flowspaces.KindTest {
					return
				}
				for _, i := range u.Interfaces() {
					checkTraffic(t, fs, i)
				}
			})
		})
	}
}

// checkTraffic captures iface where the hierarchy places the capture, and
// reads one batch of its simulated traffic.
func checkTraffic(t *testing.T, fs flowspaces.Flowspace, iface string) {
	t.Helper()
	dev, _ := functions.Default.Lookup("dev")
	p, err := dev.Bind([]functions.Arg{{Value: functions.Raw{Text: iface}}})
	if err != nil {
		t.Fatal(err)
	}
	n := &flowspaces.Node{ID: "dev", Class: dev, Ctx: functions.Context{Params: p, Snaplen: 2048}}
	root := fs
	for root.Parent() != nil {
		root = root.Parent()
	}
	q := &flowspaces.Query{Node: n, Iface: iface, Path: flowspaces.Root}
	if !flowspaces.Place(root, q) || q.Placed != fs {
		t.Fatalf("a capture of %s is placed at %v (refusals %v), want %s", iface, q.Placed, q.Trail, fs.Name())
	}
	if err := fs.Instantiate(n); err != nil {
		t.Fatalf("%s: %v", iface, err)
	}
	defer fs.Close()
	b := buffers.NewBatch(buffers.NewPBuf(buffers.MaxBatch, n.Ctx.Snaplen), 0, buffers.MaxBatch, 0)
	if err := n.Source.Fill(b); err != nil || b.N == 0 {
		t.Fatalf("%s: read %d packets, %v", iface, b.N, err)
	}
}

// Describe gives the JSON of 'ffpf hierarchy --json'.
func TestDescribeJSON(t *testing.T) {
	root, err := Load(examples+"two-nics.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(Describe(root))
	if err != nil {
		t.Fatal(err)
	}
	nic := func(name, path, iface, traffic string) string {
		return `{"name":"` + name + `","kind":"test","level":2,"path":"` + path + `","target":"user","stores":true,` +
			`"barrier":"pci","bridge":"copy-once","classes":["bpf"],` +
			`"interfaces":[{"name":"` + iface + `","traffic":"` + traffic + `"}],"switch":null,"children":[]}`
	}
	// Userspace runs every class with Go code.
	var user []string
	for _, c := range functions.Default.All() {
		if c.Supports(functions.TargetUser) {
			user = append(user, c.Name)
		}
	}
	if !slices.Contains(user, "pktcount") || slices.Contains(user, "nosuch") {
		t.Fatalf("user classes %v", user)
	}
	b, _ := json.Marshal(user)
	userClasses := string(b)
	want := `{"name":"user","kind":"user","level":0,"path":"0xffffffff","target":"user","stores":true,` +
		`"barrier":"","bridge":"","classes":` + userClasses + `,"interfaces":null,"switch":null,"children":[` +
		`{"name":"kernel","kind":"test","level":1,"path":"0x0fffffff","target":"user","stores":false,` +
		`"barrier":"user/kernel","bridge":"zero-copy","classes":["bpf","bytecount","pktcount"],"interfaces":[],"switch":null,"children":[` +
		nic("nic0", "0x00ffffff", "eth0", "(gen,seed=1,packets=20000)") + "," +
		nic("nic1", "0x01ffffff", "eth1", "(gen,seed=2,packets=20000)") + `]}]}`
	if string(got) != want {
		t.Errorf("JSON:\n%s\nwant:\n%s", got, want)
	}
}

// eBPF flowspaces, defaults, classes left open, interfaces without
// traffic, aliases.
func TestParseKinds(t *testing.T) {
	src := `
children:
  - name: board
    kind: test
    interfaces: [tap0, {name: tap1}]
    children:
      - name: any
        kind: test
  - kind: kernel
    children:
      - kind: xdp
        interface: eth0
      - {name: fast, kind: xdp, interface: eth1, bridge: zero-copy}
`
	root, err := Parse([]byte(src), "h.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `
user            user    level 0  path 0xffffffff  stores packets
├─ board        test    level 1  path 0x0fffffff  stores packets  via in-process, copy-once   classes: any with Go code  interfaces: tap0 (no traffic), tap1 (no traffic)
│  └─ any       test    level 2  path 0x00ffffff  stores packets  via in-process, copy-once   classes: any with Go code
└─ kernel       kernel  level 1  path 0x1fffffff  in place        via user/kernel, copy-once
   ├─ xdp:eth0  xdp     level 2  path 0x10ffffff  in place        via driver, copy-once       interfaces: eth0
   └─ fast      xdp     level 2  path 0x11ffffff  in place        via driver, zero-copy       interfaces: eth1
`
	if got := format(t, root); got != want[1:] {
		t.Errorf("Format:\n%s\nwant:\n%s", got, want[1:])
	}
	k := flowspaces.Find(root, "kernel").(*kernel.Flowspace)
	if s := flowspaces.StubOf(k); k.Kind() != flowspaces.KindKernel || s.Barrier != "user/kernel" || s.Strategy != flowspaces.CopyOnce {
		t.Errorf("kernel: %v %+v", k.Kind(), flowspaces.StubOf(k))
	}
	if x := flowspaces.Find(root, "fast").(*kernel.Flowspace); x.Interface() != "eth1" {
		t.Errorf("fast runs at %q", x.Interface())
	}
	in := Describe(root)
	if got := in.Children[1].Children[1].Interfaces; len(got) != 1 || got[0] != (Interface{Name: "eth1"}) {
		t.Errorf("xdp interfaces %v", got)
	}
	if b := in.Children[0]; b.restricted || !slices.Contains(b.Classes, "pktcount") || len(b.Interfaces) != 2 || b.Interfaces[0].Traffic != "" {
		t.Errorf("board: %+v", b)
	}
	// The eBPF flowspaces run the classes with eBPF code, not the others.
	for _, k := range []*Info{in.Children[1], in.Children[1].Children[0]} {
		if !slices.Contains(k.Classes, "bpf") || !slices.Contains(k.Classes, "pktcount") || slices.Contains(k.Classes, "export") {
			t.Errorf("%s runs classes %v", k.Name, k.Classes)
		}
	}
	if a := in.Children[0].Children[0]; a.Interfaces == nil || len(a.Interfaces) != 0 {
		t.Errorf("a test flowspace without interfaces gives %#v, want []", a.Interfaces)
	}
	// A test flowspace sees only its own interfaces, not the machine's.
	any := flowspaces.Find(root, "any")
	if any.Entry("eth0") != flowspaces.NoEntry || flowspaces.Find(root, "board").Entry("tap0") != flowspaces.OwnEntry {
		t.Error("test flowspaces see the wrong interfaces")
	}
	// An interface without traffic places, and fails clearly when run.
	dev, _ := functions.Default.Lookup("dev")
	p, _ := dev.Bind([]functions.Arg{{Value: functions.Raw{Text: "tap0"}}})
	n := &flowspaces.Node{ID: "dev", Class: dev, Ctx: functions.Context{Params: p}}
	q := &flowspaces.Query{Node: n, Iface: "tap0", Path: flowspaces.Root}
	if !flowspaces.Place(root, q) || q.Placed.Name() != "board" {
		t.Fatalf("tap0 placed at %v", q.Placed)
	}
	if err := q.Placed.Instantiate(n); err == nil || !strings.Contains(err.Error(), "board simulates tap0 but has no traffic") {
		t.Errorf("instantiating a capture of tap0: %v", err)
	}
}

// A file a traffic term names is relative to the hierarchy file.
func TestTrafficFileRelative(t *testing.T) {
	src := "children:\n  - {name: n, kind: test, interfaces: [{name: e, traffic: '(pcap,t.pcap)'}, {name: f, traffic: '(pcap,file=/abs.pcap)'}]}\n"
	root, err := Parse([]byte(src), filepath.Join("conf", "h.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	n := flowspaces.Find(root, "n").(*user.Flowspace)
	if got := n.Traffic("e").Params.Str("file"); got != filepath.Join("conf", "t.pcap") {
		t.Errorf("relative file %q", got)
	}
	if got := n.Traffic("f").Params.Str("file"); got != "/abs.pcap" {
		t.Errorf("absolute file %q", got)
	}
}

// Mistakes in a hierarchy file are one sentence with file and line.
func TestErrors(t *testing.T) {
	nested := func(depth int) string {
		var b strings.Builder
		b.WriteString("children:\n")
		for l := 1; l <= depth; l++ {
			ind := strings.Repeat("    ", l-1)
			fmt.Fprintf(&b, "%s  - name: l%d\n%s    kind: test\n", ind, l, ind)
			if l < depth {
				fmt.Fprintf(&b, "%s    children:\n", ind)
			}
		}
		return b.String()
	}
	var many strings.Builder
	many.WriteString("children:\n")
	for i := range 16 {
		fmt.Fprintf(&many, "  - {name: b%d, kind: test}\n", i)
	}
	board := func(extra string) string {
		return "name: user\nchildren:\n  - name: nic0\n    kind: test\n" + extra
	}
	for _, c := range []struct {
		name, src, want string
	}{
		{"unknown field", board("    clases: [bpf]\n"),
			`h.yaml:5: unknown field "clases" in flowspace nic0 (did you mean "classes"?)`},
		{"unknown field far", board("    colour: red\n"),
			`h.yaml:5: unknown field "colour" in flowspace nic0 (the fields are name, kind, classes, in_place, barrier, bridge, interfaces, interface, state, p4runtime, device_id, uplink, cpu_port, resources, children)`},
		{"field twice", board("    barrier: pci\n    barrier: usb\n"),
			`h.yaml:6: field barrier of flowspace nic0 is given twice (first at line 5)`},
		{"unknown class", board("    classes: [bpf, pktcnt]\n"),
			`h.yaml:5: unknown class "pktcnt" in flowspace nic0 (did you mean "pktcount"?)`},
		{"class twice", board("    classes: [bpf, BPF]\n"),
			`h.yaml:5: class bpf is listed twice in flowspace nic0`},
		{"classes not a list", board("    classes: bpf\n"),
			`h.yaml:5: classes of flowspace nic0 must be a list, e.g. [bpf, pktcount], not "bpf"`},
		{"duplicate name", "children:\n  - {name: nic0, kind: test}\n  - {name: nic0, kind: test}\n",
			`h.yaml:3: two flowspaces are named nic0 (the first at line 2)`},
		{"duplicate of the root", "children:\n  - {name: user, kind: test}\n",
			`h.yaml:2: two flowspaces are named user (the first at line 1)`},
		{"root kind", "name: user\nkind: test\n",
			`h.yaml:2: the root is userspace on the host: its kind is user, not test`},
		{"root field", "bridge: zero-copy\n",
			`h.yaml:1: field bridge does not apply to the root user (userspace on the host): it takes only name, state and children`},
		{"root not a mapping", "- a\n- b\n",
			`h.yaml:1: the root must be a mapping of fields (name, kind, children…), not a list`},
		{"too many children", many.String(),
			`h.yaml:17: flowspace user cannot have more than 15 children: the path field has 4 bits per level, one value reserved`},
		{"too deep", nested(8),
			`h.yaml:23: flowspace l8 would be at level 8: a hierarchy has at most 8 levels (8 path subfields of 4 bits)`},
		{"bad strategy", board("    bridge: zero_copy\n"),
			`h.yaml:5: unknown bridge strategy "zero_copy" for flowspace nic0 (did you mean "zero-copy"?)`},
		{"bad strategy far", board("    bridge: dma\n"),
			`h.yaml:5: unknown bridge strategy "dma" for flowspace nic0: want zero-copy or copy-once`},
		{"xdp without interface", "children:\n  - kind: xdp\n",
			`h.yaml:2: xdp flowspace at line 2 needs an interface: the one whose driver runs it`},
		{"no kind", "children:\n  - name: nic0\n",
			`h.yaml:2: flowspace nic0 needs a kind: test, kernel, xdp or p4`},
		{"unknown kind", "children:\n  - name: nic0\n    kind: tset\n",
			`h.yaml:3: unknown kind "tset" for flowspace nic0 (did you mean "test"?)`},
		{"child of kind user", "children:\n  - name: u2\n    kind: user\n",
			`h.yaml:3: flowspace u2 cannot be of kind user: only the root is userspace on the host (a simulated board is kind test)`},
		{"no name", "children:\n  - kind: test\n",
			`h.yaml:2: test flowspace at line 2 needs a name`},
		{"name with space", "children:\n  - {name: nic 0, kind: test}\n",
			`h.yaml:2: test flowspace nic 0 has name "nic 0": a name cannot contain spaces or control characters`},
		{"classes on kernel", "children:\n  - kind: kernel\n    classes: [bpf]\n",
			`h.yaml:3: field classes does not apply to flowspace at line 2: it applies to test flowspaces only, and this one is kernel`},
		{"interface on test", board("    interface: eth0\n"),
			`h.yaml:5: field interface does not apply to flowspace nic0: a test flowspace lists the interfaces it simulates under interfaces`},
		{"kernel below test", board("    children:\n      - kind: kernel\n"),
			`h.yaml:6: kernel flowspace kernel cannot sit below test flowspace nic0: the host's kernel hangs beneath userspace`},
		{"interface twice", "children:\n  - {name: a, kind: test, interfaces: [eth0]}\n  - {name: b, kind: test, interfaces: [eth0]}\n",
			`h.yaml:3: packets of interface eth0 already enter the hierarchy at a (line 2), not also at b`},
		{"interface field", board("    interfaces:\n      - {name: eth0, trafic: '(gen)'}\n"),
			`h.yaml:6: unknown field "trafic" in an interface of flowspace nic0 (did you mean "traffic"?)`},
		{"in_place", board("    in_place: maybe\n"),
			`h.yaml:5: in_place of flowspace nic0 must be true or false, not "maybe"`},
		{"traffic not a source", board("    interfaces: [{name: eth0, traffic: '(bpf,\"tcp\")'}]\n"),
			`h.yaml:5: the traffic of eth0 in flowspace nic0 must be a source (gen, pcap), and bpf is not one`},
		{"traffic captures", board("    interfaces: [{name: eth0, traffic: '(dev,eth1)'}]\n"),
			`h.yaml:5: the traffic of eth0 in flowspace nic0 cannot capture a live interface (dev): it stands in for one; use gen or pcap`},
		{"traffic unknown class", board("    interfaces: [{name: eth0, traffic: '(gne)'}]\n"),
			`h.yaml:5: the traffic of eth0 in flowspace nic0 names unknown class "gne" (did you mean "gen"?)`},
		{"traffic parameter", board("    interfaces: [{name: eth0, traffic: '(gen,sed=2)'}]\n"),
			`h.yaml:5: the traffic of eth0 in flowspace nic0: class gen has no parameter "sed" (did you mean "seed"?)`},
		{"traffic value", board("    interfaces: [{name: eth0, traffic: '(gen,packets=-1)'}]\n"),
			`h.yaml:5: the traffic of eth0 in flowspace nic0: parameter packets of class gen: -1 is negative`},
		{"traffic syntax", board("    interfaces: [{name: eth0, traffic: '(gen,seed=1'}]\n"),
			`h.yaml:5: the traffic of eth0 in flowspace nic0, "(gen,seed=1", is not a term: missing ")" to close the function opened at 1:1 (column 12 of the term)`},
		{"traffic chain", board("    interfaces: [{name: eth0, traffic: '(gen) > (bpf,tcp)'}]\n"),
			`h.yaml:5: the traffic of eth0 in flowspace nic0 must be one source term such as (gen,seed=1), not "(gen) > (bpf,tcp)"`},
		{"tab", "children:\n  - name: a\n\tkind: test\n",
			`h.yaml:3: found a tab character that violates indentation`},
		{"tab at the start of a block", "children:\n\t- name: a\n",
			`h.yaml:2: found character that cannot start any token (YAML indents with spaces, not tabs)`},
		{"yaml syntax", "children: [a, b\n",
			`h.yaml:1: did not find expected ',' or ']'`},
		{"empty", "# nothing\n", `h.yaml: the file is empty: a hierarchy needs at least its root`},
		{"two documents", "name: user\n---\nname: other\n",
			`h.yaml:2: a hierarchy file holds one YAML document, this is a second one`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.src), "h.yaml", nil)
			if err == nil {
				t.Fatalf("no error, want %s", c.want)
			}
			if err.Error() != c.want {
				t.Errorf("error\n%s\nwant\n%s", err, c.want)
			}
			var e *Error
			if !errors.As(err, &e) || e.File != "h.yaml" {
				t.Errorf("%T is not a *Error of h.yaml", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Error("the message spans lines")
			}
		})
	}
}

func TestLoadUnreadable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.yaml")
	_, err := Load(path, nil)
	if want := "cannot read " + path + ": no such file or directory"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}

// A class without a Go implementation cannot be given to a test flowspace.
func TestClassWithoutGo(t *testing.T) {
	reg := functions.NewRegistry()
	if err := reg.Register(&functions.Class{Name: "ebpfonly", Targets: []functions.Target{functions.TargetXDP},
		New: func(*functions.Context) (functions.Function, error) { return nil, nil }}); err != nil {
		t.Fatal(err)
	}
	_, err := Parse([]byte("children:\n  - {name: n, kind: test, classes: [ebpfonly]}\n"), "h.yaml", reg)
	if want := "h.yaml:2: class ebpfonly has no Go implementation, so test flowspace n cannot run it"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}

// The machine's hierarchy: userspace always; the kernel when eBPF programs
// load (as root, in CI).
func TestDiscover(t *testing.T) {
	root, absent := Discover(nil)
	if root == nil || root.Kind() != flowspaces.KindUser || root.Level() != 0 || root.Parent() != nil {
		t.Fatalf("root %v", root)
	}
	t.Logf("\n%s", format(t, root))
	for _, a := range absent {
		t.Log("absent: ", a)
	}
	k := flowspaces.Find(root, "kernel")
	if k == nil {
		if os.Geteuid() == 0 && os.Getenv("CI") != "" {
			t.Fatalf("root in CI, but the kernel flowspace is absent: %s", strings.Join(absent, "; "))
		}
		if len(absent) == 0 || !strings.HasPrefix(absent[0], "kernel: ") {
			t.Errorf("no kernel and no reason: %q", absent)
		}
		return
	}
	if k.Parent() != root || k.Kind() != flowspaces.KindKernel {
		t.Errorf("kernel at %v", k.Parent())
	}
	if s := flowspaces.StubOf(k); s.Barrier != "user/kernel" || s.Strategy != flowspaces.ZeroCopy {
		t.Errorf("kernel stub %+v", s)
	}
	for _, c := range k.Children() {
		x := c.Child().(*kernel.Flowspace)
		if x.Kind() != flowspaces.KindXDP || x.Name() != "xdp:"+x.Interface() || c.Barrier != "driver" || c.Strategy != flowspaces.CopyOnce {
			t.Errorf("%s: %v %q %+v", x.Name(), x.Kind(), x.Interface(), c)
		}
	}
	// The probes run once: a second discovery is quick and the same.
	root2, absent2 := Discover(nil)
	if format(t, root2) != format(t, root) || len(absent2) != len(absent) {
		t.Error("a second Discover differs")
	}
}

// Without the privilege to load eBPF programs, Discover still returns
// userspace, and says why the rest is absent. As root the test reruns
// itself with every capability dropped.
func TestDiscoverUnprivileged(t *testing.T) {
	if os.Getenv("HIERARCHY_TEST_UNPRIVILEGED") == "1" {
		root, absent := Discover(nil)
		if root == nil || len(root.Children()) != 0 {
			t.Fatalf("unprivileged: %v with children", root)
		}
		if len(absent) == 0 || !strings.HasPrefix(absent[0], "kernel: eBPF programs cannot be loaded here (operation not permitted): ") {
			t.Fatalf("absent: %q", absent)
		}
		return
	}
	if os.Geteuid() != 0 {
		root, absent := Discover(nil)
		if root == nil {
			t.Fatal("no root")
		}
		if flowspaces.Find(root, "kernel") == nil && len(absent) == 0 {
			t.Error("no kernel and no reason")
		}
		return
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv is not installed: cannot drop capabilities")
	}
	cmd := exec.Command(setpriv, "--bounding-set=-all", "--inh-caps=-all", os.Args[0],
		"-test.run=^TestDiscoverUnprivileged$", "-test.v")
	cmd.Env = append(os.Environ(), "HIERARCHY_TEST_UNPRIVILEGED=1")
	out, err := cmd.CombinedOutput()
	switch {
	case bytes.Contains(out, []byte("--- PASS")):
	case bytes.Contains(out, []byte("--- FAIL")):
		t.Fatalf("without capabilities:\n%s", out)
	default:
		t.Skipf("cannot drop capabilities here (%v): %s", err, out)
	}
}

// The layout Discover builds from the probe results, and the reasons.
func TestDiscoverLayout(t *testing.T) {
	var ifaces []string
	for i := range 17 {
		ifaces = append(ifaces, fmt.Sprintf("eth%02d", i))
	}
	root, absent := discover(probes{}, ifaces, nil)
	k := flowspaces.Find(root, "kernel")
	if k == nil || len(k.Children()) != flowspaces.MaxChildren {
		t.Fatalf("kernel %v", k)
	}
	if got := k.Children()[14].Name(); got != "xdp:eth14" {
		t.Errorf("15th xdp flowspace %s", got)
	}
	want := []string{
		"xdp:eth15: the kernel flowspace has room for 15 children only (4 bits of the path field per level), taken by the first interfaces by name",
		"xdp:eth16: the kernel flowspace has room for 15 children only (4 bits of the path field per level), taken by the first interfaces by name",
	}
	if fmt.Sprint(absent) != fmt.Sprint(want) {
		t.Errorf("absent %q", absent)
	}

	_, absent = discover(probes{xdp: fmt.Errorf("detect support for XDP: %w", ebpf.ErrNotSupported)}, []string{"eth1", "eth0"}, nil)
	want = []string{
		"xdp:eth0: this kernel cannot load XDP eBPF programs (detect support for XDP: not supported)",
		"xdp:eth1: this kernel cannot load XDP eBPF programs (detect support for XDP: not supported)",
	}
	if fmt.Sprint(absent) != fmt.Sprint(want) {
		t.Errorf("absent %q", absent)
	}

	root, absent = discover(probes{kernel: fmt.Errorf("load program: %w", syscall.EPERM)}, []string{"eth0"}, nil)
	if len(root.Children()) != 0 || len(absent) != 2 || !strings.HasPrefix(absent[0], "kernel: eBPF programs cannot be loaded here (operation not permitted): ") ||
		absent[1] != "xdp:eth0: the kernel flowspace it would hang beneath is absent" {
		t.Errorf("absent %q", absent)
	}
}

// A hierarchy file is a regular file of at most functions.MaxFileSize bytes: a
// device would be read without end, a FIFO without a writer would block
// for ever.
func TestLoadBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, bytes.Repeat([]byte("# padding\n"), functions.MaxFileSize/10+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{"/dev/zero", "cannot read /dev/zero: it is a character device, not a regular file"},
		{fifo, "cannot read " + fifo + ": it is a named pipe (FIFO), not a regular file"},
		{dir, "cannot read " + dir + ": it is a directory, not a regular file"},
		{big, fmt.Sprintf("cannot read %s: it is %d bytes, and a hierarchy file may have at most 1048576 (1 MiB)", big, (functions.MaxFileSize/10+1)*10)},
	} {
		done := make(chan error, 1)
		go func() { _, err := Load(c.path, nil); done <- err }()
		select {
		case err := <-done:
			if err == nil || err.Error() != c.want {
				t.Errorf("Load(%s): %v, want %s", c.path, err, c.want)
			}
		case <-time.After(time.Minute):
			t.Fatalf("Load(%s) did not return within a minute", c.path)
		}
	}
}

// TestStateField: state: bounds a flowspace's state (a size, or none),
// at the root too; omitted, the default share of the RAM applies.
func TestStateField(t *testing.T) {
	src := "state: 64MB\nchildren:\n  - {name: nic0, kind: test, state: none}\n  - {name: nic1, kind: test, state: 1.5KB}\n  - {name: nic2, kind: test}\n  - {kind: kernel, state: 4096}\n"
	root, err := Parse([]byte(src), "h.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	type limited interface{ StateLimit() (int64, int64) }
	for name, want := range map[string]int64{"user": 64 << 20, "nic0": -1, "nic1": 1536, "nic2": flowspaces.MemoryShare(2), "kernel": 4096} {
		if got, _ := flowspaces.Find(root, name).(limited).StateLimit(); got != want {
			t.Errorf("%s: state limit %d, want %d", name, got, want)
		}
	}
	for _, bad := range []string{"state: -1MB\n", "state: 2TB\n", "state: [1]\n", "state: 0.5B\n"} {
		if _, err := Parse([]byte(bad), "h.yaml", nil); err == nil || !strings.Contains(err.Error(), "state of flowspace user must be") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// A switch (kind p4): its P4Runtime address, device, uplink, ports and
// resources; its mistakes are one sentence at their line.
func TestSwitch(t *testing.T) {
	under := func(fields string) string {
		return "children:\n  - name: xdp:eth0\n    kind: xdp\n    interface: eth0\n    children:\n      - name: tor\n        kind: p4\n" + fields
	}
	good := "        p4runtime: 127.0.0.1:9559\n        device_id: 7\n        uplink: 1\n        interfaces: [{name: swp1, port: 2}, {name: swp2, port: 3}]\n"
	root, err := Parse([]byte(under(good+"        resources: {stages: 4, stateful_alus: 2}\n")), "h.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	sw, ok := flowspaces.Find(root, "tor").(*p4.Flowspace)
	if !ok {
		t.Fatal("no switch tor")
	}
	o := sw.Options()
	prof := p4gen.Tofino1()
	prof.Stages, prof.ALUs = 4, 2
	if o.Address != "127.0.0.1:9559" || o.DeviceID != 7 || o.Uplink != 1 || o.UplinkIface != "eth0" || o.CPUPort != p4.DefaultCPUPort ||
		o.Ports["swp2"] != 3 || !reflect.DeepEqual(o.Profile, prof) {
		t.Errorf("switch options %+v", o)
	}
	if sw.Entry("swp1") != flowspaces.OwnEntry || sw.Entry("eth0") != flowspaces.NoEntry {
		t.Error("swp1 does not enter at the switch, or eth0 does")
	}
	if s := flowspaces.StubOf(sw); s.Barrier != "network link to eth0" {
		t.Errorf("barrier %q", s.Barrier)
	}
	cpu := "children:\n  - name: tor\n    kind: p4\n    p4runtime: sw:9559\n    device_id: 0\n    uplink: cpu\n    cpu_port: 64\n    interfaces: [{name: swp1, port: 2}]\n"
	root, err = Parse([]byte(cpu), "h.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if o := flowspaces.Find(root, "tor").(*p4.Flowspace).Options(); !o.UplinkCPU || o.CPUPort != 64 {
		t.Errorf("a CPU-port uplink: %+v", o)
	}
	for _, c := range []struct{ name, src, want string }{
		{"no address", under("        device_id: 1\n        uplink: 1\n        interfaces: [{name: swp1, port: 2}]\n"),
			"h.yaml:6: switch tor needs p4runtime: the host:port of its P4Runtime server"},
		{"bad address", under("        p4runtime: localhost\n"),
			`h.yaml:8: p4runtime of switch tor must be host:port (127.0.0.1:9559), not "localhost"`},
		{"bad device", under("        p4runtime: a:1\n        device_id: -1\n"),
			`h.yaml:9: device_id of switch tor must be a whole number from 0 to 2^64-1, not "-1"`},
		{"uplink under the root", "children:\n  - name: tor\n    kind: p4\n    p4runtime: a:1\n    device_id: 1\n    uplink: 1\n",
			"h.yaml:6: switch tor's uplink, port 1, is a network link to its parent's NIC: it hangs beneath an xdp flowspace (the NIC), not beneath user flowspace user; or write uplink: cpu"},
		{"cpu under xdp", under("        p4runtime: a:1\n        device_id: 1\n        uplink: cpu\n"),
			"h.yaml:10: switch tor sends up through its CPU port, to the controller in userspace: it hangs beneath the root, not beneath xdp flowspace xdp:eth0"},
		{"port is the uplink", under("        p4runtime: a:1\n        device_id: 1\n        uplink: 1\n        interfaces: [{name: swp1, port: 1}]\n"),
			"h.yaml:11: interface swp1 of switch tor is port 1, its uplink"},
		{"port twice", under("        p4runtime: a:1\n        device_id: 1\n        uplink: 1\n        interfaces:\n          - {name: swp1, port: 2}\n          - {name: swp2, port: 2}\n"),
			"h.yaml:13: interfaces swp1 and swp2 of switch tor are both port 2"},
		{"port out of range", under("        p4runtime: a:1\n        device_id: 1\n        uplink: 1\n        interfaces: [{name: swp1, port: 511}]\n"),
			`h.yaml:11: the port of interface swp1 of switch tor must be a port number from 1 to 510, not "511"`},
		{"no ports", under("        p4runtime: a:1\n        device_id: 1\n        uplink: 1\n"),
			"h.yaml:6: switch tor needs interfaces: its front-panel ports, e.g. [{name: swp1, port: 2}]"},
		{"zero stages", under(good + "        resources:\n          sram_blocks: 40\n          stages: 0\n"),
			"h.yaml:14: switch tor: resource stages: 0 is out of range (1 to 64)"},
		{"absurd SRAM", under(good + "        resources: {sram_depth: 99999999}\n"),
			"h.yaml:12: switch tor: resource sram_depth: 99999999 is out of range (16 to 1048576)"},
		{"bad register width", under(good + "        resources: {register_widths: [8, 12]}\n"),
			"h.yaml:12: switch tor: resource register_widths: 12 is not 1, 8, 16, 32 or 64"},
		{"unknown resource", under(good + "        resources: {stage: 4}\n"),
			`h.yaml:12: unknown resource "stage" of switch tor (did you mean "stages"?)`},
		{"state on a switch", under(good + "        state: 1MB\n"),
			"h.yaml:12: field state does not apply to flowspace tor: a switch's room is its resources (stages, SRAM, stateful ALUs), given under resources"},
		{"p4runtime on a board", "children:\n  - name: nic0\n    kind: test\n    p4runtime: a:1\n",
			"h.yaml:4: field p4runtime does not apply to flowspace nic0: it applies to p4 flowspaces (switches) only, and this one is test"},
		{"children of a switch", under(good + "        children: [{name: x, kind: test}]\n"),
			"h.yaml:12: switch tor cannot have children: packets enter at its ports, and nothing lies beneath it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.src), "h.yaml", nil)
			if err == nil || err.Error() != c.want {
				t.Errorf("got  %v\nwant %s", err, c.want)
			}
		})
	}
}
