package mafia

import (
	"sort"
	"strconv"
	"strings"

	"github.com/ffpf-go/ffpf/lang"
)

// The packet fields a program may name, by MAFIA's names (and the
// spellings of the paper's programs), and the match field each is read
// as. A field written with "pkt." in front of a header's name
// (pkt.ipv4.tos) is that header's field.
var fields = map[string]string{
	"pkt.size": "pkt.len", "pkt.len": "pkt.len", "pkt.length": "pkt.len", "pkt.caplen": "pkt.caplen",
	"pkt.input_port": "pkt.inport", "pkt.in_port": "pkt.inport", "pkt.ingress_port": "pkt.inport", "pkt.inport": "pkt.inport",
	"pkt.output_port": "pkt.outport", "pkt.out_port": "pkt.outport", "pkt.egress_port": "pkt.outport", "pkt.outport": "pkt.outport",
	"pkt.in_queue_length": "pkt.qdepth", "pkt.queue_length": "pkt.qdepth", "pkt.qdepth": "pkt.qdepth",
	"switch.id": "switch.id",
	"eth.src":   "eth.src", "eth.dst": "eth.dst", "eth.type": "eth.type", "vlan.id": "vlan.id",
	"ip.src": "ipv4.src", "ip.dst": "ipv4.dst", "ip.dest": "ipv4.dst", "ip.proto": "ip.proto", "ip.tos": "ipv4.tos",
	"ip.ttl": "ipv4.ttl", "ip.id": "ipv4.id", "ip.checksum": "ipv4.csum",
	"ipv4.src": "ipv4.src", "ipv4.dst": "ipv4.dst", "ipv4.dest": "ipv4.dst", "ipv4.proto": "ipv4.proto",
	"ipv4.tos": "ipv4.tos", "ipv4.ttl": "ipv4.ttl", "ipv4.len": "ipv4.len",
	"ipv4.id": "ipv4.id", "ipv4.identification": "ipv4.id", "ipv4.checksum": "ipv4.csum", "ipv4.csum": "ipv4.csum",
	"ipv6.src": "ipv6.src", "ipv6.dst": "ipv6.dst", "ipv6.hlim": "ipv6.hlim",
	"segway_header.msg": "segway.msg", "segway_header.ts": "segway.ts", "segway_header.time": "segway.time",
	"tcp.src": "tcp.sport", "tcp.sport": "tcp.sport", "tcp.dst": "tcp.dport", "tcp.dest": "tcp.dport", "tcp.dport": "tcp.dport",
	"tcp.flags": "tcp.flags", "tcp.seq": "tcp.seq", "tcp.ack": "tcp.ack", "tcp.win": "tcp.win",
	"udp.src": "udp.sport", "udp.sport": "udp.sport", "udp.dst": "udp.dport", "udp.dest": "udp.dport", "udp.dport": "udp.dport",
	"udp.len": "udp.len", "icmp.type": "icmp.type", "icmp.code": "icmp.code",
}

// tagFields are the header fields tag can write, by their match names.
var tagFields = map[string]bool{"ipv4.tos": true, "ipv4.ttl": true, "ipv4.id": true, "ipv4.csum": true,
	"vlan.id": true, "ipv6.hlim": true, "segway.ts": true, "segway.time": true}

// fieldName returns the match name of a field written as name.
func fieldName(name string) (string, bool) {
	l := strings.ToLower(name)
	if f, ok := fields[l]; ok {
		return f, true
	}
	if h, ok := strings.CutPrefix(l, "pkt."); ok && strings.Contains(h, ".") {
		f, ok := fields[h]
		return f, ok
	}
	return "", false
}

