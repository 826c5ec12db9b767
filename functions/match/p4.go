package match

// match on a P4 switch. The predicate is compiled to one condition over
// the switch's headers (p4gen.StdLayers: the layers as match decodes them,
// so a field is there exactly when it is here), the values the functions
// before it on the switch export (named state and annotations: a cms's
// min, a counter's value, a timestamp's ts), and constants. A comparison
// on a field the packet lacks is false, as here.
//
// A switch adds, subtracts, masks and shifts, and does not multiply or
// divide. So each side of a comparison is a sum of values times constants
// (a linear form); the comparison moves every term to the side where its
// coefficient is positive and multiplies both sides by the denominators'
// least common multiple, so that only whole constants multiply values,
// by shifts and adds: nbytes.min > 0.01 * total.value becomes
// 100 · nbytes.min > total.value. The arithmetic is exact where Go's is
// float64 (the two differ only where a float rounds, at equality), and
// 64-bit: values times their constants must stay below 2^64. A remainder
// or mask applies to one value, a remainder by a power of two. Refused,
// with the reason: products of two values, division by a value, pkt.ts
// (the switch's clock is not the packet clock in ns) and named state the
// function before it does not export on the switch.

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strings"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

type p4Match struct{ expr string }

func p4Code(ctx *functions.Context) (p4gen.Function, error) {
	n, err := parse(ctx.Params.Str("expr"))
	if err != nil {
		return nil, err
	}
	if n.headers() && ctx.LinkType != functions.LinkEthernet {
		return nil, fmt.Errorf("a switch reads Ethernet frames, not %v", ctx.LinkType)
	}
	// Check what can be checked without the switch's program: the
	// arithmetic, the fields. Named state is checked when it is lowered.
	c := &p4c{b: &p4gen.Builder{Prog: p4gen.NewProgram("check"), Prefix: "check", StateOf: func(string) (map[string]p4gen.Expr, bool) {
		return nil, false
	}}, checking: true}
	if _, err := c.cond(n); err != nil {
		return nil, err
	}
	return &p4Match{expr: ctx.Params.Str("expr")}, nil
}

func (m *p4Match) Lower(b *p4gen.Builder) error {
	n, err := parse(m.expr)
	if err != nil {
		return err
	}
	c := &p4c{b: b}
	cond, err := c.cond(n)
	if err != nil {
		return err
	}
	pass := b.Meta("pass", 1)
	b.Add(p4gen.Assign{Dst: pass, X: p4gen.Cast{Bits: 1, X: cond}})
	b.Pass = p4gen.B(p4gen.Eq, pass, p4gen.C(1, 1))
	return nil
}

// p4c compiles a predicate for a switch.
type p4c struct {
	b        *p4gen.Builder
	l        *p4gen.Layers
	checking bool // no switch program yet: named state is not looked up
	// names are the values of the bare names (a register's old).
	names map[string]p4gen.Expr
}

func (c *p4c) layers() *p4gen.Layers {
	if c.l == nil {
		c.l = p4gen.StdLayers(c.b.Prog)
	}
	return c.l
}

// atom is a value the switch has for the packet: a bit<64> expression,
// there when Present holds.
type atom struct {
	x       p4gen.Expr
	present p4gen.Expr
}

// form is a number: the constant plus each atom times its coefficient.
type form struct {
	terms map[string]*big.Rat
	atoms map[string]atom
	c     *big.Rat
}

func constForm(r *big.Rat) form {
	return form{terms: map[string]*big.Rat{}, atoms: map[string]atom{}, c: r}
}

func atomForm(name string, a atom) form {
	f := constForm(new(big.Rat))
	f.terms[name] = big.NewRat(1, 1)
	f.atoms[name] = a
	return f
}

func (f form) isConst() bool { return len(f.terms) == 0 }

// single returns the form's one atom when it is exactly that atom.
func (f form) single() (atom, bool) {
	if len(f.terms) != 1 || f.c.Sign() != 0 {
		return atom{}, false
	}
	for name, k := range f.terms {
		if k.Cmp(big.NewRat(1, 1)) == 0 {
			return f.atoms[name], true
		}
	}
	return atom{}, false
}

