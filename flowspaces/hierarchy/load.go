package hierarchy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"gopkg.in/yaml.v3"

	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/kernel"
	"github.com/ffpf-go/ffpf/flowspaces/user"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/lang"
)

// Error is a mistake in a hierarchy file: "two-nics.yaml:7: unknown field
// "clases" in flowspace nic0 (did you mean "classes"?)". Line is 0 when the
// mistake has no place in the file (it cannot be read, say).
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line <= 0 {
		return e.File + ": " + e.Msg
	}
	return e.File + ":" + strconv.Itoa(e.Line) + ": " + e.Msg
}

// Load reads a hierarchy file (see the package documentation for its
// schema) and builds the flowspaces it describes; reg (nil:
// functions.Default) checks the class names and traffic terms.
func Load(path string, reg *functions.Registry) (flowspaces.Flowspace, error) {
	data, err := functions.ReadFile(path, "a hierarchy file")
	if err != nil {
		return nil, err
	}
	return Parse(data, path, reg)
}

// Parse is Load of data read from filename, which names the file in
// errors; a relative file named by a traffic term (a pcap trace) is taken
// relative to filename's directory.
func Parse(data []byte, filename string, reg *functions.Registry) (flowspaces.Flowspace, error) {
	if reg == nil {
		reg = functions.Default
	}
	p := &parser{file: filename, src: data, reg: reg,
		names: map[string]int{}, ifaces: map[string]ifaceUse{}}
	doc, err := p.document()
	if err != nil {
		return nil, err
	}
	if err := p.built(doc); err != nil {
		return nil, err
	}
	return p.root(doc)
}

// The fields of a flowspace in a hierarchy file, in the order the schema
// documents them.
var fields = []string{"name", "kind", "classes", "in_place", "barrier", "bridge", "interfaces", "interface", "state",
	"p4runtime", "device_id", "uplink", "cpu_port", "resources", "children"}

// applies says which kinds of child flowspace take each field (name, kind
// and children apply to all).
var applies = map[string][]flowspaces.Kind{
	"classes":    {flowspaces.KindTest},
	"in_place":   {flowspaces.KindTest},
	"interfaces": {flowspaces.KindTest, flowspaces.KindP4},
	"interface":  {flowspaces.KindXDP},
	"state":      {flowspaces.KindTest, flowspaces.KindKernel, flowspaces.KindXDP},
	"p4runtime":  {flowspaces.KindP4},
	"device_id":  {flowspaces.KindP4},
	"uplink":     {flowspaces.KindP4},
	"cpu_port":   {flowspaces.KindP4},
	"resources":  {flowspaces.KindP4},
}

var childKinds = []string{string(flowspaces.KindTest), string(flowspaces.KindKernel), string(flowspaces.KindXDP), string(flowspaces.KindP4)}

var strategies = []string{string(flowspaces.ZeroCopy), string(flowspaces.CopyOnce)}

type parser struct {
	file   string
	src    []byte
	reg    *functions.Registry
	names  map[string]int      // flowspace name → line that defines it
	ifaces map[string]ifaceUse // interface → where its packets enter
}

type ifaceUse struct {
	fs   string
	line int
}

