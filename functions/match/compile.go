package match

import (
	"fmt"
	"math"
	"net/netip"

	"github.com/ffpf-go/ffpf/functions"
)

type floatFn func(*env) (float64, bool)
type boolFn func(*env) bool

type kind uint8

const (
	kBool kind = iota + 1
	kInt
	kFloat
	kAddr // an IPv6 address
)

var kindName = map[kind]string{kBool: "a truth value", kInt: "a number", kFloat: "a number", kAddr: "an IPv6 address"}

// val is a compiled node: one of the closures, by kind.
type val struct {
	k kind
	b boolFn
	i intFn
	f floatFn
	a addrFn
}

// asFloat gives a number as a float closure.
func (v val) asFloat() floatFn {
	if v.k == kFloat {
		return v.f
	}
	i := v.i
	return func(e *env) (float64, bool) {
		x, ok := i(e)
		return float64(x), ok
	}
}

// asInt gives a number as an integer: a float (named state) is one when
// it is whole, and missing otherwise.
func (v val) asInt() val {
	if v.k == kInt {
		return v
	}
	f := v.f
	return val{k: kInt, i: func(e *env) (int64, bool) {
		x, ok := f(e)
		if !ok || x != math.Trunc(x) || math.Abs(x) >= 1<<63 {
			return 0, false
		}
		return int64(x), true
	}}
}

// stateFn resolves LABEL.NAME to a closure: an intFn or a floatFn.
type stateFn func(label, name string) (any, error)

// compile turns a parsed predicate into one closure, checking its types.
func compile(n *node, state stateFn) (boolFn, error) {
	v, err := compileNode(n, state)
	if err != nil {
		return nil, err
	}
	if v.k != kBool {
		return nil, errAt(n.pos, "the predicate is %s, not a truth value: compare it (tcp.dport == 80)", kindName[v.k])
	}
	return v.b, nil
}

func compileNode(n *node, state stateFn) (val, error) {
	var kids []val
	for _, k := range n.kids {
		if n.op == "in" && k.op == "addr" {
			break
		}
		v, err := compileNode(k, state)
		if err != nil {
			return val{}, err
		}
		kids = append(kids, v)
	}
	switch n.op {
	case "num":
		if n.isInt {
			c := n.i
			return val{k: kInt, i: func(*env) (int64, bool) { return c, true }}, nil
		}
		c := n.f
		return val{k: kFloat, f: func(*env) (float64, bool) { return c, true }}, nil
	case "addr":
		if !n.plain {
			return val{}, errAt(n.pos, "the prefix %s is for in (ipv4.src in %s)", n.pfx, n.pfx)
		}
		a := n.pfx.Addr()
		if a.Is4() {
			b := a.As4()
			c := int64(be32(b[:], 0))
			return val{k: kInt, i: func(*env) (int64, bool) { return c, true }}, nil
		}
		b := a.As16()
		hi, lo := uint64(be32(b[:], 0))<<32|uint64(be32(b[:], 4)), uint64(be32(b[:], 8))<<32|uint64(be32(b[:], 12))
		return val{k: kAddr, a: func(*env) (uint64, uint64, bool) { return hi, lo, true }}, nil
	case "field":
		f := fields[n.name]
		if f.a != nil {
			return val{k: kAddr, a: f.a}, nil
		}
		return val{k: kInt, i: f.i}, nil
	case "layer":
		return val{k: kBool, b: layers[n.name]}, nil
	case "name":
		i := n.i
		return val{k: kInt, i: func(e *env) (int64, bool) { return e.vars[i], true }}, nil
	case "state":
		fn, err := state(n.label, n.name)
		if err != nil {
			return val{}, errAt(n.pos, "%v", err)
		}
		switch fn := fn.(type) {
		case intFn:
			return val{k: kInt, i: fn}, nil
		case floatFn:
			return val{k: kFloat, f: fn}, nil
		}
		panic(fmt.Sprintf("match: state resolver gave %T", fn))
	case "not":
		x := kids[0]
		if x.k != kBool {
			return val{}, errAt(n.pos, "not applies to a truth value, not %s", kindName[x.k])
		}
		b := x.b
		return val{k: kBool, b: func(e *env) bool { return !b(e) }}, nil
	case "and", "or":
		l, r := kids[0], kids[1]
		if l.k != kBool || r.k != kBool {
			return val{}, errAt(n.pos, "%s joins truth values (comparisons, layer names), not %s", n.op, kindName[max(l.k, r.k)])
		}
		lb, rb := l.b, r.b
		if n.op == "and" {
			return val{k: kBool, b: func(e *env) bool { return lb(e) && rb(e) }}, nil
		}
		return val{k: kBool, b: func(e *env) bool { return lb(e) || rb(e) }}, nil
	case "neg":
		x := kids[0]
		switch x.k {
		case kInt:
			i := x.i
			return val{k: kInt, i: func(e *env) (int64, bool) { v, ok := i(e); return -v, ok }}, nil
		case kFloat:
			f := x.f
			return val{k: kFloat, f: func(e *env) (float64, bool) { v, ok := f(e); return -v, ok }}, nil
		}
		return val{}, errAt(n.pos, "- applies to a number, not %s", kindName[x.k])
	case "+", "-", "*", "/", "%", "&", "|":
		return arith(n, kids[0], kids[1])
	case "call":
		return compileCall(n, kids)
	case "in":
		return in(n, kids[0], n.kids[1])
	case "==", "!=", "<", "<=", ">", ">=":
		return compare(n, kids[0], kids[1])
	}
	panic("match: unknown node " + n.op)
}