// plus returns f + k·g.
func (f form) plus(g form, k *big.Rat) form {
	out := constForm(new(big.Rat).Add(f.c, new(big.Rat).Mul(k, g.c)))
	for n, v := range f.terms {
		out.terms[n], out.atoms[n] = new(big.Rat).Set(v), f.atoms[n]
	}
	for n, v := range g.terms {
		t := new(big.Rat).Mul(k, v)
		if old, ok := out.terms[n]; ok {
			t.Add(t, old)
		}
		if t.Sign() == 0 {
			delete(out.terms, n)
			delete(out.atoms, n)
			continue
		}
		out.terms[n], out.atoms[n] = t, g.atoms[n]
	}
	return out
}

// v6 is an IPv6 address: its halves.
type v6 struct {
	hi, lo  p4gen.Expr
	present p4gen.Expr
}

// p4val is a compiled node.
type p4val struct {
	k    kind
	cond p4gen.Expr // kBool
	num  form       // kInt, kFloat
	addr v6         // kAddr
}

var errP4Arith = errors.New("a switch adds, subtracts, masks and shifts")

func (c *p4c) cond(n *node) (p4gen.Expr, error) {
	v, err := c.node(n)
	if err != nil {
		return nil, err
	}
	if v.k != kBool {
		return nil, errAt(n.pos, "the predicate is %s, not a truth value", kindName[v.k])
	}
	return v.cond, nil
}

func ratOf(n *node) (*big.Rat, error) {
	if n.isInt {
		return new(big.Rat).SetInt64(n.i), nil
	}
	// A decimal constant (0.01): the fraction it was written as, to nine
	// places.
	for d := int64(1); d <= 1e9; d *= 10 {
		if v := n.f * float64(d); v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return big.NewRat(int64(v), d), nil
		}
	}
	return nil, errAt(n.pos, "%v has no exact fraction a switch can scale by", n.f)
}

