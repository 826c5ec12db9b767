package mafia

import (
	"math/bits"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ffpf-go/ffpf/lang"
)

// kind is what a state variable is, which decides the ffpf class that
// holds it.
type kind uint8

const (
	kCounter       kind = iota + 1 // Counter(): one count
	kTimestamp                     // Timestamp(): the time of the packet at hand
	kMapCounter                    // HashMap(type=Counter()): a count per key
	kMapTimestamp                  // HashMap(type=Timestamp()): a time per key
	kCountMin                      // Sketch(alg=count-min)
	kPCSA                          // Sketch(alg=pcsa)
	kHLL                           // Sketch(alg=hyperloglog)
	kStore                         // Sketch(alg=store)
	kBloom                         // BloomFilter(alg=membership)
	kCountingBloom                 // BloomFilter(alg=counting)
)

var kindNames = map[kind]string{kCounter: "a Counter", kTimestamp: "a Timestamp", kMapCounter: "a HashMap of counters",
	kMapTimestamp: "a HashMap of timestamps", kCountMin: "a count-min Sketch", kPCSA: "a PCSA Sketch",
	kHLL: "a HyperLogLog Sketch", kStore: "a store Sketch", kBloom: "a membership BloomFilter",
	kCountingBloom: "a counting BloomFilter"}

// state is a declared state variable.
type state struct {
	name  string
	pos   Pos
	kind  kind
	key   string // the flowkey spec (5tuple, "srcip,dstip"), "" for none
	keyAt Pos
	// loc is a key of values that are not flow-key fields (a switch's
	// ports and id): only a packet-scoped BloomFilter takes one.
	loc   []string
	size  int64 // HashMap size, sketch width, bitmaps, registers, bits
	nhash int64
	width int64 // counter bits as declared (ffpf keeps 64)
}

// symbols are a program's declarations.
type symbols struct {
	src    string
	consts map[string]*Const
	keys   map[string]*StateInit
	states map[string]*state
	decls  map[string]Pos
}