func (p *parser) errorf(line int, format string, args ...any) error {
	return &Error{File: p.file, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// yamlLine and sizeRE are compiled at their first use, not at start-up.
var yamlLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^yaml: line (\d+): (.*)$`) })

// document decodes the file into one YAML node tree.
func (p *parser) document() (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(p.src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, p.errorf(0, "the file is empty: a hierarchy needs at least its root")
		}
		return nil, p.yamlError(err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); err == nil {
		return nil, p.errorf(more.Line, "a hierarchy file holds one YAML document, this is a second one")
	} else if !errors.Is(err, io.EOF) {
		return nil, p.yamlError(err)
	}
	n := &doc
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	return n, nil
}

// yamlError turns "yaml: line 3: msg" into "file:3: msg".
func (p *parser) yamlError(err error) error {
	msg := err.Error()
	m := yamlLine().FindStringSubmatch(msg)
	if m == nil {
		return p.errorf(0, "%s", strings.TrimPrefix(msg, "yaml: "))
	}
	line, _ := strconv.Atoi(m[1])
	msg = m[2]
	lines := bytes.Split(p.src, []byte("\n"))
	indentTab := func(l int) bool {
		s := lines[l-1]
		return bytes.Contains(s[:len(s)-len(bytes.TrimLeft(s, " \t"))], []byte("\t"))
	}
	switch {
	case line < 1 || line > len(lines):
	case strings.Contains(msg, "tab character"):
		// The parser names the line where the block began: point at the
		// tab.
		for l := line; l <= len(lines); l++ {
			if indentTab(l) {
				line = l
				break
			}
		}
	case indentTab(line):
		msg += " (YAML indents with spaces, not tabs)"
	}
	return p.errorf(line, "%s", msg)
}

// deref follows an alias (*anchor) to the node it names.
func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

// entry is one field of a flowspace mapping.
type entry struct {
	key, val *yaml.Node
}

// spec is one flowspace of the file before it is built.
type spec struct {
	line   int // of the mapping
	name   string
	kind   flowspaces.Kind
	fields map[string]entry
}

// label names the flowspace in messages, before it is known to have a name.
func (s *spec) label() string {
	if s.name != "" {
		return s.name
	}
	return "at line " + strconv.Itoa(s.line)
}

// mapping reads the fields of a flowspace, refusing unknown and repeated
// ones; what says which flowspace it is, for messages.
func (p *parser) mapping(n *yaml.Node, what string) (*spec, error) {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		return nil, p.errorf(n.Line, "%s must be a mapping of fields (name, kind, children…), not %s", what, describe(n))
	}
	s := &spec{line: n.Line, fields: map[string]entry{}}
	// The name first: the other messages say which flowspace they are about.
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Value == "name" {
			v := deref(n.Content[i+1])
			if v.Kind == yaml.ScalarNode && !isNull(v) {
				s.name = v.Value
			}
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), deref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			return nil, p.errorf(k.Line, "a field name in flowspace %s must be a word, not %s", s.label(), describe(k))
		}
		if !slices.Contains(fields, k.Value) {
			if sug, ok := lang.Suggest(k.Value, fields); ok {
				return nil, p.errorf(k.Line, "unknown field %q in flowspace %s (did you mean %q?)", k.Value, s.label(), sug)
			}
			return nil, p.errorf(k.Line, "unknown field %q in flowspace %s (the fields are %s)", k.Value, s.label(), strings.Join(fields, ", "))
		}
		if prev, dup := s.fields[k.Value]; dup {
			return nil, p.errorf(k.Line, "field %s of flowspace %s is given twice (first at line %d)", k.Value, s.label(), prev.key.Line)
		}
		s.fields[k.Value] = entry{k, v}
	}
	return s, nil
}

// describe names the kind of a YAML node for messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "nothing"
		}
		return strconv.Quote(n.Value)
	}
	return "that"
}

// str returns the scalar value of field f, "" when it is absent.
func (p *parser) str(s *spec, f string) (string, int, error) {
	e, ok := s.fields[f]
	if !ok {
		return "", 0, nil
	}
	if e.val.Kind != yaml.ScalarNode || isNull(e.val) {
		return "", e.key.Line, p.errorf(e.key.Line, "field %s of flowspace %s must be a word, not %s", f, s.label(), describe(e.val))
	}
	return e.val.Value, e.val.Line, nil
}

// size reads field f, a size in bytes (4096, 64MB, 1.5GB: units B, KB,
// MB, GB, powers of 1024), or "none"; 0 when omitted, -1 for none.
func (p *parser) size(s *spec, f string) (int64, error) {
	v, line, err := p.str(s, f)
	if err != nil || v == "" {
		return 0, err
	}
	if v == "none" {
		return -1, nil
	}
	m := sizeRE().FindStringSubmatch(v)
	bad := p.errorf(line, "field %s of flowspace %s must be a size (64MB, 1GB: units B, KB, MB, GB) or none, not %q", f, s.label(), v)
	if m == nil {
		return 0, bad
	}
	n, err := strconv.ParseFloat(m[1], 64)
	mult := map[string]float64{"": 1, "B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}[m[2]]
	if err != nil || n*mult < 1 || n*mult > 1<<50 || n*mult != float64(int64(n*mult)) {
		return 0, bad
	}
	return int64(n * mult), nil
}

var sizeRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)\s*(B|KB|MB|GB)?$`) })