func (c *p4c) node(n *node) (p4val, error) {
	switch n.op {
	case "num":
		r, err := ratOf(n)
		if err != nil {
			return p4val{}, err
		}
		return p4val{k: kInt, num: constForm(r)}, nil
	case "addr":
		if !n.plain {
			return p4val{}, errAt(n.pos, "the prefix %s is for in", n.pfx)
		}
		a := n.pfx.Addr()
		if a.Is4() {
			b := a.As4()
			return p4val{k: kInt, num: constForm(new(big.Rat).SetInt64(int64(be32(b[:], 0))))}, nil
		}
		hi, lo := halves(a)
		return p4val{k: kAddr, addr: v6{hi: p4gen.C(hi, 64), lo: p4gen.C(lo, 64), present: p4gen.True}}, nil
	case "field":
		return c.field(n)
	case "layer":
		return p4val{k: kBool, cond: c.layer(n.name)}, nil
	case "state":
		return c.state(n)
	case "not", "and", "or":
		var xs []p4gen.Expr
		for _, k := range n.kids {
			x, err := c.cond(k)
			if err != nil {
				return p4val{}, err
			}
			xs = append(xs, x)
		}
		switch n.op {
		case "not":
			return p4val{k: kBool, cond: p4gen.Unary{Op: p4gen.Not, X: xs[0]}}, nil
		case "and":
			return p4val{k: kBool, cond: p4gen.B(p4gen.LAnd, xs[0], xs[1])}, nil
		}
		return p4val{k: kBool, cond: p4gen.B(p4gen.LOr, xs[0], xs[1])}, nil
	case "in":
		return c.in(n)
	case "==", "!=", "<", "<=", ">", ">=":
		return c.compare(n)
	case "call":
		return c.call(n)
	case "name":
		x, ok := c.names[n.name]
		if !ok {
			return p4val{}, errAt(n.pos, "%s has no value here", n.name)
		}
		return p4val{k: kInt, num: atomForm(n.name, atom{x: x, present: p4gen.True})}, nil
	}
	var kids []form
	for _, k := range n.kids {
		v, err := c.node(k)
		if err != nil {
			return p4val{}, err
		}
		if v.k != kInt && v.k != kFloat {
			return p4val{}, errAt(n.pos, "%s applies to numbers, not %s", n.op, kindName[v.k])
		}
		kids = append(kids, v.num)
	}
	switch n.op {
	case "|":
		return c.bitOr(n, kids[0], kids[1])
	case "neg":
		return p4val{k: kInt, num: constForm(new(big.Rat)).plus(kids[0], big.NewRat(-1, 1))}, nil
	case "+":
		return p4val{k: kInt, num: kids[0].plus(kids[1], big.NewRat(1, 1))}, nil
	case "-":
		return p4val{k: kInt, num: kids[0].plus(kids[1], big.NewRat(-1, 1))}, nil
	case "*":
		switch {
		case kids[0].isConst():
			return p4val{k: kInt, num: constForm(new(big.Rat)).plus(kids[1], kids[0].c)}, nil
		case kids[1].isConst():
			return p4val{k: kInt, num: constForm(new(big.Rat)).plus(kids[0], kids[1].c)}, nil
		}
		return p4val{}, errAt(n.pos, "%v: a product of two values (%v)", errP4Arith, n.op)
	case "/":
		if !kids[1].isConst() || kids[1].c.Sign() == 0 {
			return p4val{}, errAt(n.pos, "%v: it divides by a value", errP4Arith)
		}
		return p4val{k: kInt, num: constForm(new(big.Rat)).plus(kids[0], new(big.Rat).Inv(kids[1].c))}, nil
	case "%", "&":
		if kids[0].isConst() && kids[1].isConst() {
			if !kids[0].c.IsInt() || !kids[1].c.IsInt() || kids[1].c.Sign() == 0 {
				return p4val{}, errAt(n.pos, "%s applies to whole numbers", n.op)
			}
			a, b := kids[0].c.Num().Int64(), kids[1].c.Num().Int64()
			if n.op == "%" {
				return p4val{k: kInt, num: constForm(new(big.Rat).SetInt64(a % b))}, nil
			}
			return p4val{k: kInt, num: constForm(new(big.Rat).SetInt64(a & b))}, nil
		}
		if !kids[1].isConst() || !kids[1].c.IsInt() || kids[1].c.Sign() <= 0 || !kids[1].c.Num().IsUint64() {
			return p4val{}, errAt(n.pos, "%v: %s applies on a switch to a value and a positive constant", errP4Arith, n.op)
		}
		// A sum is masked once computed (MAFIA's Counter(width=32).set(x
		// + y) wraps so), in two's complement as in Go; a remainder of
		// a negative sum is negative in Go, not a mask.
		a, ok := kids[0].single()
		if !ok && n.op == "%" {
			return p4val{}, errAt(n.pos, "%v: %% applies on a switch to one value (a sum may be negative)", errP4Arith)
		}
		if !ok {
			var err error
			if a, err = c.atomOf(n, kids[0]); err != nil {
				return p4val{}, err
			}
		}
		k := kids[1].c.Num().Uint64()
		if n.op == "%" {
			if k&(k-1) != 0 {
				return p4val{}, errAt(n.pos, "%v: a remainder by %d, not a power of two", errP4Arith, k)
			}
			k--
		}
		x := p4gen.B(p4gen.And, a.x, p4gen.C(k, 64))
		return p4val{k: kInt, num: atomForm(fmt.Sprintf("(%v)&%d", a.x, k), atom{x: x, present: a.present})}, nil
	}
	return p4val{}, errAt(n.pos, "%s does not lower to a switch", n.op)
}