func (s *symbols) names() []string {
	var out []string
	for n := range s.decls {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (s *symbols) errorf(p Pos, format string, args ...any) error {
	return errorf(s.src, p, format, args...)
}

// undeclared is the error for a name nothing declares.
func (s *symbols) undeclared(p Pos, name, what string, more ...string) error {
	cands := append(s.names(), more...)
	if m, ok := lang.Suggest(name, cands); ok {
		return s.errorf(p, "%s %s is not declared (did you mean %s?)", what, name, m)
	}
	return s.errorf(p, "%s %s is not declared", what, name)
}

// keyFields maps the fields a Key may name to flowkey's.
var keyFields = map[string]string{
	"ip.src": "srcip", "ip.source": "srcip", "ipv4.src": "srcip", "ipv6.src": "srcip",
	"ip.dst": "dstip", "ip.dest": "dstip", "ipv4.dst": "dstip", "ipv4.dest": "dstip", "ipv6.dst": "dstip",
	"tcp.src": "srcport", "tcp.sport": "srcport", "udp.src": "srcport", "udp.sport": "srcport",
	"tcp.dst": "dstport", "tcp.dest": "dstport", "tcp.dport": "dstport", "udp.dst": "dstport", "udp.dest": "dstport", "udp.dport": "dstport",
	"ip.proto": "proto", "ipv4.proto": "proto", "ip.protocol": "proto",
	"eth.src": "srcmac", "eth.dst": "dstmac", "vlan.id": "vlan",
}

// locFields are the values a packet-scoped BloomFilter's key may name
// (they are not flow-key fields: a switch's ports and its id).
var locFields = map[string]bool{"pkt.inport": true, "pkt.outport": true, "switch.id": true}

var fiveTuple = []string{"srcip", "dstip", "srcport", "dstport", "proto"}

// declare reads the program's declarations.
func declare(p *Program) (*symbols, error) {
	s := &symbols{src: p.src, consts: map[string]*Const{}, keys: map[string]*StateInit{},
		states: map[string]*state{}, decls: map[string]Pos{}}
	for _, st := range p.Stmts {
		d, ok := st.(*Decl)
		if !ok {
			continue
		}
		if at, dup := s.decls[d.Name]; dup {
			return nil, s.errorf(d.Pos, "%s is declared twice (first at %s)", d.Name, at)
		}
		if reserved[d.Name] {
			return nil, s.errorf(d.Pos, "%s is a name of the language: call the declaration something else", d.Name)
		}
		s.decls[d.Name] = d.Pos
		switch in := d.Init.(type) {
		case *Const:
			s.consts[d.Name] = in
		case *StateInit:
			if strings.EqualFold(in.Type, "key") {
				s.keys[d.Name] = in
				continue
			}
			st, err := s.stateOf(d.Name, d.Pos, in)
			if err != nil {
				return nil, err
			}
			s.states[d.Name] = st
		}
	}
	return s, nil
}

// reserved are the names a declaration may not take: streams, steps,
// functions.
var reserved = map[string]bool{"pkts": true, "ctrl": true, "match": true, "tag": true, "timestamp": true,
	"duplicate": true, "collect": true, "window": true, "max": true, "min": true, "random": true, "bloom": true,
	"not": true, "and": true, "or": true, "pkt": true, "switch": true}

// args collects a declaration's keyword arguments, refusing unknown ones.
func (s *symbols) args(in *StateInit, allowed ...string) (map[string]*KwArg, error) {
	m := map[string]*KwArg{}
	for _, a := range in.Args {
		name := strings.ToLower(a.Name)
		if name == "w" {
			name = "width" // Listing 2 writes w=32
		}
		if !slices.Contains(allowed, name) {
			if c, ok := lang.Suggest(name, allowed); ok {
				return nil, s.errorf(a.Pos, "%s has no parameter %s (did you mean %s?)", in.Type, a.Name, c)
			}
			return nil, s.errorf(a.Pos, "%s has no parameter %s (it takes %s)", in.Type, a.Name, strings.Join(allowed, ", "))
		}
		if m[name] != nil && name != "key" {
			return nil, s.errorf(a.Pos, "%s is given twice", a.Name)
		}
		if m[name] != nil {
			// Table VII's n_change_sketch names key= twice, alike: one is kept.
			if !sameExpr(m[name].Value, a.Value) {
				return nil, s.errorf(a.Pos, "key is given twice, differently")
			}
			continue
		}
		m[name] = a
	}
	return m, nil
}

func sameExpr(a, b Expr) bool {
	var x, y strings.Builder
	dumpExpr(&x, a)
	dumpExpr(&y, b)
	return x.String() == y.String()
}

// intArg is a whole-number argument (a literal or a constant), at least
// min; def when absent.
func (s *symbols) intArg(m map[string]*KwArg, name string, def, min, max int64) (int64, error) {
	a := m[name]
	if a == nil {
		return def, nil
	}
	v, err := s.number(a.Value)
	if err != nil {
		return 0, err
	}
	i, ok := v.whole()
	if !ok || i < min || i > max {
		return 0, s.errorf(a.Value.ExprPos(), "%s is a whole number from %d to %d, not %s", name, min, max, v)
	}
	return i, nil
}

// strArg is a string argument (a literal or a string constant).
func (s *symbols) strArg(m map[string]*KwArg, name string) (string, Pos, bool, error) {
	a := m[name]
	if a == nil {
		return "", Pos{}, false, nil
	}
	v := a.Value
	if id, ok := v.(*Ident); ok {
		if c := s.consts[id.Name]; c != nil {
			v = c.Value
		} else {
			// alg=countmin written without quotes reads as a word
			return id.Name, id.Pos, true, nil
		}
	}
	str, ok := v.(*Str)
	if !ok {
		return "", Pos{}, false, s.errorf(a.Value.ExprPos(), "%s is a string (%s=\"...\")", name, name)
	}
	return str.Text, a.Value.ExprPos(), true, nil
}

// keyArg resolves key=: a Key's name, or a Key(...) written in place.
func (s *symbols) keyArg(m map[string]*KwArg, owner string, need bool) (spec string, loc []string, at Pos, err error) {
	a := m["key"]
	if a == nil {
		if need {
			return "", nil, Pos{}, nil
		}
		return "", nil, Pos{}, nil
	}
	var k *StateInit
	switch v := a.Value.(type) {
	case *Ident:
		k = s.keys[v.Name]
		if k == nil {
			if s.states[v.Name] != nil || s.consts[v.Name] != nil {
				return "", nil, Pos{}, s.errorf(v.Pos, "%s is not a Key: key= names a Key(...)", v.Name)
			}
			return "", nil, Pos{}, s.undeclared(v.Pos, v.Name, "the key")
		}
	case *StateInit:
		if !strings.EqualFold(v.Type, "key") {
			return "", nil, Pos{}, s.errorf(v.Pos, "key= takes a Key(...), not %s", v.Type)
		}
		k = v
	default:
		return "", nil, Pos{}, s.errorf(a.Value.ExprPos(), "key= names a Key (flowid = Key(ip.src, ...))")
	}
	spec, loc, err = s.keySpec(k)
	return spec, loc, a.Value.ExprPos(), err
}

// keySpec maps a Key's fields to a flowkey spec ("5tuple" when they are
// the five), or, for a key of a switch's values, to those values.
func (s *symbols) keySpec(k *StateInit) (string, []string, error) {
	if len(k.Fields) == 0 {
		return "", nil, s.errorf(k.Pos, "Key() names no field")
	}
	var flow, loc []string
	for _, f := range k.Fields {
		name := strings.TrimPrefix(f.Name(), "pkt.")
		if kf, ok := keyFields[strings.ToLower(name)]; ok {
			if slices.Contains(flow, kf) {
				return "", nil, s.errorf(f.Pos, "%s is %s again", f.Name(), kf)
			}
			flow = append(flow, kf)
			continue
		}
		if mf, ok := fieldName(f.Name()); ok && locFields[mf] {
			loc = append(loc, mf)
			continue
		}
		var all []string
		for n := range keyFields {
			all = append(all, n)
		}
		sort.Strings(all)
		if c, ok := lang.Suggest(f.Name(), append(all, "pkt.input_port", "pkt.output_port", "switch.id")); ok {
			return "", nil, s.errorf(f.Pos, "a Key cannot hold %s (did you mean %s?)", f.Name(), c)
		}
		return "", nil, s.errorf(f.Pos, "a Key cannot hold %s: it holds ip.src, ip.dst, tcp.src, tcp.dst, ip.proto, eth.src, eth.dst, vlan.id (a flow key), or pkt.input_port, switch.id, pkt.output_port", f.Name())
	}
	if len(flow) > 0 && len(loc) > 0 {
		return "", nil, s.errorf(k.Pos, "a Key is either a flow key or a switch's location (pkt.input_port, switch.id, pkt.output_port), not both")
	}
	if len(loc) > 0 {
		return "", loc, nil
	}
	sorted := slices.Clone(flow)
	sort.Strings(sorted)
	five := slices.Clone(fiveTuple)
	sort.Strings(five)
	if slices.Equal(sorted, five) {
		return "5tuple", nil, nil
	}
	return strings.Join(flow, ","), nil, nil
}

// stateOf reads a state declaration.
func (s *symbols) stateOf(name string, at Pos, in *StateInit) (*state, error) {
	st := &state{name: name, pos: at, width: 64}
	typ := stateTypes[strings.ToLower(in.Type)]
	if len(in.Fields) > 0 {
		return nil, s.errorf(in.Fields[0].Pos, "%s takes name=value arguments", in.Type)
	}
	switch typ {
	case "Counter":
		m, err := s.args(in, "width")
		if err != nil {
			return nil, err
		}
		st.kind = kCounter
		st.width, err = s.intArg(m, "width", 64, 1, 64)
		return st, err
	case "Timestamp":
		if _, err := s.args(in); err != nil {
			return nil, err
		}
		st.kind = kTimestamp
		return st, nil
	case "HashMap":
		m, err := s.args(in, "key", "size", "type")
		if err != nil {
			return nil, err
		}
		if st.key, st.loc, st.keyAt, err = s.keyArg(m, name, true); err != nil {
			return nil, err
		}
		if m["key"] == nil || st.key == "" {
			return nil, s.errorf(in.Pos, "a HashMap needs key= a flow key (flowid = Key(ip.src, ...))")
		}
		if st.size, err = s.intArg(m, "size", 1024, 1, 1<<24); err != nil {
			return nil, err
		}
		t := m["type"]
		if t == nil {
			return nil, s.errorf(in.Pos, "a HashMap needs type=Counter(...) or type=Timestamp()")
		}
		ti, ok := t.Value.(*StateInit)
		switch {
		case ok && strings.EqualFold(ti.Type, "counter"):
			inner, err := s.stateOf(name, at, ti)
			if err != nil {
				return nil, err
			}
			st.kind, st.width = kMapCounter, inner.width
		case ok && strings.EqualFold(ti.Type, "timestamp"):
			if _, err := s.stateOf(name, at, ti); err != nil {
				return nil, err
			}
			st.kind = kMapTimestamp
		default:
			return nil, s.errorf(t.Value.ExprPos(), "a HashMap holds type=Counter(...) or type=Timestamp()")
		}
		return st, nil
	case "Sketch":
		m, err := s.args(in, "alg", "key", "nhash", "size", "width")
		if err != nil {
			return nil, err
		}
		alg, apos, ok, err := s.strArg(m, "alg")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, s.errorf(in.Pos, "a Sketch needs alg= count-min, pcsa, hyperloglog or store")
		}
		if st.key, st.loc, st.keyAt, err = s.keyArg(m, name, true); err != nil {
			return nil, err
		}
		if st.key == "" {
			return nil, s.errorf(in.Pos, "a Sketch needs key= a flow key")
		}
		switch strings.ReplaceAll(strings.ToLower(alg), "-", "") {
		case "countmin", "cms":
			st.kind = kCountMin
			if st.size, err = s.intArg(m, "size", 2719, 1, 1<<24); err != nil {
				return nil, err
			}
			if st.nhash, err = s.intArg(m, "nhash", 5, 1, 32); err != nil {
				return nil, err
			}
		case "store":
			st.kind = kStore
			if st.size, err = s.intArg(m, "size", 256, 1, 1<<24); err != nil {
				return nil, err
			}
			if st.nhash, err = s.intArg(m, "nhash", 4, 1, 32); err != nil {
				return nil, err
			}
		case "pcsa", "hyperloglog", "hll":
			st.kind = kPCSA
			if a := strings.ToLower(alg); a == "hyperloglog" || a == "hll" {
				st.kind = kHLL
			}
			if st.nhash, err = s.intArg(m, "nhash", 1, 1, 1); err != nil {
				return nil, s.errorf(m["nhash"].Value.ExprPos(), "%s hashes each key once: nhash=1", alg)
			}
			if st.size, err = s.intArg(m, "size", 256, 1, 1<<18); err != nil {
				return nil, err
			}
			if st.kind == kHLL && (bits.OnesCount64(uint64(st.size)) != 1 || st.size < 16) {
				return nil, s.errorf(m["size"].Value.ExprPos(), "a HyperLogLog Sketch has 2^p registers, p from 4 to 18: size=%d is not one", st.size)
			}
		default:
			return nil, s.errorf(apos, "unknown Sketch alg %q: count-min, pcsa, hyperloglog or store", alg)
		}
		if st.width, err = s.intArg(m, "width", 64, 1, 64); err != nil {
			return nil, err
		}
		return st, nil
	case "BloomFilter":
		m, err := s.args(in, "alg", "key", "nhash", "size")
		if err != nil {
			return nil, err
		}
		alg, apos, ok, err := s.strArg(m, "alg")
		if err != nil {
			return nil, err
		}
		switch strings.ToLower(alg) {
		case "membership", "":
			st.kind = kBloom
		case "counting":
			st.kind = kCountingBloom
		default:
			return nil, s.errorf(apos, "unknown BloomFilter alg %q: membership or counting", alg)
		}
		_ = ok
		if st.key, st.loc, st.keyAt, err = s.keyArg(m, name, true); err != nil {
			return nil, err
		}
		if st.key == "" && st.loc == nil {
			return nil, s.errorf(in.Pos, "a BloomFilter needs key= a Key")
		}
		if st.size, err = s.intArg(m, "size", 65536, 1, 1<<30); err != nil {
			return nil, err
		}
		if st.nhash, err = s.intArg(m, "nhash", 4, 1, 32); err != nil {
			return nil, err
		}
		return st, nil
	}
	return nil, s.errorf(in.Pos, "%s is not a state (Counter, Timestamp, HashMap, Sketch, BloomFilter)", in.Type)
}

// number is a constant's or a literal's numeric value.
type number struct {
	i     int64
	f     float64
	isInt bool
	unit  string
	text  string
}

func (n number) String() string { return n.text }

func (n number) whole() (int64, bool) { return n.i, n.isInt && n.unit == "" }

// number resolves a number literal or a numeric constant.
func (s *symbols) number(e Expr) (number, error) {
	if id, ok := e.(*Ident); ok {
		c := s.consts[id.Name]
		if c == nil {
			return number{}, s.undeclared(id.Pos, id.Name, "the constant")
		}
		e = c.Value
	}
	n, ok := e.(*Num)
	if !ok {
		return number{}, s.errorf(e.ExprPos(), "a number expected")
	}
	i, f, isInt, err := n.value()
	if err != nil {
		return number{}, s.errorf(n.Pos, "bad number %s", n)
	}
	return number{i: i, f: f, isInt: isInt, unit: n.Unit, text: n.String()}, nil
}

// durationNS is a window's length in nanoseconds.
func (s *symbols) duration(e Expr) (string, error) {
	n, err := s.number(e)
	if err != nil {
		return "", err
	}
	mult := map[string]float64{"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9, "h": 3600e9}[n.unit]
	if mult == 0 || n.f <= 0 {
		return "", s.errorf(e.ExprPos(), "a window is a duration with its unit (10ms, 5s), not %s", n)
	}
	return n.text, nil
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }
