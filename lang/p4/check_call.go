package p4

// call checks a call; stmt says whether it is a statement (a call that
// returns nothing is not an expression).
func (c *checker) call(s *scope, ce *CallExpr, stmt bool) *Type {
	void := func() *Type {
		if !stmt {
			c.errorf(ce.Position(), "%s returns no value", ExprString(ce.Fun))
		}
		return nil
	}
	rest := func() *Type {
		for _, a := range ce.Args {
			if _, ok := a.(*ListExpr); !ok {
				c.expr(s, a)
			}
		}
		return nil
	}
	if len(ce.TypeArgs) > 0 {
		if n, ok := ce.Fun.(*Name); !ok || n.Name != "digest" && n.Name != "random" {
			c.errorf(ce.At, "%s takes no type arguments", ExprString(ce.Fun))
		}
	}
	switch f := ce.Fun.(type) {
	case *Name:
		sym := c.resolve(s, f.Name, f.At)
		if sym == nil {
			return rest()
		}
		c.ch.Syms[f] = sym
		switch sym.Kind {
		case SymFunc:
			c.externCall(s, ce, f)
			return void()
		case SymAction:
			if c.role != "ingress" && c.role != "egress" {
				c.errorf(f.At, "action %s called in the %s control", f.Name, orName(c.role, "unnamed"))
			}
			c.actionArgs(s, sym, ce.Args, ce.At)
			return void()
		}
		c.errorf(f.At, "%s is not a function or an action", f.Name)
		return rest()
	case *Member:
		xt := c.expr(s, f.X)
		if xt == nil {
			return rest()
		}
		switch {
		case xt.Kind == KHeader:
			switch f.Name {
			case "isValid":
				c.nargs(ce, 0)
				return boolT
			case "setValid", "setInvalid":
				c.onlyIn(f.NameAt, f.Name)
				c.nargs(ce, 0)
				c.writable(f.X)
				return void()
			}
			c.errorf(f.NameAt, "a header has methods isValid, setValid and setInvalid, not %s", f.Name)
			return rest()
		case xt == packetInT:
			if f.Name != "extract" {
				c.errorf(f.NameAt, "packet_in's %s is not in the subset: extract is", f.Name)
				return rest()
			}
			c.extract(s, ce)
			return void()
		case xt == packetOutT:
			if f.Name != "emit" {
				c.errorf(f.NameAt, "packet_out has emit, not %s", f.Name)
				return rest()
			}
			if c.nargs(ce, 1) {
				if t := c.expr(s, ce.Args[0]); t != nil && t.Kind != KHeader {
					c.errorf(ce.Args[0].Position(), "emit takes a header, not %s", t)
				}
			}
			return void()
		case xt.Kind == KExtern && xt.Name == "register":
			c.onlyIn(f.NameAt, "a register access")
			switch f.Name {
			case "read":
				if c.nargs(ce, 2) {
					if t := c.lvalue(s, ce.Args[0]); t != nil && xt.Elem != nil {
						c.coerce(ce.Args[0], t, xt.Elem, "the value read")
					}
					c.index(s, ce.Args[1], xt, f)
				}
			case "write":
				if c.nargs(ce, 2) {
					c.index(s, ce.Args[0], xt, f)
					if xt.Elem != nil {
						c.want(s, ce.Args[1], xt.Elem, "the value written")
					}
				}
			default:
				c.errorf(f.NameAt, "a register has read and write, not %s", f.Name)
				return rest()
			}
			return void()
		case xt.Kind == KExtern && xt.Name == "counter":
			c.onlyIn(f.NameAt, "a counter")
			if f.Name != "count" {
				c.errorf(f.NameAt, "a counter has count, not %s", f.Name)
				return rest()
			}
			if c.nargs(ce, 1) {
				c.index(s, ce.Args[0], xt, f)
			}
			return void()
		case xt.Kind == KTable:
			if f.Name != "apply" {
				c.errorf(f.NameAt, "a table has apply, not %s", f.Name)
				return rest()
			}
			c.nargs(ce, 0)
			if c.action != nil {
				c.errorf(f.NameAt, "action %s applies table %s: an action cannot apply a table", c.action.Name, xt.Name)
			}
			return void()
		}
		c.errorf(f.NameAt, "%s has no method %s", xt, f.Name)
		return rest()
	}
	c.errorf(ce.Position(), "%s cannot be called", ExprString(ce.Fun))
	return rest()
}

// nargs checks the number of arguments of a method or function without
// parameters' names in the message.
func (c *checker) nargs(ce *CallExpr, n int) bool {
	if len(ce.Args) != n {
		c.errorf(ce.At, "%s takes %d arguments, not %d", ExprString(ce.Fun), n, len(ce.Args))
		return false
	}
	return true
}

