package hierarchy

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/kernel"
	"github.com/ffpf-go/ffpf/flowspaces/user"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// Info describes one flowspace of a hierarchy and, in Children, the tree
// beneath it; it marshals to the JSON of 'ffpf hierarchy --json'. Every key
// is always present.
type Info struct {
	Name   string           `json:"name"`
	Kind   flowspaces.Kind  `json:"kind"`
	Level  int              `json:"level"`
	Path   string           `json:"path"` // the path field, "0x0fffffff"
	Target functions.Target `json:"target"`
	Stores bool             `json:"stores"` // keeps packets in PBufs (false: in place)
	// Barrier and Bridge describe the crossing up to the parent; both are
	// "" at the root.
	Barrier string              `json:"barrier"`
	Bridge  flowspaces.Strategy `json:"bridge"`
	// Classes are the classes it runs, sorted: those a test flowspace is
	// restricted to, else every class with an implementation for its
	// target ([] when none).
	Classes []string `json:"classes"`
	// Interfaces are those whose packets enter here: the simulated ones of
	// a test flowspace, with their traffic, or the one of an xdp flowspace;
	// null when every interface of the machine does (userspace, the kernel).
	Interfaces []Interface `json:"interfaces"`
	// Switch describes a p4 flowspace's switch; null for the others.
	Switch   *Switch `json:"switch"`
	Children []*Info `json:"children"`

	restricted bool // Classes is a test flowspace's own list
}

// Interface is a network interface whose packets enter a flowspace.
type Interface struct {
	Name string `json:"name"`
	// Traffic is the source term a simulated interface replays, as
	// written; "" for a real interface, or a simulated one given none.
	Traffic string `json:"traffic"`
}

// Switch is what a hierarchy says of a switch (a p4 flowspace).
type Switch struct {
	P4Runtime string `json:"p4runtime"`
	DeviceID  uint64 `json:"device_id"`
	// Uplink is the port cabled to the parent's NIC, or "cpu".
	Uplink    string         `json:"uplink"`
	CPUPort   int            `json:"cpu_port"`
	Ports     map[string]int `json:"ports"` // front-panel ports by interface name
	Resources p4gen.Profile  `json:"resources"`
}

// Describe returns the tree rooted at root, with the classes of
// functions.Default (DescribeWith names another registry). It reads the
// classes and interfaces of the flowspace kinds it knows (flowspaces/user
// and flowspaces/kernel); of any other it gives what the Flowspace
// interface tells.
func Describe(root flowspaces.Flowspace) *Info { return DescribeWith(root, functions.Default) }

// DescribeWith is Describe with the classes of reg.
func DescribeWith(root flowspaces.Flowspace, reg *functions.Registry) *Info {
	in := &Info{
		Name:     root.Name(),
		Kind:     root.Kind(),
		Level:    root.Level(),
		Path:     flowspaces.PathOf(root).String(),
		Target:   root.Target(),
		Stores:   root.Stores(),
		Children: []*Info{},
	}
	if s := flowspaces.StubOf(root); s != nil {
		in.Barrier, in.Bridge = s.Barrier, s.Strategy
	}
	in.Classes = []string{}
	for _, c := range reg.All() { // sorted by name
		if c.Supports(root.Target()) {
			in.Classes = append(in.Classes, c.Name)
		}
	}
	switch fs := root.(type) {
	case *user.Flowspace:
		if cs := fs.Classes(); cs != nil {
			in.Classes = slices.Clone(cs) // [] stays []: runs no class
			slices.Sort(in.Classes)
			in.restricted = true
		}
		if fs.Kind() != flowspaces.KindUser || len(fs.Interfaces()) > 0 {
			in.Interfaces = []Interface{} // a test flowspace sees only its own
		}
		for _, name := range fs.Interfaces() {
			i := Interface{Name: name}
			if t := fs.Traffic(name); t != nil {
				i.Traffic = t.Term
			}
			in.Interfaces = append(in.Interfaces, i)
		}
	case *kernel.Flowspace:
		if name := fs.Interface(); name != "" {
			in.Interfaces = []Interface{{Name: name}}
		}
	default:
		if sw, ifaces, ok := describeSwitch(fs); ok {
			in.Switch, in.Interfaces = sw, ifaces
		}
	}
	for _, c := range root.Children() {
		in.Children = append(in.Children, DescribeWith(c.Child(), reg))
	}
	return in
}