func numeric(k kind) bool { return k == kInt || k == kFloat }

func arith(n *node, l, r val) (val, error) {
	if !numeric(l.k) || !numeric(r.k) {
		return val{}, errAt(n.pos, "%s applies to numbers, not %s", n.op, kindName[min(l.k, r.k)])
	}
	if n.op == "%" || n.op == "&" || n.op == "|" {
		for _, k := range n.kids {
			if k.op == "num" && !k.isInt {
				return val{}, errAt(n.pos, "%s applies to whole numbers, not %v", n.op, k.f)
			}
		}
		l, r = l.asInt(), r.asInt()
	}
	if l.k == kInt && r.k == kInt && n.op != "/" {
		a, b := l.i, r.i
		var f intFn
		switch n.op {
		case "+":
			f = func(e *env) (int64, bool) { x, ok := a(e); y, ok2 := b(e); return x + y, ok && ok2 }
		case "-":
			f = func(e *env) (int64, bool) { x, ok := a(e); y, ok2 := b(e); return x - y, ok && ok2 }
		case "*":
			f = func(e *env) (int64, bool) { x, ok := a(e); y, ok2 := b(e); return x * y, ok && ok2 }
		case "&":
			f = func(e *env) (int64, bool) { x, ok := a(e); y, ok2 := b(e); return x & y, ok && ok2 }
		case "|":
			f = func(e *env) (int64, bool) { x, ok := a(e); y, ok2 := b(e); return x | y, ok && ok2 }
		case "%":
			f = func(e *env) (int64, bool) {
				x, ok := a(e)
				y, ok2 := b(e)
				if y == 0 || !ok || !ok2 {
					return 0, false
				}
				return x % y, true
			}
		}
		return val{k: kInt, i: f}, nil
	}
	a, b := l.asFloat(), r.asFloat()
	var f floatFn
	switch n.op {
	case "+":
		f = func(e *env) (float64, bool) { x, ok := a(e); y, ok2 := b(e); return x + y, ok && ok2 }
	case "-":
		f = func(e *env) (float64, bool) { x, ok := a(e); y, ok2 := b(e); return x - y, ok && ok2 }
	case "*":
		f = func(e *env) (float64, bool) { x, ok := a(e); y, ok2 := b(e); return x * y, ok && ok2 }
	case "/":
		f = func(e *env) (float64, bool) { x, ok := a(e); y, ok2 := b(e); return x / y, ok && ok2 }
	}
	return val{k: kFloat, f: f}, nil
}