// writable reports whether x, a place, may be written, and says why not.
func (c *checker) writable(x Expr) bool {
	root := x
	for {
		switch r := root.(type) {
		case *Member:
			root = r.X
			continue
		case *SliceExpr:
			root = r.X
			continue
		}
		break
	}
	n, ok := root.(*Name)
	if !ok {
		c.errorf(x.Position(), "%s cannot be written", ExprString(x))
		return false
	}
	sym := c.ch.Syms[n]
	switch {
	case sym == nil:
		return false
	case sym.Kind == SymParam && !sym.Writable && c.action != nil && sym.Role == "":
		c.errorf(x.Position(), "%s is a parameter of action %s, which cannot be written (it has no direction)", sym.Name, c.action.Name)
		return false
	case sym.Kind == SymParam && !sym.Writable:
		c.errorf(x.Position(), "%s is an in parameter, which cannot be written", sym.Name)
		return false
	case sym.Kind != SymParam && sym.Kind != SymVar:
		c.errorf(x.Position(), "%s cannot be written", ExprString(x))
		return false
	}
	return true
}

// index checks a register's or counter's index: a bit<32> value, within
// the cells when it is a constant.
func (c *checker) index(s *scope, x Expr, ext *Type, f *Member) {
	c.want(s, x, bitT(32), "the index of "+ExprString(f.X))
	if v, ok := c.ch.Consts[x]; ok && ext.Size > 0 && v >= ext.Size {
		c.errorf(x.Position(), "index %d is out of bounds: %s %s has %d cells", v, ext.Name, ExprString(f.X), ext.Size)
	}
}

func (c *checker) extract(s *scope, ce *CallExpr) {
	if c.role != "parser" && c.roles != nil && len(c.roles) > 0 {
		c.errorf(ce.At, "extract outside the parser")
	}
	if len(ce.Args) != 1 && len(ce.Args) != 2 {
		c.errorf(ce.At, "extract takes a header (and the length in bits of its varbit field), not %d arguments", len(ce.Args))
		return
	}
	ht := c.expr(s, ce.Args[0])
	if ht == nil {
		return
	}
	if ht.Kind != KHeader {
		c.errorf(ce.Args[0].Position(), "extract takes a header, not %s", ht)
		return
	}
	c.writable(ce.Args[0])
	var vb *Type
	for _, f := range ht.Fields {
		if f.Type.Kind == KVarbit {
			vb = f.Type
		}
	}
	switch {
	case vb == nil && len(ce.Args) == 2:
		c.errorf(ce.Args[1].Position(), "header %s has no varbit field: extract it without a length", ht.Name)
	case vb != nil && len(ce.Args) == 1:
		c.errorf(ce.At, "header %s has a varbit field: extract(hdr, length in bits)", ht.Name)
	case vb != nil:
		c.want(s, ce.Args[1], bitT(32), "a varbit length")
		if v, ok := c.ch.Consts[ce.Args[1]]; ok && v > uint64(vb.Width) {
			c.errorf(ce.Args[1].Position(), "a varbit length of %d bits for %s", v, vb)
		}
	}
}

// listOf checks a list argument ("{a, b}") of bit<W> (or varbit) values.
func (c *checker) listOf(s *scope, x Expr, what string) {
	l, ok := x.(*ListExpr)
	if !ok {
		c.errorf(x.Position(), "%s is a list {...}", what)
		c.expr(s, x)
		return
	}
	t := c.expr(s, l)
	for i, e := range l.Elems {
		if et := t.Elems[i]; et != nil && et.Kind != KBit && et.Kind != KVarbit {
			c.errorf(e.Position(), "%s holds bit<W> values, not %s", what, et)
		}
	}
}

// enumArg checks an argument that is a member of enum t and returns it.
func (c *checker) enumArg(s *scope, x Expr, t *Type, what string) string {
	c.want(s, x, t, what)
	if v, ok := c.ch.Consts[x]; ok && c.ch.Types[x] == t {
		return t.Members[v]
	}
	return ""
}