// checkName validates a flowspace or interface name.
func (p *parser) checkName(line int, what, name string) error {
	if name == "" {
		return p.errorf(line, "%s needs a name", what)
	}
	if i := strings.IndexFunc(name, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }); i >= 0 {
		return p.errorf(line, "%s has name %q: a name cannot contain spaces or control characters", what, name)
	}
	return nil
}

// define records a flowspace name, refusing a second flowspace of the same
// name.
func (p *parser) define(line int, name string) error {
	if prev, dup := p.names[name]; dup {
		return p.errorf(line, "two flowspaces are named %s (the first at line %d)", name, prev)
	}
	p.names[name] = line
	return nil
}

// root builds the root flowspace, userspace on the host, and its children.
func (p *parser) root(n *yaml.Node) (flowspaces.Flowspace, error) {
	if isNull(deref(n)) {
		return nil, p.errorf(n.Line, "the file is empty: a hierarchy needs at least its root")
	}
	s, err := p.mapping(n, "the root")
	if err != nil {
		return nil, err
	}
	if s.name == "" {
		s.name = "user"
	}
	if e, ok := s.fields["name"]; ok {
		if _, _, err := p.str(s, "name"); err != nil {
			return nil, err
		}
		if err := p.checkName(e.val.Line, "the root", s.name); err != nil {
			return nil, err
		}
	}
	if kind, line, err := p.str(s, "kind"); err != nil {
		return nil, err
	} else if kind != "" && kind != string(flowspaces.KindUser) {
		return nil, p.errorf(line, "the root is userspace on the host: its kind is user, not %s", kind)
	}
	for _, f := range fields {
		if e, ok := s.fields[f]; ok && f != "name" && f != "kind" && f != "children" && f != "state" {
			return nil, p.errorf(e.key.Line, "field %s does not apply to the root %s (userspace on the host): it takes only name, state and children", f, s.name)
		}
	}
	if err := p.define(s.line, s.name); err != nil {
		return nil, err
	}
	limit, err := p.size(s, "state")
	if err != nil {
		return nil, err
	}
	root := user.New(user.Options{Name: s.name, Kind: flowspaces.KindUser, StateLimit: limit})
	if err := p.children(root, s); err != nil {
		return nil, err
	}
	return root, nil
}

// children builds and attaches the children listed in s, each before its
// own children.
func (p *parser) children(parent flowspaces.Flowspace, s *spec) error {
	e, ok := s.fields["children"]
	if !ok || isNull(e.val) {
		return nil
	}
	if e.val.Kind != yaml.SequenceNode {
		return p.errorf(e.key.Line, "children of flowspace %s must be a list of flowspaces, not %s", s.label(), describe(e.val))
	}
	for _, c := range e.val.Content {
		if err := p.child(parent, c); err != nil {
			return err
		}
	}
	return nil
}

// child builds one flowspace below parent, attaches it, and recurses.
func (p *parser) child(parent flowspaces.Flowspace, n *yaml.Node) error {
	s, err := p.mapping(n, "a child of flowspace "+parent.Name())
	if err != nil {
		return err
	}
	if _, _, err := p.str(s, "name"); err != nil {
		return err
	}
	kind, kline, err := p.str(s, "kind")
	if err != nil {
		return err
	}
	switch {
	case kind == "":
		return p.errorf(s.line, "flowspace %s needs a kind: test, kernel, xdp or p4", s.label())
	case kind == string(flowspaces.KindUser):
		return p.errorf(kline, "flowspace %s cannot be of kind user: only the root is userspace on the host (a simulated board is kind test)", s.label())
	case !slices.Contains(childKinds, kind):
		if sug, ok := lang.Suggest(kind, childKinds); ok {
			return p.errorf(kline, "unknown kind %q for flowspace %s (did you mean %q?)", kind, s.label(), sug)
		}
		return p.errorf(kline, "unknown kind %q for flowspace %s: want test, kernel, xdp or p4", kind, s.label())
	}
	s.kind = flowspaces.Kind(kind)
	for _, f := range fields {
		if e, ok := s.fields[f]; ok && applies[f] != nil && !slices.Contains(applies[f], s.kind) {
			return p.errorf(e.key.Line, "field %s does not apply to flowspace %s: %s", f, s.label(), notApplies(f, s.kind))
		}
	}

	barrier, strategy, err := p.bridge(s)
	if err != nil {
		return err
	}
	var fs flowspaces.Flowspace
	switch s.kind {
	case flowspaces.KindTest:
		fs, err = p.test(s)
	case flowspaces.KindP4:
		fs, barrier, err = p.p4Flowspace(parent, s, barrier)
	default:
		fs, err = p.ebpf(parent, s)
	}
	if err != nil {
		return err
	}
	if _, err := flowspaces.Attach(parent, fs, barrier, strategy); err != nil {
		return p.errorf(s.line, "%v", err)
	}
	return p.children(fs, s)
}

func notApplies(f string, k flowspaces.Kind) string {
	switch f {
	case "interface":
		if k == flowspaces.KindTest {
			return "a test flowspace lists the interfaces it simulates under interfaces"
		}
		return "only an xdp flowspace runs at one interface"
	case "state":
		return "a switch's room is its resources (stages, SRAM, stateful ALUs), given under resources"
	case "p4runtime", "device_id", "uplink", "cpu_port", "resources":
		return "it applies to p4 flowspaces (switches) only, and this one is " + string(k)
	case "interfaces":
		if k == flowspaces.KindXDP {
			return "an xdp flowspace runs at one interface, given by interface"
		}
		return "only a test flowspace simulates interfaces, and a p4 one has front-panel ports (the kernel sees every interface of the machine)"
	}
	return "it applies to test flowspaces only, and this one is " + string(k)
}

// bridge reads the barrier and the strategy of the bridge up to the parent.
func (p *parser) bridge(s *spec) (string, flowspaces.Strategy, error) {
	barrier, line, err := p.str(s, "barrier")
	if err != nil {
		return "", "", err
	}
	if _, given := s.fields["barrier"]; given && strings.TrimSpace(barrier) == "" {
		return "", "", p.errorf(line, "the barrier of flowspace %s is empty", s.label())
	}
	if barrier == "" {
		barrier = map[flowspaces.Kind]string{
			flowspaces.KindKernel: "user/kernel",
			flowspaces.KindXDP:    "driver",
			flowspaces.KindTest:   "in-process",
		}[s.kind]
	}
	str, line, err := p.str(s, "bridge")
	if err != nil {
		return "", "", err
	}
	if str == "" {
		return barrier, flowspaces.CopyOnce, nil
	}
	if !slices.Contains(strategies, str) {
		if sug, ok := lang.Suggest(str, strategies); ok {
			return "", "", p.errorf(line, "unknown bridge strategy %q for flowspace %s (did you mean %q?)", str, s.label(), sug)
		}
		return "", "", p.errorf(line, "unknown bridge strategy %q for flowspace %s: want zero-copy or copy-once", str, s.label())
	}
	return barrier, flowspaces.Strategy(str), nil
}