func in(n *node, l val, pfx *node) (val, error) {
	p := pfx.pfx
	if p.Addr().Is4() {
		if l.k != kInt {
			return val{}, errAt(n.pos, "%s is an IPv4 prefix: its left side must be an IPv4 address (ipv4.src), not %s", p, kindName[l.k])
		}
		b := p.Addr().As4()
		net := int64(be32(b[:], 0))
		mask := int64(uint32(math.MaxUint32 << (32 - p.Bits())))
		if p.Bits() == 0 {
			mask = 0
		}
		i := l.i
		return val{k: kBool, b: func(e *env) bool {
			v, ok := i(e)
			return ok && v>>32 == 0 && v >= 0 && v&mask == net
		}}, nil
	}
	if l.k != kAddr {
		return val{}, errAt(n.pos, "%s is an IPv6 prefix: its left side must be an IPv6 address (ipv6.src), not %s", p, kindName[l.k])
	}
	nhi, nlo := halves(p.Addr())
	mhi, mlo := masks6(p.Bits())
	a := l.a
	return val{k: kBool, b: func(e *env) bool {
		hi, lo, ok := a(e)
		return ok && hi&mhi == nhi && lo&mlo == nlo
	}}, nil
}

func compare(n *node, l, r val) (val, error) {
	if l.k == kAddr || r.k == kAddr {
		if l.k != r.k {
			return val{}, errAt(n.pos, "%s compares an IPv6 address with %s", n.op, kindName[min(l.k, r.k)])
		}
		if n.op != "==" && n.op != "!=" {
			return val{}, errAt(n.pos, "IPv6 addresses compare with == and != (or in a prefix), not %s", n.op)
		}
		a, b, eq := l.a, r.a, n.op == "=="
		return val{k: kBool, b: func(e *env) bool {
			h1, l1, ok1 := a(e)
			h2, l2, ok2 := b(e)
			return ok1 && ok2 && (h1 == h2 && l1 == l2) == eq
		}}, nil
	}
	if !numeric(l.k) || !numeric(r.k) {
		return val{}, errAt(n.pos, "%s compares numbers, not %s", n.op, kindName[kBool])
	}
	if l.k == kInt && r.k == kInt {
		if c, ok := constInt(n.kids[1]); ok {
			return val{k: kBool, b: compareConst(n.op, l.i, c)}, nil
		}
		if c, ok := constInt(n.kids[0]); ok {
			return val{k: kBool, b: compareConst(swapped[n.op], r.i, c)}, nil
		}
		a, b := l.i, r.i
		var f boolFn
		switch n.op {
		case "==":
			f = func(e *env) bool { x, ok := a(e); y, ok2 := b(e); return ok && ok2 && x == y }
		case "!=":
			f = func(e *env) bool { x, ok := a(e); y, ok2 := b(e); return ok && ok2 && x != y }
		case "<":
			f = func(e *env) bool { x, ok := a(e); y, ok2 := b(e); return ok && ok2 && x < y }
		case "<=":
			f = func(e *env) bool { x, ok := a(e); y, ok2 := b(e); return ok && ok2 && x <= y }
		case ">":
			f = func(e *env) bool { x, ok := a(e); y, ok2 := b(e); return ok && ok2 && x > y }
		case ">=":
			f = func(e *env) bool { x, ok := a(e); y, ok2 := b(e); return ok && ok2 && x >= y }
		}
		return val{k: kBool, b: f}, nil
	}
	a, b := l.asFloat(), r.asFloat()
	var f boolFn
	switch n.op {
	case "==":
		f = func(e *env) bool { x, ok := a(e); y, ok2 := b(e); return ok && ok2 && x == y }
	case "!=":
		f = func(e *env) bool {
			x, ok := a(e)
			y, ok2 := b(e)
			return ok && ok2 && x != y && !math.IsNaN(x) && !math.IsNaN(y)
		}
	case "<":
		f = func(e *env) bool { x, ok := a(e); y, ok2 := b(e); return ok && ok2 && x < y }
	case "<=":
		f = func(e *env) bool { x, ok := a(e); y, ok2 := b(e); return ok && ok2 && x <= y }
	case ">":
		f = func(e *env) bool { x, ok := a(e); y, ok2 := b(e); return ok && ok2 && x > y }
	case ">=":
		f = func(e *env) bool { x, ok := a(e); y, ok2 := b(e); return ok && ok2 && x >= y }
	}
	return val{k: kBool, b: f}, nil
}