func (c *checker) externCall(s *scope, ce *CallExpr, f *Name) {
	allowed := map[string]string{"verify": "verify_checksum", "compute": "update_checksum"}
	if c.role == "verify" || c.role == "compute" || c.role == "deparser" {
		if allowed[c.role] != f.Name {
			c.onlyIn(f.At, f.Name)
		}
	} else if f.Name == "verify_checksum" || f.Name == "update_checksum" {
		c.errorf(f.At, "%s belongs in the %s control", f.Name, map[string]string{"verify_checksum": "verify checksum", "update_checksum": "compute checksum"}[f.Name])
	}
	switch f.Name {
	case "hash":
		if !c.nargs(ce, 5) {
			return
		}
		dt := c.lvalue(s, ce.Args[0])
		if dt != nil && dt.Kind != KBit {
			c.errorf(ce.Args[0].Position(), "hash writes a bit<W>, not %s", dt)
		}
		c.enumArg(s, ce.Args[1], hashAlgorithmT, "hash's algorithm")
		for i, what := range map[int]string{2: "hash's base", 4: "hash's max"} {
			if t := c.expr(s, ce.Args[i]); t != nil && t.Kind != KBit {
				c.errorf(ce.Args[i].Position(), "%s is bit<W>, not %s (give it a width)", what, t)
			}
		}
		c.listOf(s, ce.Args[3], "hash's data")
	case "random":
		if !c.nargs(ce, 3) {
			return
		}
		dt := c.lvalue(s, ce.Args[0])
		if len(ce.TypeArgs) == 1 {
			if tt := c.typeRef(ce.TypeArgs[0]); tt != nil && dt != nil && !same(tt, dt) {
				c.errorf(ce.Args[0].Position(), "random<%s> writes %s", tt, dt)
			}
		}
		if dt == nil {
			return
		}
		if dt.Kind != KBit {
			c.errorf(ce.Args[0].Position(), "random writes a bit<W>, not %s", dt)
			return
		}
		c.want(s, ce.Args[1], dt, "random's low end")
		c.want(s, ce.Args[2], dt, "random's high end")
		lo, ok1 := c.ch.Consts[ce.Args[1]]
		hi, ok2 := c.ch.Consts[ce.Args[2]]
		if ok1 && ok2 && lo > hi {
			c.errorf(ce.At, "random's range [%d, %d] is empty", lo, hi)
		}
	case "digest":
		if c.role != "ingress" {
			c.errorf(f.At, "digest in the %s control: v1model (bmv2) sends digests from ingress only", orName(c.role, "unnamed"))
		}
		if !c.nargs(ce, 2) {
			return
		}
		c.want(s, ce.Args[0], bitT(32), "digest's receiver")
		var st *Type
		if len(ce.TypeArgs) == 1 {
			st = c.typeRef(ce.TypeArgs[0])
			if st != nil && st.Kind != KStruct {
				c.errorf(ce.TypeArgs[0].At, "a digest's data is a struct, not %s", st)
				st = nil
			}
		}
		l, isList := ce.Args[1].(*ListExpr)
		switch {
		case isList && len(ce.TypeArgs) == 0:
			c.errorf(ce.At, "digest of a list needs its struct type: digest<T>(receiver, {...})")
			c.expr(s, l)
		case isList && st != nil:
			lt := c.expr(s, l)
			if len(l.Elems) != len(st.Fields) {
				c.errorf(l.At, "digest<%s> of %d values: %s has %d fields", st.Name, len(l.Elems), st.Name, len(st.Fields))
				return
			}
			for i, e := range l.Elems {
				if lt.Elems[i] != nil {
					c.coerce(e, lt.Elems[i], st.Fields[i].Type, "field "+st.Fields[i].Name+" of "+st.Name)
				}
			}
		case isList:
			c.expr(s, l)
		default:
			t := c.expr(s, ce.Args[1])
			if t != nil && t.Kind != KStruct {
				c.errorf(ce.Args[1].Position(), "a digest's data is a struct, not %s", t)
			} else if t != nil && st != nil && !same(t, st) {
				c.errorf(ce.Args[1].Position(), "digest<%s> of a %s", st.Name, t.Name)
			}
		}
	case "clone", "clone_preserving_field_list":
		n := 2
		if f.Name == "clone_preserving_field_list" {
			n = 3
		}
		if !c.nargs(ce, n) {
			return
		}
		kind := c.enumArg(s, ce.Args[0], cloneTypeT, "clone's type")
		c.want(s, ce.Args[1], bitT(32), "clone's session")
		if n == 3 {
			c.want(s, ce.Args[2], bitT(8), "the field list's index")
		}
		switch {
		case kind == "I2E" && c.role != "ingress":
			c.errorf(ce.Args[0].Position(), "clone(CloneType.I2E) in the %s control: an ingress-to-egress clone is made in ingress", orName(c.role, "unnamed"))
		case kind == "E2E" && c.role != "egress":
			c.errorf(ce.Args[0].Position(), "clone(CloneType.E2E) in the %s control: an egress-to-egress clone is made in egress", orName(c.role, "unnamed"))
		}
	case "mark_to_drop":
		if !c.nargs(ce, 1) {
			return
		}
		n, ok := ce.Args[0].(*Name)
		t := c.expr(s, ce.Args[0])
		if t == nil {
			return
		}
		if !ok || t != stdMetaT {
			c.errorf(ce.Args[0].Position(), "mark_to_drop takes the standard_metadata parameter")
			return
		}
		c.writable(n)
	case "update_checksum", "verify_checksum":
		if !c.nargs(ce, 4) {
			return
		}
		c.want(s, ce.Args[0], boolT, f.Name+"'s condition")
		c.listOf(s, ce.Args[1], f.Name+"'s data")
		ct := c.expr(s, ce.Args[2])
		if ct != nil && ct.Kind != KBit {
			c.errorf(ce.Args[2].Position(), "a checksum is bit<W>, not %s", ct)
		} else if ct != nil {
			c.writable(ce.Args[2])
		}
		c.enumArg(s, ce.Args[3], hashAlgorithmT, f.Name+"'s algorithm")
	}
}