// ebpf builds a kernel or xdp flowspace: real eBPF hooks of the host, which
// hang beneath userspace (xdp also beneath the kernel).
func (p *parser) ebpf(parent flowspaces.Flowspace, s *spec) (flowspaces.Flowspace, error) {
	opts := kernel.Options{Kind: s.kind, Name: s.name}
	var err error
	if opts.StateLimit, err = p.size(s, "state"); err != nil {
		return nil, err
	}
	if s.kind == flowspaces.KindXDP {
		iface, line, err := p.str(s, "interface")
		if err != nil {
			return nil, err
		}
		if iface == "" {
			return nil, p.errorf(s.line, "xdp flowspace %s needs an interface: the one whose driver runs it", s.label())
		}
		if err := p.checkName(line, "the interface of flowspace "+s.label(), iface); err != nil {
			return nil, err
		}
		opts.Interface = iface
		if opts.Name == "" {
			opts.Name = "xdp:" + iface
		}
		if k := parent.Kind(); k != flowspaces.KindUser && k != flowspaces.KindKernel {
			return nil, p.errorf(s.line, "xdp flowspace %s cannot sit below %s flowspace %s: an XDP hook of the host hangs beneath the kernel or userspace", opts.Name, k, parent.Name())
		}
		if err := p.enter(line, opts.Name, iface); err != nil {
			return nil, err
		}
	} else {
		if opts.Name == "" {
			opts.Name = "kernel"
		}
		if k := parent.Kind(); k != flowspaces.KindUser {
			return nil, p.errorf(s.line, "kernel flowspace %s cannot sit below %s flowspace %s: the host's kernel hangs beneath userspace", opts.Name, k, parent.Name())
		}
	}
	if err := p.checkName(s.line, "flowspace "+s.label(), opts.Name); err != nil {
		return nil, err
	}
	if err := p.define(s.line, opts.Name); err != nil {
		return nil, err
	}
	fs, err := kernel.New(opts)
	if err != nil {
		return nil, p.errorf(s.line, "%v", err)
	}
	return fs, nil
}

// enter records that the packets of iface enter the hierarchy at fs: one
// flowspace per interface, or placement could not tell where they enter.
func (p *parser) enter(line int, fs, iface string) error {
	if prev, dup := p.ifaces[iface]; dup {
		return p.errorf(line, "packets of interface %s already enter the hierarchy at %s (line %d), not also at %s", iface, prev.fs, prev.line, fs)
	}
	p.ifaces[iface] = ifaceUse{fs, line}
	return nil
}

// test builds a simulated board: a Go flowspace of kind test.
func (p *parser) test(s *spec) (flowspaces.Flowspace, error) {
	if err := p.checkName(s.line, "test flowspace "+s.label(), s.name); err != nil {
		return nil, err
	}
	if err := p.define(s.line, s.name); err != nil {
		return nil, err
	}
	opts := user.Options{Name: s.name, Kind: flowspaces.KindTest,
		Interfaces: map[string]*user.Traffic{}} // non-nil: nil means every interface of the machine
	var err error
	if opts.StateLimit, err = p.size(s, "state"); err != nil {
		return nil, err
	}
	if opts.Classes, err = p.classes(s); err != nil {
		return nil, err
	}
	if e, ok := s.fields["in_place"]; ok {
		if e.val.Kind != yaml.ScalarNode || e.val.Decode(&opts.InPlace) != nil {
			return nil, p.errorf(e.val.Line, "in_place of flowspace %s must be true or false, not %s", s.name, describe(e.val))
		}
	}
	if err := p.interfaces(s, opts.Interfaces); err != nil {
		return nil, err
	}
	return user.New(opts), nil
}