// layer is a layer word's condition, as match's hdr decodes it.
func (c *p4c) layer(name string) p4gen.Expr {
	l := c.layers()
	ver := func(v uint64) p4gen.Expr { return p4gen.B(p4gen.Eq, l.Ver, p4gen.C(v, 8)) }
	proto := func(p uint64) p4gen.Expr { return p4gen.B(p4gen.Eq, l.Proto(), p4gen.C(p, 8)) }
	ip := p4gen.B(p4gen.Ne, l.Ver, p4gen.C(0, 8))
	switch name {
	case "eth":
		return l.Eth
	case "vlan":
		return l.Tagged
	case "ip":
		return ip
	case "ipv4":
		return ver(4)
	case "ipv6":
		return ver(6)
	case "tcp":
		return p4gen.AllOf(ip, proto(6))
	case "udp":
		return p4gen.AllOf(ip, proto(17))
	}
	return icmp(l)
}

func icmp(l *p4gen.Layers) p4gen.Expr {
	return p4gen.AnyOf(p4gen.AllOf(p4gen.B(p4gen.Eq, l.Ver, p4gen.C(4, 8)), p4gen.B(p4gen.Eq, l.Proto(), p4gen.C(1, 8))),
		p4gen.AllOf(p4gen.B(p4gen.Eq, l.Ver, p4gen.C(6, 8)), p4gen.B(p4gen.Eq, l.Proto(), p4gen.C(58, 8))))
}

// p4Fields are match's fields on a switch: the standard headers' value
// (p4gen.Hdr) and which layer has it.
var p4Fields = map[string]struct {
	hdr   string
	layer string // eth, vlan, ipv4, ipv6, ip; tcp, udp, icmp: in the transport header
}{
	"eth.src": {"eth.src", "eth"}, "eth.dst": {"eth.dst", "eth"}, "eth.type": {"eth.type", "eth"},
	"vlan.id":  {"vlan.id", "vlan"},
	"ipv4.src": {"ipv4.src", "ipv4"}, "ipv4.dst": {"ipv4.dst", "ipv4"}, "ipv4.proto": {"ipv4.proto", "ipv4"},
	"ipv4.ttl": {"ipv4.ttl", "ipv4"}, "ipv4.len": {"ipv4.len", "ipv4"}, "ipv4.tos": {"ipv4.tos", "ipv4"},
	"ipv4.id": {"ipv4.id", "ipv4"}, "ipv4.csum": {"ipv4.checksum", "ipv4"},
	"ipv6.nh": {"ipv6.nh", "ipv6"}, "ipv6.hlim": {"ipv6.hlim", "ipv6"},
	"tcp.sport": {"l4.sport", "tcp"}, "tcp.dport": {"l4.dport", "tcp"}, "tcp.seq": {"tcp.seq", "tcp"},
	"tcp.ack": {"tcp.ack", "tcp"}, "tcp.flags": {"tcp.flags", "tcp"}, "tcp.win": {"tcp.win", "tcp"},
	"udp.sport": {"l4.sport", "udp"}, "udp.dport": {"l4.dport", "udp"}, "udp.len": {"udp.len", "udp"},
	"icmp.type": {"icmp.type", "icmp"}, "icmp.code": {"icmp.code", "icmp"},
}

func (c *p4c) field(n *node) (p4val, error) {
	l := c.layers()
	w64 := func(x p4gen.Expr) p4gen.Expr { return p4gen.Cast{Bits: 64, X: x} }
	switch n.name {
	case "pkt.len", "pkt.caplen":
		return p4val{k: kInt, num: atomForm(n.name, atom{x: w64(p4gen.Std("packet_length")), present: p4gen.True})}, nil
	case "pkt.ts":
		return p4val{}, errAt(n.pos, "pkt.ts is the packet clock in ns, which a switch does not have (its clock is µs of its own)")
	case "pkt.inport", "pkt.outport", "pkt.qdepth", "switch.id":
		return c.switchField(n)
	case "segway.msg", "segway.ts", "segway.time":
		// ez-Segway's header: the parser extracts it from a datagram to
		// its port once a function reads it (p4gen.UseSegway).
		if c.checking {
			return p4val{k: kInt, num: atomForm(n.name, atom{x: p4gen.C(0, 64), present: p4gen.True})}, nil
		}
		p4gen.UseSegway(c.b.Prog)
		x, valid := p4gen.SegwayField(strings.TrimPrefix(n.name, "segway."))
		return p4val{k: kInt, num: atomForm(n.name, atom{x: w64(x), present: valid})}, nil
	case "ip.proto":
		return p4val{k: kInt, num: atomForm(n.name, atom{x: w64(l.Proto()), present: p4gen.B(p4gen.Ne, l.Ver, p4gen.C(0, 8))})}, nil
	case "ipv6.src", "ipv6.dst":
		hi, _ := p4gen.Hdr(n.name + "_hi")
		lo, _ := p4gen.Hdr(n.name + "_lo")
		return p4val{k: kAddr, addr: v6{hi: hi, lo: lo, present: c.layer("ipv6")}}, nil
	}
	f, ok := p4Fields[n.name]
	if !ok {
		return p4val{}, errAt(n.pos, "%s is not a field a switch has", n.name)
	}
	x, _ := p4gen.Hdr(f.hdr)
	var present p4gen.Expr
	switch f.layer {
	case "eth":
		present = l.Eth
	case "vlan":
		present = l.VLAN
	case "ipv4", "ipv6":
		present = c.layer(f.layer)
	default:
		_, present = l.L4Value(f.hdr, c.layer(f.layer))
	}
	return p4val{k: kInt, num: atomForm(n.name, atom{x: w64(x), present: present})}, nil
}

