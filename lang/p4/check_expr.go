package p4

import "math/bits"

func (c *checker) stmt(s *scope, st Stmt) {
	switch st := st.(type) {
	case *Block:
		inner := &scope{parent: s, syms: map[string]*Symbol{}}
		for _, x := range st.Stmts {
			c.stmt(inner, x)
		}
	case *VarDecl:
		c.onlyIn(st.At, "a variable")
		c.varDecl(s, st)
	case *AssignStmt:
		c.onlyIn(st.At, "an assignment")
		dt := c.lvalue(s, st.Dst)
		if dt != nil {
			c.want(s, st.X, dt, "the value assigned")
		} else {
			c.expr(s, st.X)
		}
	case *IfStmt:
		c.onlyIn(st.At, "an if statement")
		c.want(s, st.Cond, boolT, "a condition")
		c.stmt(s, st.Then)
		if st.Else != nil {
			c.stmt(s, st.Else)
		}
	case *CallStmt:
		c.call(s, st.Call, true)
	}
}

// onlyIn refuses statements in blocks that v1model restricts to calls:
// the verify and compute checksum controls and the deparser.
func (c *checker) onlyIn(at Pos, what string) {
	switch c.role {
	case "verify", "compute", "deparser":
		c.errorf(at, "%s in the %s control: v1model allows only %s there", what, c.role,
			map[string]string{"verify": "verify_checksum calls", "compute": "update_checksum calls", "deparser": "packet.emit calls"}[c.role])
	}
}

// lvalue checks an expression that is written and returns its type.
func (c *checker) lvalue(s *scope, x Expr) *Type {
	t := c.expr(s, x)
	if t == nil || !c.writable(x) {
		return nil
	}
	if t.Kind != KBit && t.Kind != KBool {
		c.errorf(x.Position(), "the subset assigns bit<W> and bool values, not %s", t)
		return nil
	}
	return t
}

// want checks x and that its type is t; an unsized constant takes t's
// width when it fits.
func (c *checker) want(s *scope, x Expr, t *Type, what string) {
	got := c.expr(s, x)
	if got == nil || t == nil {
		return
	}
	c.coerce(x, got, t, what)
}

// coerce makes x, of type got, a t: an unsized constant becomes bit<W>
// when it fits. It reports whether the types agree.
func (c *checker) coerce(x Expr, got, t *Type, what string) bool {
	if got.Kind == KInt && t.Kind == KBit {
		v := c.ch.Consts[x]
		if t.Width < 64 && bits.Len64(v) > t.Width {
			c.errorf(x.Position(), "%s: %d does not fit %s", what, v, t)
			return false
		}
		c.ch.Types[x] = t
		return true
	}
	if !same(got, t) {
		c.errorf(x.Position(), "%s is %s, not %s", what, got, t)
		return false
	}
	return true
}

func (c *checker) expr(s *scope, x Expr) *Type {
	t := c.expr1(s, x)
	if t != nil {
		c.ch.Types[x] = t
	}
	return t
}

func (c *checker) constOf(x Expr) (uint64, bool) {
	v, ok := c.ch.Consts[x]
	return v, ok
}