// checkState is the resolver used at populate, before the state's writer
// exists: named state is a number.
func checkState(label, name string) (any, error) {
	return floatFn(func(*env) (float64, bool) { return 0, true }), nil
}

// readState resolves LABEL.NAME against the instantiated writer.
func readState(ctx *functions.Context) stateFn {
	return func(label, name string) (any, error) {
		if ctx.StateOf == nil {
			return nil, fmt.Errorf("%s.%s: no state of %q is available here", label, name, label)
		}
		fn, ok := ctx.StateOf(label)
		if !ok {
			return nil, fmt.Errorf("%s.%s: the function labelled %s is not instantiated", label, name, label)
		}
		r, ok := fn.(functions.Readable)
		if !ok {
			return nil, fmt.Errorf("%s.%s: the function labelled %s has no state a predicate can read", label, name, label)
		}
		if ir, ok := fn.(functions.IntReadable); ok {
			if get, err := ir.ReadInt(name); err == nil {
				return intFn(func(e *env) (int64, bool) { return get(e.p, e.slot), true }), nil
			}
		}
		get, err := r.Read(name)
		if err != nil {
			msg := fmt.Sprintf("%s.%s: %v", label, name, err)
			if s := near(name, r.ReadNames()); s != "" {
				msg += fmt.Sprintf(" (did you mean %s.%s?)", label, s)
			}
			return nil, fmt.Errorf("%s", msg)
		}
		return floatFn(func(e *env) (float64, bool) { return get(e.p, e.slot), true }), nil
	}
}

// constInt is the value of a node that is an integer constant.
func constInt(n *node) (int64, bool) {
	switch {
	case n.op == "num" && n.isInt:
		return n.i, true
	case n.op == "addr" && n.plain && n.pfx.Addr().Is4():
		b := n.pfx.Addr().As4()
		return int64(be32(b[:], 0)), true
	}
	return 0, false
}

// halves is an IPv6 address as two 64-bit words, the first bytes first.
func halves(a netip.Addr) (uint64, uint64) {
	b := a.As16()
	return uint64(be32(b[:], 0))<<32 | uint64(be32(b[:], 4)), uint64(be32(b[:], 8))<<32 | uint64(be32(b[:], 12))
}

// masks6 is an IPv6 prefix length as masks of the two halves.
func masks6(bits int) (mhi, mlo uint64) {
	switch {
	case bits >= 64:
		mhi, mlo = math.MaxUint64, ^(math.MaxUint64 >> (bits - 64))
		if bits == 64 {
			mlo = 0
		}
	case bits > 0:
		mhi = ^(uint64(math.MaxUint64) >> bits)
	}
	return mhi, mlo
}

// swapped is the comparison with its sides swapped: c < x is x > c.
var swapped = map[string]string{"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}

// compareConst compares an integer with a constant: one closure call
// fewer than compare's general case, for the commonest predicates.
func compareConst(op string, a intFn, c int64) boolFn {
	switch op {
	case "==":
		return func(e *env) bool { x, ok := a(e); return ok && x == c }
	case "!=":
		return func(e *env) bool { x, ok := a(e); return ok && x != c }
	case "<":
		return func(e *env) bool { x, ok := a(e); return ok && x < c }
	case "<=":
		return func(e *env) bool { x, ok := a(e); return ok && x <= c }
	case ">":
		return func(e *env) bool { x, ok := a(e); return ok && x > c }
	}
	return func(e *env) bool { x, ok := a(e); return ok && x >= c }
}