// Format writes the tree rooted at root, one flowspace per line, with the
// columns aligned; examples/hierarchy/two-nics.yaml shows as
//
//	user        user  level 0  path 0xffffffff  stores packets
//	└─ kernel   test  level 1  path 0x0fffffff  in place        via user/kernel, zero-copy  classes: bpf, bytecount, pktcount
//	   ├─ nic0  test  level 2  path 0x00ffffff  stores packets  via pci, copy-once          classes: bpf                       interfaces: eth0 (gen,seed=1,packets=20000)
//	   └─ nic1  test  level 2  path 0x01ffffff  stores packets  via pci, copy-once          classes: bpf                       interfaces: eth1 (gen,seed=2,packets=20000)
//
// "in place" is a flowspace that keeps no PBuf; "via" names the barrier to
// the parent and the strategy of the bridge across it; "classes: any with
// Go code" is a test flowspace whose classes are not restricted.
func Format(w io.Writer, root flowspaces.Flowspace) error {
	var rows [][]string
	var walk func(in *Info, prefix, branch string)
	walk = func(in *Info, prefix, branch string) {
		rows = append(rows, row(in, prefix+branch+in.Name))
		for i, c := range in.Children {
			next, b := prefix, "├─ "
			if i == len(in.Children)-1 {
				b = "└─ "
			}
			if branch == "├─ " {
				next += "│  "
			} else if branch != "" {
				next += "   "
			}
			walk(c, next, b)
		}
	}
	walk(Describe(root), "", "")

	var widths []int
	for _, r := range rows {
		for i, cell := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		var line strings.Builder
		for i, cell := range r {
			line.WriteString(cell)
			if i < len(r)-1 {
				line.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell)+2))
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// row returns the cells of one line of Format.
func row(in *Info, name string) []string {
	store := "in place"
	if in.Stores {
		store = "stores packets"
	}
	via := ""
	if in.Barrier != "" || in.Bridge != "" {
		via = fmt.Sprintf("via %s, %s", in.Barrier, in.Bridge)
	}
	classes := ""
	switch {
	case !in.restricted && in.Kind == flowspaces.KindTest:
		classes = "classes: any with Go code"
	case !in.restricted:
	case len(in.Classes) == 0:
		classes = "classes: none"
	default:
		classes = "classes: " + strings.Join(in.Classes, ", ")
	}
	ifaces := ""
	if in.Interfaces != nil {
		var parts []string
		for _, i := range in.Interfaces {
			switch {
			case i.Traffic != "":
				parts = append(parts, i.Name+" "+i.Traffic)
			case in.Kind == flowspaces.KindTest:
				parts = append(parts, i.Name+" (no traffic)")
			case in.Switch != nil:
				parts = append(parts, fmt.Sprintf("%s (port %d)", i.Name, in.Switch.Ports[i.Name]))
			default:
				parts = append(parts, i.Name)
			}
		}
		if len(parts) > 0 {
			ifaces = "interfaces: " + strings.Join(parts, ", ")
		}
	}
	if in.Switch != nil {
		ifaces += fmt.Sprintf("  P4Runtime %s, device %d", in.Switch.P4Runtime, in.Switch.DeviceID)
	}
	if classes == "" {
		classes, ifaces = ifaces, "" // no gap before an xdp flowspace's interface
	}
	return []string{name, string(in.Kind), fmt.Sprintf("level %d", in.Level), "path " + in.Path, store, via, classes, ifaces}
}