func (c *checker) expr1(s *scope, x Expr) *Type {
	switch x := x.(type) {
	case *IntLit:
		c.ch.Consts[x] = x.Value
		if x.Width > 0 {
			return bitT(x.Width)
		}
		return intT
	case *BoolLit:
		if x.Value {
			c.ch.Consts[x] = 1
		} else {
			c.ch.Consts[x] = 0
		}
		return boolT
	case *StringLit:
		c.errorf(x.At, "a string is not a value of the subset")
		return nil
	case *Name:
		sym := c.resolve(s, x.Name, x.At)
		if sym == nil {
			return nil
		}
		c.ch.Syms[x] = sym
		switch sym.Kind {
		case SymVar, SymParam, SymInstance, SymTable, SymAction, SymEnum:
			return sym.Type
		case SymFunc:
			c.errorf(x.At, "%s is a function: call it", x.Name)
		default:
			c.errorf(x.At, "%s is not a value", x.Name)
		}
		return nil
	case *Member:
		xt := c.expr(s, x.X)
		if xt == nil {
			return nil
		}
		switch xt.Kind {
		case KHeader, KStruct:
			if f := xt.Field(x.Name); f != nil {
				return f.Type
			}
			c.errorf(x.NameAt, "%s has no field %s", xt.Name, x.Name)
		case KEnum:
			for i, m := range xt.Members {
				if m == x.Name {
					c.ch.Consts[x] = uint64(i)
					return xt
				}
			}
			c.errorf(x.NameAt, "%s has no member %s", xt.Name, x.Name)
		default:
			c.errorf(x.NameAt, "%s is a method: call it", ExprString(x))
		}
		return nil
	case *CallExpr:
		return c.call(s, x, false)
	case *UnaryExpr:
		t := c.expr(s, x.X)
		if t == nil {
			return nil
		}
		v, k := c.constOf(x.X)
		switch {
		case x.Op == "!" && t.Kind == KBool:
			if k {
				c.ch.Consts[x] = v ^ 1
			}
			return t
		case x.Op == "~" && t.Kind == KBit:
			if k {
				c.ch.Consts[x] = ^v & t.Mask()
			}
			return t
		case x.Op == "-" && t.Kind == KBit:
			if k {
				c.ch.Consts[x] = -v & t.Mask()
			}
			return t
		case x.Op == "-" && t.Kind == KInt:
			c.errorf(x.At, "a negative constant: the subset has no int<W>")
			return nil
		}
		c.errorf(x.At, "%s of %s", x.Op, t)
		return nil
	case *BinaryExpr:
		return c.binary(s, x)
	case *CastExpr:
		t := c.expr(s, x.X)
		to := c.typeRef(x.Type)
		if t == nil || to == nil {
			return nil
		}
		ok := false
		switch {
		case to.Kind == KBit && (t.Kind == KBit || t.Kind == KInt):
			ok = true
		case to.Kind == KBit && t.Kind == KBool:
			ok = to.Width == 1
		case to.Kind == KBool:
			ok = t.Kind == KBool || t.Kind == KBit && t.Width == 1
		}
		if !ok {
			c.errorf(x.At, "cannot cast %s to %s", t, to)
			return nil
		}
		if v, k := c.constOf(x.X); k {
			c.ch.Consts[x] = v & to.Mask()
		}
		return to
	case *SliceExpr:
		t := c.expr(s, x.X)
		c.expr(s, x.Hi)
		c.expr(s, x.Lo)
		hi, ok1 := c.constOf(x.Hi)
		lo, ok2 := c.constOf(x.Lo)
		if !ok1 || !ok2 {
			c.errorf(x.At, "a slice's bounds are constants")
			return nil
		}
		if t == nil {
			return nil
		}
		if t.Kind != KBit {
			c.errorf(x.At, "a slice of %s: only bit<W> values are sliced", t)
			return nil
		}
		if hi < lo || hi >= uint64(t.Width) {
			c.errorf(x.At, "slice [%d:%d] of %s", hi, lo, t)
			return nil
		}
		r := bitT(int(hi - lo + 1))
		if v, k := c.constOf(x.X); k {
			c.ch.Consts[x] = v >> lo & r.Mask()
		}
		return r
	case *CondExpr:
		c.want(s, x.Cond, boolT, "a condition")
		a, b := c.expr(s, x.Then), c.expr(s, x.Else)
		if a == nil || b == nil {
			return nil
		}
		switch {
		case a.Kind == KInt && b.Kind == KInt:
			c.errorf(x.At, "both sides of ?: are unsized constants: give one a width")
			return nil
		case a.Kind == KInt:
			if c.coerce(x.Then, a, b, "the value if true") {
				return b
			}
			return nil
		case b.Kind == KInt || !same(a, b):
			if c.coerce(x.Else, b, a, "the value if false") {
				return a
			}
			return nil
		}
		return a
	case *ListExpr:
		t := &Type{Kind: KList}
		for _, e := range x.Elems {
			t.Elems = append(t.Elems, c.expr(s, e))
		}
		return t
	case *MaskExpr, *RangeExpr, *DefaultExpr, *DontCare:
		c.errorf(x.Position(), "a keyset expression belongs in a select case or a table entry")
		return nil
	}
	return nil
}