func (c *p4c) state(n *node) (p4val, error) {
	if c.checking {
		return p4val{k: kInt, num: atomForm(n.label+"."+n.name, atom{x: p4gen.C(0, 64), present: p4gen.True})}, nil
	}
	exports, ok := c.b.StateOf(n.label)
	if !ok {
		return p4val{}, errAt(n.pos, "%s.%s: the function labelled %s is not on this switch before the match", n.label, n.name, n.label)
	}
	x, ok := exports[n.name]
	if !ok {
		var names []string
		for k := range exports {
			names = append(names, k)
		}
		sort.Strings(names)
		return p4val{}, errAt(n.pos, "%s.%s: %s does not keep %s where the switch's pipeline reads it (it exports %v)", n.label, n.name, n.label, n.name, names)
	}
	return p4val{k: kInt, num: atomForm(n.label+"."+n.name, atom{x: p4gen.Cast{Bits: 64, X: x}, present: p4gen.True})}, nil
}

func (c *p4c) in(n *node) (p4val, error) {
	l, err := c.node(n.kids[0])
	if err != nil {
		return p4val{}, err
	}
	p := n.kids[1].pfx
	if p.Addr().Is4() {
		a, ok := l.num.single()
		if l.k != kInt || !ok {
			return p4val{}, errAt(n.pos, "%s is an IPv4 prefix: its left side must be an IPv4 address", p)
		}
		b := p.Addr().As4()
		mask := uint64(uint32(math.MaxUint32 << (32 - p.Bits())))
		if p.Bits() == 0 {
			mask = 0
		}
		return p4val{k: kBool, cond: p4gen.AllOf(a.present, p4gen.B(p4gen.Eq, a.x, p4gen.B(p4gen.And, a.x, p4gen.C(0xffffffff, 64))),
			p4gen.B(p4gen.Eq, p4gen.B(p4gen.And, a.x, p4gen.C(mask, 64)), p4gen.C(uint64(be32(b[:], 0)), 64)))}, nil
	}
	if l.k != kAddr {
		return p4val{}, errAt(n.pos, "%s is an IPv6 prefix: its left side must be an IPv6 address", p)
	}
	nhi, nlo := halves(p.Addr())
	mhi, mlo := masks6(p.Bits())
	return p4val{k: kBool, cond: p4gen.AllOf(l.addr.present,
		p4gen.B(p4gen.Eq, p4gen.B(p4gen.And, l.addr.hi, p4gen.C(mhi, 64)), p4gen.C(nhi, 64)),
		p4gen.B(p4gen.Eq, p4gen.B(p4gen.And, l.addr.lo, p4gen.C(mlo, 64)), p4gen.C(nlo, 64)))}, nil
}

