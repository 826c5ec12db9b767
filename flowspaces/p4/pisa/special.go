package pisa

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// Ingress is specialised per set of valid headers. When the parser is
// done, the headers it left valid are known, and with them much of what
// ingress computes: an invalid header's fields are 0, metadata starts at
// 0, so the IPv6 extension-header walk of an IPv4 packet, the VLAN
// offsets of an untagged one, the branches on isValid() and the tables
// whose keys are then constant fold away. specialize evaluates ingress
// partially for one such set (constants propagated through assignments,
// branches taken, actions inlined, tables looked up once among their
// installed entries) and drops what no later statement, egress or the
// deparser reads; the residual statements are compiled as the program
// is, into closures. A variant is made the first time a set is seen (at
// most maxVariants of them; beyond, packets run the program whole), and
// all are dropped when a table's entries or default action change.

// maxVariants bounds the specialised ingresses a model keeps.
const maxVariants = 512

// variant is ingress specialised for one set of valid headers.
type variant struct {
	key  []uint64 // the valid headers, a bit per header index
	ops  []op
	run  op    // seq(ops)
	zero []int // the slots to zero once the parser is done
}

// variants is an open-addressed table of the variants made, keyed by
// the valid headers' bits: a packet finds its own without a map. A slot
// holds the key's first word beside the variant, so that a probe
// compares it with no load of the variant (the whole key when the
// program has at most 64 headers).
type variants struct {
	slots []vslot // len a power of two, at least twice the variants
	n     int
}

type vslot struct {
	first uint64
	v     *variant
}

func hashKey(k []uint64) uint64 {
	var h uint64 = 14695981039346656037
	for _, w := range k {
		h = mix(h, w)
	}
	return h
}