func fieldCandidates() []string {
	var out []string
	for n := range fields {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// typ is an expression's type.
type typ uint8

const (
	tyNum typ = iota + 1
	tyBool
)

// read is a read of a state variable in an expression.
type read struct {
	st  *state
	pos Pos
}

// exprCtx is what translating one expression needs to know.
type exprCtx struct {
	// self is the state whose update the expression computes: its name
	// reads the value before the update ("old" in register's set= and if=).
	self *state
	// pre are the states whose value before their update (fused into a
	// guard) the expression reads, as LABEL.old, or, for self, as old.
	pre map[string]bool
	// holder says which class holds a state, which decides its readable
	// names (a Timestamp held by timestamp is read as ts).
	holder func(*state) string
	reads  []read
}

// translate renders e in match's predicate language, fully
// parenthesised, and returns its type.
func (c *compiler) translate(e Expr, x *exprCtx) (string, typ, error) {
	switch e := e.(type) {
	case *Num:
		return c.numText(e)
	case *Str:
		return "", 0, c.errorf(e.Pos, "a string is not a value here")
	case *Range:
		return "", 0, c.errorf(e.Pos, "a range [LO:HI] is random's argument: random([0:100])")
	case *StateInit:
		return "", 0, c.errorf(e.Pos, "%s(...) declares a state: name it (x = %s(...)) and use the name", e.Type, e.Type)
	case *Field:
		f, ok := fieldName(e.Name())
		if !ok {
			if st := c.sym.states[e.Path[0]]; st != nil && len(e.Path) == 2 {
				return "", 0, c.errorf(e.Pos, "%s.%s is a method: write %s.%s()", e.Path[0], e.Path[1], e.Path[0], e.Path[1])
			}
			if m, ok := lang.Suggest(e.Name(), fieldCandidates()); ok {
				return "", 0, c.errorf(e.Pos, "unknown field %s (did you mean %s?)", e.Name(), m)
			}
			return "", 0, c.errorf(e.Pos, "unknown field %s", e.Name())
		}
		return f, tyNum, nil
	case *Ident:
		if k := c.sym.consts[e.Name]; k != nil {
			if _, ok := k.Value.(*Str); ok {
				return "", 0, c.errorf(e.Pos, "%s is a string constant, not a number", e.Name)
			}
			return c.numText(k.Value.(*Num))
		}
		st := c.sym.states[e.Name]
		if st == nil {
			if c.sym.keys[e.Name] != nil {
				return "", 0, c.errorf(e.Pos, "%s is a Key: it names what a state is kept per (key=%s), not a value", e.Name, e.Name)
			}
			if c.streams[e.Name] {
				return "", 0, c.errorf(e.Pos, "%s is a stream, not a value", e.Name)
			}
			return "", 0, c.sym.undeclared(e.Pos, e.Name, "the state variable or constant", "pkt.size")
		}
		switch st.kind {
		case kCounter, kMapCounter, kTimestamp, kMapTimestamp:
		case kCountMin:
			return "", 0, c.errorf(e.Pos, "%s is %s: read it with %s.min() (or max, sum, avg)", e.Name, kindNames[st.kind], e.Name)
		case kBloom:
			if c.scoped[st.name] != nil {
				return c.scopedRead(e.Pos, st, x)
			}
			return "", 0, c.errorf(e.Pos, "%s is %s: test it with %s.test()", e.Name, kindNames[st.kind], e.Name)
		default:
			return "", 0, c.errorf(e.Pos, "%s is %s, which is not read as a number: use one of its methods", e.Name, kindNames[st.kind])
		}
		return c.stateValue(e.Pos, st, "", x)
	case *Call:
		if e.Target != "" {
			return c.method(e, x)
		}
		switch e.Name {
		case "max", "min":
			if len(e.Args) != 2 {
				return "", 0, c.errorf(e.Pos, "%s takes two numbers", e.Name)
			}
			a, err := c.num(e.Args[0], x, e.Name)
			if err != nil {
				return "", 0, err
			}
			b, err := c.num(e.Args[1], x, e.Name)
			if err != nil {
				return "", 0, err
			}
			return e.Name + "(" + a + ", " + b + ")", tyNum, nil
		case "random":
			return "", 0, c.errorf(e.Pos, "random(...) is compared with a rate at the top of a match: match(random([0:100]) < 10)")
		}
		if m, ok := lang.Suggest(e.Name, []string{"max", "min", "random"}); ok {
			return "", 0, c.errorf(e.Pos, "unknown function %s (did you mean %s?)", e.Name, m)
		}
		return "", 0, c.errorf(e.Pos, "unknown function %s: the functions are max, min and random", e.Name)
	case *Unary:
		if e.Op == "-" {
			s, err := c.num(e.X, x, "-")
			return "(-" + s + ")", tyNum, err
		}
		s, err := c.boolean(e.X, x, "!")
		return "(not " + s + ")", tyBool, err
	case *Binary:
		switch e.Op {
		case "&&", "||":
			a, err := c.boolean(e.X, x, e.Op)
			if err != nil {
				return "", 0, err
			}
			b, err := c.boolean(e.Y, x, e.Op)
			if err != nil {
				return "", 0, err
			}
			w := map[string]string{"&&": "and", "||": "or"}[e.Op]
			return "(" + a + " " + w + " " + b + ")", tyBool, nil
		case "==", "!=", "<", "<=", ">", ">=":
			return c.compare(e, x)
		}
		a, err := c.num(e.X, x, e.Op)
		if err != nil {
			return "", 0, err
		}
		b, err := c.num(e.Y, x, e.Op)
		if err != nil {
			return "", 0, err
		}
		return "(" + a + " " + e.Op + " " + b + ")", tyNum, nil
	}
	return "", 0, c.errorf(e.ExprPos(), "unexpected expression")
}

// compare renders a comparison. A quotient by a count compared with a
// value, x / n > v, is rendered x > v * n: counts are never negative, and
// a switch multiplies where it cannot divide.
func (c *compiler) compare(e *Binary, x *exprCtx) (string, typ, error) {
	if q, ok := e.X.(*Binary); ok && q.Op == "/" && c.isCount(q.Y) {
		a, err := c.num(q.X, x, "/")
		if err != nil {
			return "", 0, err
		}
		n, err := c.num(q.Y, x, "/")
		if err != nil {
			return "", 0, err
		}
		v, err := c.num(e.Y, x, e.Op)
		if err != nil {
			return "", 0, err
		}
		return "(" + a + " " + e.Op + " (" + v + " * " + n + "))", tyBool, nil
	}
	a, err := c.num(e.X, x, e.Op)
	if err != nil {
		return "", 0, err
	}
	b, err := c.num(e.Y, x, e.Op)
	if err != nil {
		return "", 0, err
	}
	return "(" + a + " " + e.Op + " " + b + ")", tyBool, nil
}

// isCount reports whether e reads a count of a state (never negative).
func (c *compiler) isCount(e Expr) bool {
	switch e := e.(type) {
	case *Ident:
		st := c.sym.states[e.Name]
		return st != nil && (st.kind == kCounter || st.kind == kMapCounter)
	case *Call:
		st := c.sym.states[e.Target]
		return st != nil && (st.kind == kCountMin || st.kind == kCountingBloom)
	}
	return false
}

// num renders e, which must be a number.
func (c *compiler) num(e Expr, x *exprCtx, op string) (string, error) {
	s, t, err := c.translate(e, x)
	if err != nil {
		return "", err
	}
	if t != tyNum {
		return "", c.errorf(e.ExprPos(), "%s is a truth value%s, used as a number (by %s)", shortExpr(e), truthWhat(e), op)
	}
	return s, nil
}

// boolean renders e, which must be a truth value.
func (c *compiler) boolean(e Expr, x *exprCtx, op string) (string, error) {
	s, t, err := c.translate(e, x)
	if err != nil {
		return "", err
	}
	if t != tyBool {
		return "", c.errorf(e.ExprPos(), "%s is a number, used as a truth value (by %s): compare it (%s > 0)", shortExpr(e), op, shortExpr(e))
	}
	return s, nil
}

// truthWhat names where a truth value comes from, for messages.
func truthWhat(e Expr) string {
	if call, ok := e.(*Call); ok && call.Target != "" {
		switch call.Name {
		case "test":
			return " (a Bloom test)"
		case "any", "all":
			return " (a Sketch's " + call.Name + ")"
		}
	}
	return ""
}

func shortExpr(e Expr) string {
	var b strings.Builder
	formatExpr(&b, e, 0)
	return shorten(b.String())
}

// numText renders a number literal: time units as match reads them (ns),
// minutes and hours turned into seconds.
func (c *compiler) numText(n *Num) (string, typ, error) {
	switch n.Unit {
	case "m", "h":
		_, f, _, err := n.value()
		if err != nil {
			return "", 0, c.errorf(n.Pos, "bad number %s", n)
		}
		s := f * 60
		if n.Unit == "h" {
			s *= 60
		}
		return strconv.FormatFloat(s, 'f', -1, 64) + "s", tyNum, nil
	}
	if _, _, _, err := n.value(); err != nil {
		return "", 0, c.errorf(n.Pos, "bad number %s", n)
	}
	return n.Text + n.Unit, tyNum, nil
}

// stateValue renders the value of a counter or timestamp state, read
// after its update (or, pre, before it).
func (c *compiler) stateValue(at Pos, st *state, _ string, x *exprCtx) (string, typ, error) {
	if x.self == st {
		return "old", tyNum, nil
	}
	x.reads = append(x.reads, read{st, at})
	if x.pre[st.name] {
		return st.name + ".old", tyNum, nil
	}
	switch x.holder(st) {
	case "timestamp":
		return st.name + ".ts", tyNum, nil
	}
	return st.name + ".value", tyNum, nil
}

// methods are the read methods of each kind of state.
var methods = map[kind][]string{
	kCountMin:      {"min", "max", "sum", "avg"},
	kCountingBloom: {"min", "max", "sum", "avg"},
	kBloom:         {"test", "read"},
	kStore:         {"any", "all"},
	kPCSA:          {"estimate"},
	kHLL:           {"estimate"},
}

// method renders STATE.METHOD(ARGS) read in an expression.
func (c *compiler) method(e *Call, x *exprCtx) (string, typ, error) {
	st := c.sym.states[e.Target]
	if st == nil {
		return "", 0, c.sym.undeclared(e.Pos, e.Target, "the state variable")
	}
	ms := methods[st.kind]
	found := false
	for _, m := range ms {
		found = found || m == e.Name
	}
	if !found {
		if updateMethods[e.Name] {
			return "", 0, c.errorf(e.Pos, "%s.%s(...) is a step (it updates %s), not a value", e.Target, e.Name, e.Target)
		}
		if len(ms) == 0 {
			return "", 0, c.errorf(e.Pos, "%s is %s: it has no method %s; read it by its name", e.Target, kindNames[st.kind], e.Name)
		}
		if m, ok := lang.Suggest(e.Name, ms); ok {
			return "", 0, c.errorf(e.Pos, "%s has no method %s (did you mean %s()?)", e.Target, e.Name, m)
		}
		return "", 0, c.errorf(e.Pos, "%s has no method %s: it has %s", e.Target, e.Name, strings.Join(ms, "(), ")+"()")
	}
	switch e.Name {
	case "any", "all":
		if len(e.Args) != 1 {
			return "", 0, c.errorf(e.Pos, "%s.%s takes the value its cells are compared with", e.Target, e.Name)
		}
		if err := c.sameStoreValue(st, e.Args[0]); err != nil {
			return "", 0, err
		}
	case "read":
		if len(e.Args) != 0 {
			return "", 0, c.errorf(e.Pos, "%s.read() takes no argument", e.Target)
		}
		if c.scoped[st.name] == nil {
			return "", 0, c.errorf(e.Pos, "%s.read() reads a BloomFilter that is reset after each packet (%s.reset() after its insert); %s is not", e.Target, e.Target, e.Target)
		}
		return c.scopedRead(e.Pos, st, x)
	default:
		if len(e.Args) != 0 {
			return "", 0, c.errorf(e.Pos, "%s.%s() takes no argument", e.Target, e.Name)
		}
	}
	if c.scoped[st.name] != nil {
		return "", 0, c.errorf(e.Pos, "%s is reset after each packet: read its bits with %s.read()", e.Target, e.Target)
	}
	x.reads = append(x.reads, read{st, e.Pos})
	name := e.Name
	t := tyNum
	switch e.Name {
	case "test":
		name, t = "member", tyBool
	case "any", "all":
		t = tyBool
	}
	if t == tyBool {
		return "(" + st.name + "." + name + " == 1)", tyBool, nil
	}
	return st.name + "." + name, tyNum, nil
}

// sameStoreValue checks that any(V)/all(V) compares with the value the
// store sketch is set to: a switch compares the cells with it as it
// writes them, once.
func (c *compiler) sameStoreValue(st *state, v Expr) error {
	set := c.storeValue[st.name]
	if set == nil {
		return nil // checked where the set is found
	}
	if !sameExpr(set, v) {
		return c.errorf(v.ExprPos(), "%s.any and %s.all compare the cells with the value %s.set writes (%s), not %s",
			st.name, st.name, st.name, shortExpr(set), shortExpr(v))
	}
	return nil
}

// scopedRead renders a packet-scoped BloomFilter's bits: what it was
// initialised with, or'ed with the bits of its key.
func (c *compiler) scopedRead(at Pos, st *state, x *exprCtx) (string, typ, error) {
	sc := c.scoped[st.name]
	if !sc.inserted {
		return "", 0, c.errorf(at, "%s is read before anything is inserted into it", st.name)
	}
	if st.size > 64 {
		return "", 0, c.errorf(st.pos, "a BloomFilter read as a number has at most 64 bits, not size=%d", st.size)
	}
	mask := "bloom(" + itoa(st.size) + ", " + itoa(st.nhash) + ", " + strings.Join(st.loc, ", ") + ")"
	if sc.init == "" {
		return mask, tyNum, nil
	}
	return "(" + sc.init + " | " + mask + ")", tyNum, nil
}

// updateMethods are the methods that update a state (steps).
var updateMethods = map[string]bool{"set": true, "add": true, "update": true, "insert": true, "reset": true, "init": true}