// classes reads the classes a test flowspace runs: nil when omitted (every
// class with a Go implementation), empty when the list is.
func (p *parser) classes(s *spec) ([]string, error) {
	e, ok := s.fields["classes"]
	if !ok || isNull(e.val) {
		return nil, nil
	}
	if e.val.Kind != yaml.SequenceNode {
		return nil, p.errorf(e.key.Line, "classes of flowspace %s must be a list, e.g. [bpf, pktcount], not %s", s.name, describe(e.val))
	}
	out := []string{}
	for _, n := range e.val.Content {
		n = deref(n)
		if n.Kind != yaml.ScalarNode || isNull(n) {
			return nil, p.errorf(n.Line, "a class of flowspace %s must be a class name, not %s", s.name, describe(n))
		}
		c, ok := p.reg.Lookup(n.Value)
		if !ok {
			if sug, ok := lang.Suggest(n.Value, p.reg.Classes()); ok {
				return nil, p.errorf(n.Line, "unknown class %q in flowspace %s (did you mean %q?)", n.Value, s.name, sug)
			}
			return nil, p.errorf(n.Line, "unknown class %q in flowspace %s (see ffpf classes)", n.Value, s.name)
		}
		if !c.Supports(functions.TargetUser) {
			return nil, p.errorf(n.Line, "class %s has no Go implementation, so test flowspace %s cannot run it", c.Name, s.name)
		}
		if slices.Contains(out, c.Name) {
			return nil, p.errorf(n.Line, "class %s is listed twice in flowspace %s", c.Name, s.name)
		}
		out = append(out, c.Name)
	}
	return out, nil
}

// interfaces reads the simulated interfaces of a test flowspace into m.
func (p *parser) interfaces(s *spec, m map[string]*user.Traffic) error {
	e, ok := s.fields["interfaces"]
	if !ok || isNull(e.val) {
		return nil
	}
	if e.val.Kind != yaml.SequenceNode {
		return p.errorf(e.key.Line, "interfaces of flowspace %s must be a list of interface names or {name, traffic} mappings, not %s", s.name, describe(e.val))
	}
	for _, n := range e.val.Content {
		n = deref(n)
		var name string
		var traffic *yaml.Node
		line := n.Line
		switch n.Kind {
		case yaml.ScalarNode:
			if isNull(n) {
				return p.errorf(n.Line, "an interface of flowspace %s needs a name", s.name)
			}
			name = n.Value
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := deref(n.Content[i]), deref(n.Content[i+1])
				switch k.Value {
				case "name":
					if v.Kind != yaml.ScalarNode || isNull(v) {
						return p.errorf(k.Line, "the name of an interface of flowspace %s must be a word, not %s", s.name, describe(v))
					}
					if name != "" {
						return p.errorf(k.Line, "an interface of flowspace %s has two names", s.name)
					}
					name, line = v.Value, v.Line
				case "traffic":
					if traffic != nil {
						return p.errorf(k.Line, "an interface of flowspace %s has two traffic fields", s.name)
					}
					traffic = v
				default:
					ifFields := []string{"name", "traffic"}
					if sug, ok := lang.Suggest(k.Value, ifFields); ok {
						return p.errorf(k.Line, "unknown field %q in an interface of flowspace %s (did you mean %q?)", k.Value, s.name, sug)
					}
					return p.errorf(k.Line, "unknown field %q in an interface of flowspace %s (the fields are name and traffic)", k.Value, s.name)
				}
			}
			if name == "" {
				return p.errorf(n.Line, "an interface of flowspace %s needs a name", s.name)
			}
		default:
			return p.errorf(n.Line, "an interface of flowspace %s must be a name or a {name, traffic} mapping, not %s", s.name, describe(n))
		}
		if err := p.checkName(line, "an interface of flowspace "+s.name, name); err != nil {
			return err
		}
		if err := p.enter(line, s.name, name); err != nil {
			return err
		}
		var t *user.Traffic
		if traffic != nil && !isNull(traffic) {
			var err error
			if t, err = p.traffic(s.name, name, traffic); err != nil {
				return err
			}
		}
		m[name] = t // nil: placement only, nothing to replay
	}
	return nil
}

// traffic parses a source term of the ffpf language, e.g.
// (gen,seed=2,packets=10000): what a simulated interface delivers.
func (p *parser) traffic(fs, iface string, n *yaml.Node) (*user.Traffic, error) {
	what := "the traffic of " + iface + " in flowspace " + fs
	if n.Kind != yaml.ScalarNode {
		return nil, p.errorf(n.Line, "%s must be a source term such as (gen,seed=1), not %s", what, describe(n))
	}
	term := strings.TrimSpace(n.Value)
	req, err := lang.Parse(term)
	if err != nil {
		var le *lang.Error
		if errors.As(err, &le) {
			return nil, p.errorf(n.Line, "%s, %q, is not a term: %s (column %d of the term)", what, term, le.Msg, le.Pos.Col)
		}
		return nil, p.errorf(n.Line, "%s, %q, is not a term: %v", what, term, err)
	}
	var f *lang.Func
	if len(req.Chains) == 1 && len(req.Chains[0].Terms) == 1 {
		f, _ = req.Chains[0].Terms[0].(*lang.Func)
	}
	if f == nil || f.Label != "" {
		return nil, p.errorf(n.Line, "%s must be one source term such as (gen,seed=1), not %q", what, term)
	}
	sources := p.replayable()
	c, ok := p.reg.Lookup(f.Class)
	switch {
	case !ok:
		if sug, ok := lang.Suggest(f.Class, sources); ok {
			return nil, p.errorf(n.Line, "%s names unknown class %q (did you mean %q?)", what, f.Class, sug)
		}
		return nil, p.errorf(n.Line, "%s names unknown class %q (sources: %s)", what, f.Class, strings.Join(sources, ", "))
	case !c.IsSource():
		return nil, p.errorf(n.Line, "%s must be a source (%s), and %s is not one", what, strings.Join(sources, ", "), c.Name)
	case c.Interface != nil:
		return nil, p.errorf(n.Line, "%s cannot capture a live interface (%s): it stands in for one; use %s", what, c.Name, strings.Join(sources, " or "))
	case !c.Supports(functions.TargetUser):
		return nil, p.errorf(n.Line, "%s uses class %s, which has no Go implementation", what, c.Name)
	}
	dir := filepath.Dir(p.file)
	args := make([]functions.Arg, len(f.Args))
	for i, a := range f.Args {
		args[i] = functions.Arg{Key: a.Key, Value: rawOf(a.Value)}
		key := a.Key
		if key == "" && i == 0 && len(c.Params) > 0 {
			key = c.Params[0].Name
		}
		if par, ok := c.Param(key); ok && par.File != functions.NoFile {
			if t := args[i].Value.Text; dir != "." && t != "" && t != "-" && !filepath.IsAbs(t) {
				args[i].Value.Text = filepath.Join(dir, t)
			}
		}
	}
	params, err := c.Bind(args)
	if err != nil {
		var be *functions.BindError
		if errors.As(err, &be) && be.Arg >= 0 && be.Arg < len(f.Args) {
			if key := f.Args[be.Arg].Key; key != "" {
				if _, ok := c.Param(key); !ok {
					names := make([]string, len(c.Params))
					for i, par := range c.Params {
						names[i] = par.Name
					}
					if sug, ok := lang.Suggest(key, names); ok {
						return nil, p.errorf(n.Line, "%s: class %s has no parameter %q (did you mean %q?)", what, c.Name, key, sug)
					}
				}
			}
		}
		return nil, p.errorf(n.Line, "%s: %v", what, err)
	}
	return &user.Traffic{Term: term, Class: c, Params: params}, nil
}

// replayable returns the source classes that can stand in for an interface:
// those that do not capture a live one.
func (p *parser) replayable() []string {
	var out []string
	for _, c := range p.reg.All() {
		if c.IsSource() && c.Interface == nil {
			out = append(out, c.Name)
		}
	}
	return out
}

// rawOf converts a value of the language to a raw parameter value (as
// flowgraph does).
func rawOf(v lang.Value) functions.Raw {
	k := functions.RawWord
	switch v.Kind {
	case lang.String:
		k = functions.RawString
	case lang.Number:
		k = functions.RawNumber
	}
	return functions.Raw{Kind: k, Text: v.Text, Unit: v.Unit}
}

// NotBuiltError is a flowspace that this build of ffpf leaves out: a p4
// flowspace, in a build without gRPC (the build tag nogrpc).
type NotBuiltError struct {
	File string
	Line int
	What string
}

func (e *NotBuiltError) Error() string {
	return fmt.Sprintf("%s:%d: %s: this ffpf was built without gRPC, which a switch's controller speaks", e.File, e.Line, e.What)
}