// binary checks a binary operation, folding constants.
func (c *checker) binary(s *scope, x *BinaryExpr) *Type {
	l, r := c.expr(s, x.L), c.expr(s, x.R)
	if l == nil || r == nil {
		return nil
	}
	lv, lk := c.constOf(x.L)
	rv, rk := c.constOf(x.R)
	k := lk && rk
	fold := func(v uint64, t *Type) {
		if k {
			c.ch.Consts[x] = v & t.Mask()
		}
	}
	b2u := func(b bool) uint64 {
		if b {
			return 1
		}
		return 0
	}
	switch x.Op {
	case "&&", "||":
		if l.Kind != KBool || r.Kind != KBool {
			c.errorf(x.At, "%s of %s and %s: both sides are bool", x.Op, l, r)
			return nil
		}
		if x.Op == "&&" {
			fold(lv&rv, boolT)
		} else {
			fold(lv|rv, boolT)
		}
		return boolT
	case "<<", ">>":
		if l.Kind != KBit && l.Kind != KInt || r.Kind != KBit && r.Kind != KInt {
			c.errorf(x.At, "%s of %s by %s", x.Op, l, r)
			return nil
		}
		if l.Kind == KInt && !rk {
			c.errorf(x.At, "shifting an unsized constant by a variable: give it a width")
			return nil
		}
		if rv >= 64 {
			fold(0, l)
		} else if x.Op == "<<" {
			fold(lv<<rv, l)
		} else {
			fold(lv>>rv, l)
		}
		return l
	case "++":
		if l.Kind != KBit || r.Kind != KBit {
			c.errorf(x.At, "++ concatenates bit<W> values, not %s and %s", l, r)
			return nil
		}
		if l.Width+r.Width > 64 {
			c.errorf(x.At, "++ of %s and %s: more than 64 bits", l, r)
			return nil
		}
		t := bitT(l.Width + r.Width)
		fold(lv<<uint(r.Width)|rv, t)
		return t
	}
	// The operands have one type: an unsized constant takes the other's.
	t := l
	switch {
	case l.Kind == KInt && r.Kind == KInt:
		t = intT
	case l.Kind == KInt:
		if !c.coerce(x.L, l, r, "the left operand of "+x.Op) {
			return nil
		}
		t = r
	case r.Kind == KInt:
		if !c.coerce(x.R, r, l, "the right operand of "+x.Op) {
			return nil
		}
	case !same(l, r):
		c.errorf(x.At, "%s of %s and %s: the operands' widths differ (cast one)", x.Op, l, r)
		return nil
	}
	switch x.Op {
	case "==", "!=":
		if t.Kind != KBit && t.Kind != KBool && t.Kind != KInt && t.Kind != KEnum {
			c.errorf(x.At, "%s of %s", x.Op, t)
			return nil
		}
		fold(b2u((lv == rv) == (x.Op == "==")), boolT)
		return boolT
	case "<", ">", "<=", ">=":
		if t.Kind != KBit && t.Kind != KInt {
			c.errorf(x.At, "%s of %s: only bit<W> values are ordered", x.Op, t)
			return nil
		}
		var b bool
		switch x.Op {
		case "<":
			b = lv < rv
		case ">":
			b = lv > rv
		case "<=":
			b = lv <= rv
		default:
			b = lv >= rv
		}
		fold(b2u(b), boolT)
		return boolT
	}
	if t.Kind != KBit && t.Kind != KInt {
		c.errorf(x.At, "%s of %s: arithmetic is on bit<W> values", x.Op, t)
		return nil
	}
	m := t.Mask()
	switch x.Op {
	case "+":
		fold(lv+rv, t)
	case "-":
		fold(lv-rv, t)
	case "*":
		fold(lv*rv, t)
	case "/", "%":
		if rk && rv == 0 {
			c.errorf(x.At, "division by zero")
			return nil
		}
		if k && x.Op == "/" {
			fold(lv/rv, t)
		} else if k {
			fold(lv%rv, t)
		}
	case "|+|":
		if sum := lv + rv; sum < lv || sum > m {
			fold(m, t)
		} else {
			fold(sum, t)
		}
	case "|-|":
		if rv > lv {
			fold(0, t)
		} else {
			fold(lv-rv, t)
		}
	case "&":
		fold(lv&rv, t)
	case "|":
		fold(lv|rv, t)
	case "^":
		fold(lv^rv, t)
	default:
		c.errorf(x.At, "operator %s is not in the subset", x.Op)
		return nil
	}
	return t
}