func sameKey(a, b []uint64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// first is a key's first word (none for a program with no headers).
func first(k []uint64) uint64 {
	if len(k) == 0 {
		return 0
	}
	return k[0]
}

func (vs *variants) find(k []uint64) *variant {
	if vs.n == 0 {
		return nil
	}
	mask := uint64(len(vs.slots) - 1)
	for i := hashKey(k) & mask; ; i = (i + 1) & mask {
		sl := &vs.slots[i]
		if sl.v == nil || sl.first == first(k) && (len(k) <= 1 || sameKey(sl.v.key[1:], k[1:])) {
			return sl.v
		}
	}
}

// add adds v, doubling the slots when they would be more than half
// full: the table is as small as the variants made allow, so that a
// probe stays in the cache (a trace of tens of shapes: 2 KB, not the
// 16 KB that room for maxVariants takes).
func (vs *variants) add(v *variant) {
	if 2*(vs.n+1) > len(vs.slots) {
		old := vs.slots
		vs.slots = make([]vslot, max(16, 2*len(old)))
		vs.n = 0
		for _, sl := range old {
			if sl.v != nil {
				vs.put(sl.v)
			}
		}
	}
	vs.put(v)
}

func (vs *variants) put(v *variant) {
	mask := uint64(len(vs.slots) - 1)
	i := hashKey(v.key) & mask
	for vs.slots[i].v != nil {
		i = (i + 1) & mask
	}
	vs.slots[i] = vslot{first: first(v.key), v: v}
	vs.n++
}

func (vs *variants) reset() {
	clear(vs.slots)
	vs.n = 0
}

var errNewSlot = errors.New("a variant's code took a slot the packets do not have")

// newVariant makes the variant for p's valid headers, p's parser being
// done (ingressOf finds those made, and makes one when there is room).
func (m *Model) newVariant(p *pkt) *variant {
	v := &variant{key: append([]uint64(nil), p.vbits...)}
	res := m.residual(v.key)
	m.comp.share = true
	slots := m.nslots
	ops, err := m.comp.stmts(res, nil)
	m.comp.share = false
	if err == nil && m.nslots != slots {
		err = errNewSlot // the packets' slots were made without it (pkt.at)
	}
	if err != nil {
		// A residual the compiler refuses is this code's bug; the
		// program whole is still right.
		ops, res = m.ingress, nil
	}
	v.ops, v.run, v.zero = ops, seq(ops), m.zeroes(v.key, res)
	m.vars.add(v)
	return v
}

// zeroes returns the slots that ingress (res, or the program's when
// nil) and egress may read, for packets whose valid headers are those of
// key, and that the parser did not write: the used fields of the valid
// headers, and the standard metadata a packet arrives with.
func (m *Model) zeroes(key []uint64, res []p4gen.Stmt) []int {
	c := m.comp
	keep := map[int]bool{m.ones: true}
	for _, n := range []string{"ingress_port", "packet_length", "ingress_global_timestamp"} {
		keep[c.slots["standard_metadata."+n]] = true
	}
	for _, h := range m.headers {
		if key[h.index>>6]>>uint(h.index&63)&1 == 1 {
			for _, f := range h.used {
				keep[f.slot] = true
			}
		}
	}
	var zero []int
	if res == nil {
		for s := range m.nslots {
			if !keep[s] {
				zero = append(zero, s)
			}
		}
		return zero
	}
	read, written := map[string]bool{}, map[string]bool{}
	readFirst(res, written, read)
	// After ingress, egress reads what it reads and the packet's copies
	// leave by the egress port: zeroed unless every path through
	// ingress wrote it (egressOf writes the queue's metadata itself).
	after := maps.Clone(m.egressReads)
	after["standard_metadata.egress_spec"] = true
	for path := range after {
		if !written[path] {
			read[path] = true
		}
	}
	for path := range read {
		if s, ok := c.slots[path]; ok && !keep[s] {
			zero = append(zero, s)
		}
	}
	slices.Sort(zero)
	return zero
}

// residual is ingress evaluated partially for packets whose valid
// headers are those of key.
func (m *Model) residual(key []uint64) []p4gen.Stmt {
	sp := &specializer{m: m, c: m.comp}
	e := &penv{known: map[string]uint64{}}
	for _, h := range m.headers {
		valid := key[h.index>>6]>>(h.index&63)&1 == 1
		e.known["valid:"+h.name] = b2u(valid)
		if !valid {
			for _, f := range m.prog.Header(h.name).Type.Fields {
				if !f.Var {
					e.known["hdr."+h.name+"."+f.Name] = 0
				}
			}
		}
	}
	for path, v := range m.facts(key) {
		e.known[path] = v
	}
	for _, f := range m.prog.Metadata {
		e.known["meta."+f.Name] = 0
	}
	for _, f := range p4gen.StdMeta {
		switch f.Name {
		case "ingress_port", "packet_length", "ingress_global_timestamp":
		default:
			e.known["standard_metadata."+f.Name] = 0
		}
	}
	res := sp.stmts(m.prog.Ingress, e, nil)
	res = sp.cse(res, &avail{exprs: map[string]availExpr{}, copies: map[string]p4gen.Ref{}})
	res, _ = sp.dce(res, maps.Clone(m.liveOut))
	return res
}

// specializer evaluates statements partially.
type specializer struct {
	m      *Model
	c      *compiler
	splits int // the splits on a bit's value the statements being specialised are under
}

// penv is what is known where a statement runs: the values of slots (by
// path, "valid:h" for a header's validity) that are constant, and the
// arguments of the action being inlined (all constant).
type penv struct {
	known  map[string]uint64
	params map[string]uint64
}

func (e *penv) clone() *penv { return &penv{known: maps.Clone(e.known), params: e.params} }

func konst(v uint64, t p4gen.Type) p4gen.Const {
	return p4gen.Const{Value: v & t.Mask(), Bits: t.Bits}
}

func isConst(x p4gen.Expr) (uint64, bool) {
	k, ok := x.(p4gen.Const)
	return k.Value, ok
}

// fold simplifies x under e, to a constant when its value is known.
func (sp *specializer) fold(x p4gen.Expr, e *penv) p4gen.Expr {
	switch x := x.(type) {
	case p4gen.Ref:
		if v, ok := e.params[x.Path]; ok {
			return konst(v, x.Type())
		}
		if v, ok := e.known[x.Path]; ok {
			return konst(v, x.Type())
		}
		return x
	case p4gen.Valid:
		if v, ok := e.known["valid:"+x.Header]; ok {
			return konst(v, p4gen.Bool)
		}
		return x
	case p4gen.Unary:
		a := sp.fold(x.X, e)
		if v, ok := isConst(a); ok {
			if x.Op == p4gen.Not {
				return konst(v^1, x.Type())
			}
			return konst(^v, x.Type())
		}
		return p4gen.Unary{Op: x.Op, X: a}
	case p4gen.Cast:
		a := sp.fold(x.X, e)
		if v, ok := isConst(a); ok {
			return konst(v, x.Type())
		}
		return p4gen.Cast{Bits: x.Bits, X: a}
	case p4gen.Slice:
		a := sp.fold(x.X, e)
		if v, ok := isConst(a); ok {
			return konst(v>>uint(x.Lo), x.Type())
		}
		return p4gen.Slice{X: a, Hi: x.Hi, Lo: x.Lo}
	case p4gen.Mux:
		c := sp.fold(x.Cond, e)
		if v, ok := isConst(c); ok {
			if v != 0 {
				return sp.fold(x.Then, e)
			}
			return sp.fold(x.Else, e)
		}
		a, b := sp.fold(x.Then, e), sp.fold(x.Else, e)
		if va, ok := isConst(a); ok {
			if vb, ok := isConst(b); ok && va == vb {
				return a
			}
		}
		return p4gen.Mux{Cond: c, Then: a, Else: b}
	case p4gen.Binary:
		return sp.binary(x, e)
	}
	return x // Const, Old
}

func (sp *specializer) binary(x p4gen.Binary, e *penv) p4gen.Expr {
	l := sp.fold(x.L, e)
	lv, lk := isConst(l)
	switch {
	case x.Op == p4gen.LAnd && lk:
		if lv == 0 {
			return p4gen.False
		}
		return sp.fold(x.R, e)
	case x.Op == p4gen.LOr && lk:
		if lv == 1 {
			return p4gen.True
		}
		return sp.fold(x.R, e)
	}
	r := sp.fold(x.R, e)
	rv, rk := isConst(r)
	if lk && rk {
		return konst(evalBinary(x.Op, lv, rv, x.L.Type().Mask()), x.Type())
	}
	if rk {
		// Expressions are pure: x && false is false whatever x is.
		switch {
		case x.Op == p4gen.LAnd && rv == 1, x.Op == p4gen.LOr && rv == 0:
			return l
		case x.Op == p4gen.LAnd:
			return p4gen.False
		case x.Op == p4gen.LOr:
			return p4gen.True
		}
	}
	return p4gen.Binary{Op: x.Op, L: l, R: r}
}

// evalBinary is op on constants of a type of mask m, as p4gen.Switch
// computes it.
func evalBinary(op p4gen.BinOp, l, r, m uint64) uint64 {
	switch op {
	case p4gen.Add:
		return (l + r) & m
	case p4gen.Sub:
		return (l - r) & m
	case p4gen.SatAdd:
		if s := l + r; s < l || s > m {
			return m
		} else {
			return s
		}
	case p4gen.And:
		return l & r
	case p4gen.Or:
		return l | r
	case p4gen.Xor:
		return l ^ r
	case p4gen.Shl:
		if r >= 64 {
			return 0
		}
		return l << r & m
	case p4gen.Shr:
		if r >= 64 {
			return 0
		}
		return l >> r
	case p4gen.Eq:
		return b2u(l == r)
	case p4gen.Ne:
		return b2u(l != r)
	case p4gen.Lt:
		return b2u(l < r)
	case p4gen.Le:
		return b2u(l <= r)
	case p4gen.Gt:
		return b2u(l > r)
	case p4gen.Ge:
		return b2u(l >= r)
	case p4gen.LAnd, p4gen.LOr:
		return r // l was not deciding
	}
	panic("pisa: unknown operator " + op.String())
}

// set records an assignment of x to dst in e.
func (e *penv) set(dst string, x p4gen.Expr) {
	if v, ok := isConst(x); ok {
		e.known[dst] = v
	} else {
		delete(e.known, dst)
	}
}

// maxSplits bounds the times one variant's statements are split on a
// bit's value (each split doubles the statements after it); splitReads
// is how often the statements after an assignment of a bit must read it
// for them to be split on it.
const (
	maxSplits  = 2
	splitReads = 3
)

// stmts appends to out the residual of ss run under e, which it updates.
// After an assignment of an unknown bit that the statements after it
// read often (is the packet IPv4?), they are specialised twice, once for
// each value, behind a test of it: what reads the bit then folds.
func (sp *specializer) stmts(ss []p4gen.Stmt, e *penv, out []p4gen.Stmt) []p4gen.Stmt {
	for i, s := range ss {
		out = sp.stmt(s, e, out)
		a, ok := s.(p4gen.Assign)
		if !ok || a.Dst.Bits > 1 || sp.splits >= maxSplits || e.params != nil {
			continue
		}
		if _, known := e.known[a.Dst.Path]; known || countReads(ss[i+1:], a.Dst.Path) < sp.m.splitReads {
			continue
		}
		sp.splits++
		e1, e0 := e.clone(), e.clone()
		e1.known[a.Dst.Path], e0.known[a.Dst.Path] = 1, 0
		th, el := sp.stmts(ss[i+1:], e1, nil), sp.stmts(ss[i+1:], e0, nil)
		sp.splits--
		e.merge(e1, e0)
		return append(out, p4gen.If{Cond: p4gen.B(p4gen.Eq, a.Dst, konst(1, a.Dst.Type())), Then: th, Else: el})
	}
	return out
}

// merge makes e know what both a and b know alike, in place: an inlined
// action's penv shares its caller's map.
func (e *penv) merge(a, b *penv) {
	clear(e.known)
	for k, v := range a.known {
		if vb, ok := b.known[k]; ok && vb == v {
			e.known[k] = v
		}
	}
}

// countReads counts the expressions of ss (not followed into actions)
// that read path.
func countReads(ss []p4gen.Stmt, path string) int {
	n := 0
	var expr func(x p4gen.Expr)
	expr = func(x p4gen.Expr) {
		switch x := x.(type) {
		case p4gen.Ref:
			if x.Path == path {
				n++
			}
		case p4gen.Unary:
			expr(x.X)
		case p4gen.Binary:
			expr(x.L)
			expr(x.R)
		case p4gen.Cast:
			expr(x.X)
		case p4gen.Slice:
			expr(x.X)
		case p4gen.Mux:
			expr(x.Cond)
			expr(x.Then)
			expr(x.Else)
		}
	}
	var stmts func(ss []p4gen.Stmt)
	stmts = func(ss []p4gen.Stmt) {
		for _, s := range ss {
			switch s := s.(type) {
			case p4gen.Assign:
				expr(s.X)
			case p4gen.If:
				expr(s.Cond)
				stmts(s.Then)
				stmts(s.Else)
			case p4gen.Call:
				for _, x := range s.Args {
					expr(x)
				}
			case p4gen.Hash:
				for _, x := range s.Data {
					expr(x)
				}
			case p4gen.RMW:
				expr(s.Index)
				expr(s.New)
				if s.Cond != nil {
					expr(s.Cond)
				}
			case p4gen.Count:
				expr(s.Index)
			case p4gen.Digest:
				for _, x := range s.Values {
					expr(x)
				}
			case p4gen.Apply:
				for _, k := range s.Table.Keys {
					expr(k.X)
				}
			}
		}
	}
	stmts(ss)
	return n
}

func (sp *specializer) stmt(s p4gen.Stmt, e *penv, out []p4gen.Stmt) []p4gen.Stmt {
	switch s := s.(type) {
	case p4gen.Assign:
		x := sp.fold(s.X, e)
		e.set(s.Dst.Path, x)
		return append(out, p4gen.Assign{Dst: s.Dst, X: x})
	case p4gen.If:
		c := sp.fold(s.Cond, e)
		if v, ok := isConst(c); ok {
			if v != 0 {
				return sp.stmts(s.Then, e, out)
			}
			return sp.stmts(s.Else, e, out)
		}
		et, ee := e.clone(), e.clone()
		th, el := sp.stmts(s.Then, et, nil), sp.stmts(s.Else, ee, nil)
		e.merge(et, ee)
		return append(out, p4gen.If{Cond: c, Then: th, Else: el})
	case p4gen.Apply:
		return sp.apply(s, e, out)
	case p4gen.Call:
		args := make([]p4gen.Expr, len(s.Args))
		vals := make([]uint64, len(s.Args))
		all := true
		for i, x := range s.Args {
			args[i] = sp.fold(x, e)
			var ok bool
			vals[i], ok = isConst(args[i])
			all = all && ok
		}
		if all && !writesParams(s.Action) {
			return sp.inline(s.Action, vals, e, out)
		}
		sp.forget(e, sp.writes(s.Action, nil))
		return append(out, p4gen.Call{Action: s.Action, Args: args})
	case p4gen.Hash:
		data := make([]p4gen.Expr, len(s.Data))
		vals := make([]uint64, len(s.Data))
		widths := make([]int, len(s.Data))
		all := true
		for i, x := range s.Data {
			data[i] = sp.fold(x, e)
			widths[i] = x.Type().Bits
			var ok bool
			vals[i], ok = isConst(data[i])
			all = all && ok
		}
		if all {
			if h, err := p4gen.HashValue(s.Algo, vals, widths); err == nil {
				if s.Max > 0 {
					h %= s.Max
				}
				x := konst(s.Base+h, s.Dst.Type())
				e.set(s.Dst.Path, x)
				return append(out, p4gen.Assign{Dst: s.Dst, X: x})
			}
		}
		delete(e.known, s.Dst.Path)
		return append(out, p4gen.Hash{Dst: s.Dst, Algo: s.Algo, Base: s.Base, Data: data, Max: s.Max})
	case p4gen.Random:
		delete(e.known, s.Dst.Path)
		return append(out, s)
	case p4gen.RMW:
		r := s
		r.Index = sp.fold(s.Index, e)
		r.New = sp.fold(s.New, e)
		if s.Cond != nil {
			r.Cond = sp.fold(s.Cond, e)
		}
		if s.OldTo != nil {
			delete(e.known, s.OldTo.Path)
		}
		if s.NewTo != nil {
			delete(e.known, s.NewTo.Path)
		}
		return append(out, r)
	case p4gen.Count:
		return append(out, p4gen.Count{Counter: s.Counter, Index: sp.fold(s.Index, e)})
	case p4gen.Digest:
		vals := make([]p4gen.Expr, len(s.Values))
		for i, x := range s.Values {
			vals[i] = sp.fold(x, e)
		}
		return append(out, p4gen.Digest{Type: s.Type, Values: vals})
	case p4gen.SetValid:
		e.known["valid:"+s.Header] = b2u(s.Valid)
		if s.Valid {
			for _, f := range sp.m.prog.Header(s.Header).Type.Fields {
				if !f.Var {
					e.known["hdr."+s.Header+"."+f.Name] = 0
				}
			}
		}
		return append(out, s)
	case p4gen.MarkToDrop:
		e.known["standard_metadata.egress_spec"] = p4gen.DropPort
		return append(out, s)
	}
	return append(out, s) // Clone
}

// inline appends the residual of action a's body run with constant
// arguments args.
func (sp *specializer) inline(a *p4gen.Action, args []uint64, e *penv, out []p4gen.Stmt) []p4gen.Stmt {
	params := make(map[string]uint64, len(a.Params))
	for i, f := range a.Params {
		params[f.Name] = args[i] & p4gen.Bit(f.Bits).Mask()
	}
	in := &penv{known: e.known, params: params}
	return sp.stmts(a.Body, in, out)
}

// maxUnknownKeyBits bounds the key bits of a table, not known at
// specialisation, whose values are all tried to see whether the table
// does one thing whatever they are.
const maxUnknownKeyBits = 10

// apply folds a table's application when what it does is known: when
// every value its unknown keys may take (all tried, when they are few
// bits) leads to entries whose actions leave one residual, that residual
// is the table's.
func (sp *specializer) apply(s p4gen.Apply, e *penv, out []p4gen.Stmt) []p4gen.Stmt {
	tb := sp.c.tables[s.Table]
	vals := make([]uint64, len(tb.keys))
	var unknown []int
	bits := 0
	for i, k := range s.Table.Keys {
		x := sp.fold(k.X, e)
		if v, ok := isConst(x); ok {
			vals[i] = v
			continue
		}
		unknown = append(unknown, i)
		bits += max(1, k.X.Type().Bits)
	}
	residual := func() []p4gen.Stmt {
		sp.forget(e, sp.writes(nil, s.Table))
		return append(out, s)
	}
	if bits > maxUnknownKeyBits {
		return residual()
	}
	type outcome struct {
		a    *action
		args []uint64
	}
	var outs []outcome
	for combo := uint64(0); combo < 1<<uint(bits); combo++ {
		at := 0
		for _, i := range unknown {
			w := max(1, s.Table.Keys[i].X.Type().Bits)
			vals[i] = combo >> uint(at) & p4gen.Bit(w).Mask()
			at += w
		}
		a, args := tb.find(vals)
		seen := false
		for _, o := range outs {
			if o.a == a && slicesEqual(o.args, args) {
				seen = true
				break
			}
		}
		if !seen {
			outs = append(outs, outcome{a, args})
		}
	}
	for _, o := range outs {
		if writesParams(o.a.a) {
			return residual()
		}
	}
	var first []p4gen.Stmt
	var firstEnv *penv
	for i, o := range outs {
		ei := e.clone()
		r := sp.inline(o.a.a, o.args, ei, nil)
		if i == 0 {
			first, firstEnv = r, ei
		} else if !reflect.DeepEqual(r, first) || !maps.Equal(ei.known, firstEnv.known) {
			return residual()
		}
	}
	clear(e.known)
	maps.Copy(e.known, firstEnv.known)
	return append(out, first...)
}

func slicesEqual(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	return sameKey(a, b)
}

// forget drops what e knows of the places in ws.
func (sp *specializer) forget(e *penv, ws map[string]bool) {
	for k := range ws {
		delete(e.known, k)
	}
}

// writesParams reports whether a's body assigns one of its parameters.
func writesParams(a *p4gen.Action) bool {
	params := map[string]bool{}
	for _, f := range a.Params {
		params[f.Name] = true
	}
	var in func(ss []p4gen.Stmt) bool
	in = func(ss []p4gen.Stmt) bool {
		for _, s := range ss {
			switch s := s.(type) {
			case p4gen.Assign:
				if params[s.Dst.Path] {
					return true
				}
			case p4gen.Hash:
				if params[s.Dst.Path] {
					return true
				}
			case p4gen.Random:
				if params[s.Dst.Path] {
					return true
				}
			case p4gen.RMW:
				if s.OldTo != nil && params[s.OldTo.Path] || s.NewTo != nil && params[s.NewTo.Path] {
					return true
				}
			case p4gen.If:
				if in(s.Then) || in(s.Else) {
					return true
				}
			}
		}
		return false
	}
	return in(a.Body)
}

// writes returns the places (paths, "valid:h") that action a or table t
// (its actions) may write, calls followed.
func (sp *specializer) writes(a *p4gen.Action, t *p4gen.Table) map[string]bool {
	ws := map[string]bool{}
	seen := map[*p4gen.Action]bool{}
	var stmts func(ss []p4gen.Stmt)
	var action func(a *p4gen.Action)
	action = func(a *p4gen.Action) {
		if a == nil || seen[a] {
			return
		}
		seen[a] = true
		stmts(a.Body)
	}
	table := func(t *p4gen.Table) {
		for _, a := range t.Actions {
			action(a)
		}
		action(t.Default)
	}
	stmts = func(ss []p4gen.Stmt) {
		for _, s := range ss {
			switch s := s.(type) {
			case p4gen.Assign:
				ws[s.Dst.Path] = true
			case p4gen.Hash:
				ws[s.Dst.Path] = true
			case p4gen.Random:
				ws[s.Dst.Path] = true
			case p4gen.RMW:
				if s.OldTo != nil {
					ws[s.OldTo.Path] = true
				}
				if s.NewTo != nil {
					ws[s.NewTo.Path] = true
				}
			case p4gen.If:
				stmts(s.Then)
				stmts(s.Else)
			case p4gen.Call:
				action(s.Action)
			case p4gen.Apply:
				table(s.Table)
			case p4gen.SetValid:
				ws["valid:"+s.Header] = true
				for _, f := range sp.m.prog.Header(s.Header).Type.Fields {
					ws["hdr."+s.Header+"."+f.Name] = true
				}
			case p4gen.MarkToDrop:
				ws["standard_metadata.egress_spec"] = true
			}
		}
	}
	action(a)
	if t != nil {
		table(t)
	}
	return ws
}

// reads adds to live the metadata an expression reads.
func reads(x p4gen.Expr, live map[string]bool) {
	switch x := x.(type) {
	case p4gen.Ref:
		live[x.Path] = true
	case p4gen.Unary:
		reads(x.X, live)
	case p4gen.Binary:
		reads(x.L, live)
		reads(x.R, live)
	case p4gen.Cast:
		reads(x.X, live)
	case p4gen.Slice:
		reads(x.X, live)
	case p4gen.Mux:
		reads(x.Cond, live)
		reads(x.Then, live)
		reads(x.Else, live)
	}
}

// readsAll adds to live what statements read, calls and tables followed.
func readsAll(ss []p4gen.Stmt, live map[string]bool, seen map[*p4gen.Action]bool) {
	action := func(a *p4gen.Action) {
		if a != nil && !seen[a] {
			seen[a] = true
			readsAll(a.Body, live, seen)
		}
	}
	for _, s := range ss {
		switch s := s.(type) {
		case p4gen.Assign:
			reads(s.X, live)
		case p4gen.If:
			reads(s.Cond, live)
			readsAll(s.Then, live, seen)
			readsAll(s.Else, live, seen)
		case p4gen.Apply:
			for _, k := range s.Table.Keys {
				reads(k.X, live)
			}
			for _, a := range s.Table.Actions {
				action(a)
			}
			action(s.Table.Default)
		case p4gen.Call:
			for _, x := range s.Args {
				reads(x, live)
			}
			action(s.Action)
		case p4gen.Hash:
			for _, x := range s.Data {
				reads(x, live)
			}
		case p4gen.RMW:
			reads(s.Index, live)
			reads(s.New, live)
			if s.Cond != nil {
				reads(s.Cond, live)
			}
		case p4gen.Count:
			reads(s.Index, live)
			live["standard_metadata.packet_length"] = true
		case p4gen.Digest:
			for _, x := range s.Values {
				reads(x, live)
			}
		}
	}
}

// readFirst adds to read what statements ss may read before they have
// written it, written being what is written before them (updated): a
// field that ingress always assigns before it reads it need not be
// zeroed for it. Tables and calls count as reading all their actions
// read, and as writing nothing.
func readFirst(ss []p4gen.Stmt, written, read map[string]bool) {
	expr := func(x p4gen.Expr) {
		r := map[string]bool{}
		reads(x, r)
		for k := range r {
			if !written[k] {
				read[k] = true
			}
		}
	}
	for _, s := range ss {
		switch s := s.(type) {
		case p4gen.Assign:
			expr(s.X)
			written[s.Dst.Path] = true
		case p4gen.Hash:
			for _, x := range s.Data {
				expr(x)
			}
			written[s.Dst.Path] = true
		case p4gen.Random:
			written[s.Dst.Path] = true
		case p4gen.RMW:
			expr(s.Index)
			expr(s.New)
			if s.Cond != nil {
				expr(s.Cond)
			}
			if s.OldTo != nil {
				written[s.OldTo.Path] = true
			}
			if s.NewTo != nil {
				written[s.NewTo.Path] = true
			}
		case p4gen.If:
			expr(s.Cond)
			wt, we := maps.Clone(written), maps.Clone(written)
			readFirst(s.Then, wt, read)
			readFirst(s.Else, we, read)
			for k := range wt {
				if we[k] {
					written[k] = true
				}
			}
		default:
			r := map[string]bool{}
			readsAll([]p4gen.Stmt{s}, r, map[*p4gen.Action]bool{})
			for k := range r {
				if !written[k] {
					read[k] = true
				}
			}
		}
	}
}

// isMeta reports whether path is user metadata: the only places whose
// writes dce may drop (header fields go out with the packet, standard
// metadata decides where it goes).
func isMeta(path string) bool { return strings.HasPrefix(path, "meta.") }

// dce drops the assignments (and hashes) to metadata that nothing after
// them reads, live being what is read after ss; it returns the
// statements kept and what is read before them.
func (sp *specializer) dce(ss []p4gen.Stmt, live map[string]bool) ([]p4gen.Stmt, map[string]bool) {
	kept := make([]p4gen.Stmt, 0, len(ss))
	for i := len(ss) - 1; i >= 0; i-- {
		switch s := ss[i].(type) {
		case p4gen.Assign:
			if isMeta(s.Dst.Path) && !live[s.Dst.Path] {
				continue
			}
			delete(live, s.Dst.Path)
			reads(s.X, live)
		case p4gen.Hash:
			if isMeta(s.Dst.Path) && !live[s.Dst.Path] {
				continue
			}
			delete(live, s.Dst.Path)
			readsAll([]p4gen.Stmt{s}, live, nil)
		case p4gen.RMW:
			// The register is written whatever the packet's metadata
			// needs; the old or new value's copy into metadata that
			// nothing reads after is dropped (a count-min row's cell).
			for _, to := range []**p4gen.Ref{&s.OldTo, &s.NewTo} {
				if *to != nil && isMeta((*to).Path) && !live[(*to).Path] {
					*to = nil
				}
			}
			if s.OldTo != nil {
				delete(live, s.OldTo.Path)
			}
			if s.NewTo != nil {
				delete(live, s.NewTo.Path)
			}
			readsAll([]p4gen.Stmt{s}, live, nil)
			kept = append(kept, s)
			continue
		case p4gen.If:
			th, lt := sp.dce(s.Then, maps.Clone(live))
			el, le := sp.dce(s.Else, live)
			if len(th) == 0 && len(el) == 0 {
				continue
			}
			maps.Copy(le, lt)
			live = le
			reads(s.Cond, live)
			s = p4gen.If{Cond: s.Cond, Then: th, Else: el}
			kept = append(kept, s)
			continue
		default:
			readsAll([]p4gen.Stmt{s}, live, map[*p4gen.Action]bool{})
		}
		kept = append(kept, ss[i])
	}
	for i, j := 0, len(kept)-1; i < j; i, j = i+1, j-1 {
		kept[i], kept[j] = kept[j], kept[i]
	}
	return kept, live
}

// liveOut is the metadata read after ingress: by egress.
func liveOut(prog *p4gen.Program) map[string]bool {
	live := map[string]bool{}
	readsAll(prog.Egress, live, map[*p4gen.Action]bool{})
	for k := range live {
		if !isMeta(k) {
			delete(live, k)
		}
	}
	return live
}