func (c *p4c) compare(n *node) (p4val, error) {
	l, err := c.node(n.kids[0])
	if err != nil {
		return p4val{}, err
	}
	r, err := c.node(n.kids[1])
	if err != nil {
		return p4val{}, err
	}
	if l.k == kAddr || r.k == kAddr {
		if l.k != r.k || (n.op != "==" && n.op != "!=") {
			return p4val{}, errAt(n.pos, "IPv6 addresses compare with == and != (or in a prefix)")
		}
		eq := p4gen.AllOf(p4gen.B(p4gen.Eq, l.addr.hi, r.addr.hi), p4gen.B(p4gen.Eq, l.addr.lo, r.addr.lo))
		if n.op == "!=" {
			eq = p4gen.Unary{Op: p4gen.Not, X: eq}
		}
		return p4val{k: kBool, cond: p4gen.AllOf(l.addr.present, r.addr.present, eq)}, nil
	}
	if l.k == kBool || r.k == kBool {
		return p4val{}, errAt(n.pos, "%s compares numbers, not truth values", n.op)
	}
	// l op r as Σ pos·x + C op Σ neg·y + D, whole numbers all.
	d := l.num.plus(r.num, big.NewRat(-1, 1))
	lcm := big.NewInt(1)
	for _, k := range d.terms {
		lcm = lcmOf(lcm, k.Denom())
	}
	lcm = lcmOf(lcm, d.c.Denom())
	scale := new(big.Rat).SetInt(lcm)
	var left, right []p4gen.Expr
	present := []p4gen.Expr{}
	names := make([]string, 0, len(d.terms))
	for name := range d.terms {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		k := new(big.Rat).Mul(d.terms[name], scale)
		a := d.atoms[name]
		present = append(present, a.present)
		side := &left
		if k.Sign() < 0 {
			k.Neg(k)
			side = &right
		}
		x, err := times(a.x, k.Num(), n)
		if err != nil {
			return p4val{}, err
		}
		*side = append(*side, x)
	}
	cst := new(big.Rat).Mul(d.c, scale)
	if !cst.Num().IsInt64() || cst.Num().CmpAbs(big.NewInt(1<<62)) > 0 {
		return p4val{}, errAt(n.pos, "the constant %v is beyond a switch's 64 bits", cst)
	}
	if v := cst.Num().Int64(); v > 0 {
		left = append(left, p4gen.C(uint64(v), 64))
	} else if v < 0 {
		right = append(right, p4gen.C(uint64(-v), 64))
	}
	sum := func(xs []p4gen.Expr) p4gen.Expr {
		var s p4gen.Expr = p4gen.C(0, 64)
		for i, x := range xs {
			if i == 0 {
				s = x
			} else {
				s = p4gen.B(p4gen.Add, s, x)
			}
		}
		return s
	}
	op := map[string]p4gen.BinOp{"==": p4gen.Eq, "!=": p4gen.Ne, "<": p4gen.Lt, "<=": p4gen.Le, ">": p4gen.Gt, ">=": p4gen.Ge}[n.op]
	return p4val{k: kBool, cond: p4gen.AllOf(append(present, p4gen.B(op, sum(left), sum(right)))...)}, nil
}

func lcmOf(a, b *big.Int) *big.Int {
	g := new(big.Int).GCD(nil, nil, a, b)
	return new(big.Int).Mul(new(big.Int).Div(a, g), b)
}

// times multiplies x by a whole constant with shifts and adds.
func times(x p4gen.Expr, k *big.Int, n *node) (p4gen.Expr, error) {
	if !k.IsUint64() || k.Uint64() > 1<<20 {
		return nil, errAt(n.pos, "%v: the constant %v is too large to multiply by shifts and adds", errP4Arith, k)
	}
	v := k.Uint64()
	var out p4gen.Expr
	for b := 0; v != 0; b, v = b+1, v>>1 {
		if v&1 == 0 {
			continue
		}
		t := x
		if b > 0 {
			t = p4gen.B(p4gen.Shl, x, p4gen.C(uint64(b), 64))
		}
		if out == nil {
			out = t
		} else {
			out = p4gen.B(p4gen.Add, out, t)
		}
	}
	return out, nil
}
