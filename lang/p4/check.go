package p4

import (
	"math/bits"
	"sort"
	"strings"

	"github.com/ffpf-go/ffpf/lang"
)

// Checked is a program that Check accepted, with what the checker learned
// of it: every expression's type, the value of every constant expression,
// what every name refers to, and the six blocks of V1Switch.
type Checked struct {
	Prog   *Program
	File   string
	Src    string
	Types  map[Expr]*Type
	Consts map[Expr]uint64
	Syms   map[*Name]*Symbol

	Parser                                    *ParserDecl
	Verify, Ingress, Egress, Compute, Deparse *ControlDecl
	Headers, Meta                             *Type // V1Switch's H and M

	// Objects are the registers, counters, tables and actions declared in
	// the controls, by their control-plane name ("ffpf_ingress.t").
	Objects map[string]*Symbol
	// Defs maps each declaration (a parameter, variable, instance,
	// action, table) to its symbol.
	Defs map[Node]*Symbol
}

// SymKind is what a name refers to.
type SymKind uint8

const (
	SymType     SymKind = iota + 1
	SymVar              // a local variable
	SymParam            // a parameter of a block or action
	SymInstance         // a register, counter, or the package
	SymAction
	SymTable
	SymBlock // a parser or control
	SymEnum
	SymFunc      // an extern function of v1model
	SymMatchKind // exact, ternary, ...
	SymState     // a parser state
)

// Symbol is a declared name.
type Symbol struct {
	Name     string
	Kind     SymKind
	Type     *Type
	Decl     Node
	At       Pos
	Writable bool
	// Role is what a block's parameter holds: "hdr", "meta", "std",
	// "packet" ("" for another).
	Role string
	// Control is the control an instance, action or table is declared
	// in; Qualified its control-plane name.
	Control   *ControlDecl
	Qualified string
}

type scope struct {
	parent *scope
	syms   map[string]*Symbol
}

func (s *scope) lookup(n string) *Symbol {
	for ; s != nil; s = s.parent {
		if sym := s.syms[n]; sym != nil {
			return sym
		}
	}
	return nil
}

// maxErrors bounds the errors Check reports for one file.
const maxErrors = 25

// Check checks a parsed program against the subset's rules and v1model's
// declarations. src is the source it was parsed from (for carets), file
// its name. It returns the checked program, or an ErrorList.
func Check(file, src string, prog *Program) (*Checked, error) {
	c := &checker{ch: &Checked{Prog: prog, File: file, Src: src, Types: map[Expr]*Type{}, Consts: map[Expr]uint64{},
		Syms: map[*Name]*Symbol{}, Objects: map[string]*Symbol{}, Defs: map[Node]*Symbol{}}, later: map[string]Pos{}}
	c.global = &scope{syms: map[string]*Symbol{}}
	c.builtins()
	c.program()
	if len(c.errs) > 0 {
		sort.SliceStable(c.errs, func(i, j int) bool { return c.errs[i].Pos.Offset < c.errs[j].Pos.Offset })
		return nil, c.errs
	}
	return c.ch, nil
}

type checker struct {
	ch     *Checked
	global *scope
	errs   ErrorList
	// later holds every name declared anywhere, for "used before its
	// declaration".
	later map[string]Pos
	roles map[string]string // block name → role in V1Switch
	// what is being checked
	role    string // "parser", "verify", "ingress", "egress", "compute", "deparser"
	control *ControlDecl
	action  *ActionDecl
}

func (c *checker) errorf(at Pos, format string, args ...any) {
	if len(c.errs) >= maxErrors {
		return
	}
	c.errs = append(c.errs, &Error{File: c.ch.File, Pos: at, Msg: sprintf(format, args...), Src: c.ch.Src})
}

func (c *checker) builtins() {
	add := func(s *Symbol) { c.global.syms[s.Name] = s }
	for _, t := range []*Type{stdMetaT, packetInT, packetOutT} {
		add(&Symbol{Name: t.Name, Kind: SymType, Type: t})
	}
	for _, t := range []*Type{errorT, counterTypeT, hashAlgorithmT, cloneTypeT} {
		add(&Symbol{Name: t.Name, Kind: SymEnum, Type: t})
	}
	for _, n := range []string{"register", "counter"} {
		add(&Symbol{Name: n, Kind: SymType, Type: &Type{Kind: KExtern, Name: n}})
	}
	add(&Symbol{Name: "V1Switch", Kind: SymType, Type: &Type{Kind: KExtern, Name: "V1Switch"}})
	for _, n := range matchKinds {
		add(&Symbol{Name: n, Kind: SymMatchKind, Type: &Type{Kind: KMatchKind, Name: n}})
	}
	for _, n := range externFuncs {
		add(&Symbol{Name: n, Kind: SymFunc})
	}
}

func (c *checker) declare(s *scope, sym *Symbol) {
	if sym.Decl != nil {
		c.ch.Defs[sym.Decl] = sym
	}
	if old := s.syms[sym.Name]; old != nil {
		if old.At.Line > 0 {
			c.errorf(sym.At, "%s is already declared at %s", sym.Name, old.At)
		} else {
			c.errorf(sym.At, "%s is already declared by v1model", sym.Name)
		}
		return
	}
	if s == c.global || s.parent == c.global {
		if old := c.global.syms[sym.Name]; s != c.global && old != nil && old.At.Line == 0 {
			c.errorf(sym.At, "%s is already declared by v1model", sym.Name)
			return
		}
	}
	s.syms[sym.Name] = sym
}

// resolve looks a name up, reporting an undeclared one.
func (c *checker) resolve(s *scope, n string, at Pos) *Symbol {
	if sym := s.lookup(n); sym != nil {
		return sym
	}
	if p, ok := c.later[n]; ok && (p.Line > at.Line || p.Line == at.Line && p.Col > at.Col) {
		c.errorf(at, "%s is used before its declaration at %s", n, p)
		return nil
	}
	var names []string
	for sc := s; sc != nil; sc = sc.parent {
		for k := range sc.syms {
			names = append(names, k)
		}
	}
	c.undeclared(at, "name", n, names)
	return nil
}

// undeclared reports an undeclared name of a kind, with the closest of
// names when one is close.
func (c *checker) undeclared(at Pos, kind, n string, names []string) {
	sort.Strings(names)
	if sug, ok := lang.Suggest(n, names); ok {
		c.errorf(at, "undeclared %s %s (did you mean %s?)", kind, n, sug)
	} else {
		c.errorf(at, "undeclared %s %s", kind, n)
	}
}

func (c *checker) program() {
	prog := c.ch.Prog
	hasV1 := false
	for _, in := range prog.Includes {
		switch {
		case in.System && in.Path == "v1model.p4":
			hasV1 = true
		case in.System && in.Path == "core.p4":
		default:
			c.errorf(in.At, "only <core.p4> and <v1model.p4> can be included (their declarations are built in)")
		}
	}
	if !hasV1 {
		c.errorf(Pos{Line: 1, Col: 1}, "the program does not include <v1model.p4>: the checker knows v1model's externs only")
	}
	c.collectLater()
	c.roles = map[string]string{}
	for _, d := range prog.Decls {
		if in, ok := d.(*Instance); ok && in.Name == "main" {
			names := []string{"parser", "verify", "ingress", "egress", "compute", "deparser"}
			for i, a := range in.Args {
				if ce, ok := a.(*CallExpr); ok && i < len(names) {
					if n, ok := ce.Fun.(*Name); ok {
						c.roles[n.Name] = names[i]
					}
				}
			}
		}
	}
	var main *Instance
	for _, d := range prog.Decls {
		switch d := d.(type) {
		case *HeaderDecl:
			c.typeDecl(d.At, d.Name, d, d.Fields, KHeader)
		case *StructDecl:
			c.typeDecl(d.At, d.Name, d, d.Fields, KStruct)
		case *ParserDecl:
			c.parserDecl(d)
		case *ControlDecl:
			c.controlDecl(d)
		case *Instance:
			if d.Name != "main" || d.Type.Name != "V1Switch" {
				c.errorf(d.At, "the only top-level instance is V1Switch(...) main")
				continue
			}
			if main != nil {
				c.errorf(d.At, "main is already declared at %s", main.At)
				continue
			}
			main = d
			c.v1switch(d)
		}
	}
	if main == nil && len(c.errs) == 0 {
		end := posAtEnd(c.ch.Src)
		c.errorf(end, "the program has no V1Switch(...) main")
	}
}

func posAtEnd(src string) Pos { return lang.PosAt(src, len(src)) }

// collectLater records every declared name and where, so that a use
// before the declaration is told apart from an undeclared name.
func (c *checker) collectLater() {
	set := func(n string, at Pos) {
		if _, ok := c.later[n]; !ok {
			c.later[n] = at
		}
	}
	for _, d := range c.ch.Prog.Decls {
		set(d.DeclName(), d.Position())
		if ctl, ok := d.(*ControlDecl); ok {
			for _, l := range ctl.Locals {
				set(l.DeclName(), l.Position())
			}
		}
	}
}

func (c *checker) typeDecl(at Pos, name string, d Node, fields []*FieldDecl, kind Kind) {
	t := &Type{Kind: kind, Name: name, Decl: d}
	seen := map[string]Pos{}
	varbits := 0
	for _, f := range fields {
		if p, ok := seen[f.Name]; ok {
			c.errorf(f.At, "field %s is already declared at %s", f.Name, p)
			continue
		}
		seen[f.Name] = f.At
		ft := c.typeRef(f.Type)
		if ft == nil {
			continue
		}
		switch {
		case ft.Kind == KVarbit && kind != KHeader:
			c.errorf(f.At, "a varbit field belongs in a header, not in struct %s", name)
		case ft.Kind == KVarbit:
			varbits++
			if varbits > 1 {
				c.errorf(f.At, "header %s has a second varbit field", name)
			}
		case kind == KHeader && ft.Kind != KBit && ft.Kind != KBool:
			c.errorf(f.At, "a header's field is bit<W>, bool or varbit<W>, not %s", ft)
		case kind == KStruct && ft.Kind != KBit && ft.Kind != KBool && ft.Kind != KHeader && ft.Kind != KStruct:
			c.errorf(f.At, "a struct's field cannot be of type %s", ft)
		}
		t.Fields = append(t.Fields, &Field{Name: f.Name, Type: ft})
	}
	c.declare(c.global, &Symbol{Name: name, Kind: SymType, Type: t, Decl: d, At: at})
}

// typeRef resolves a type reference of a field, parameter or variable.
func (c *checker) typeRef(r *TypeRef) *Type {
	switch r.Name {
	case "bit":
		if r.Width > 64 {
			c.errorf(r.At, "bit<%d>: the subset's values have at most 64 bits", r.Width)
			return nil
		}
		return bitT(r.Width)
	case "varbit":
		return &Type{Kind: KVarbit, Width: r.Width}
	case "bool":
		return boolT
	case "int":
		c.errorf(r.At, "int is the type of unsized constants; give a width: bit<W>")
		return nil
	case "error":
		return errorT
	}
	sym := c.resolve(c.global, r.Name, r.At)
	if sym == nil {
		return nil
	}
	if sym.Kind != SymType || sym.Type.Kind == KExtern && sym.Type.Name != "packet_in" && sym.Type.Name != "packet_out" {
		c.errorf(r.At, "%s is not a type that a field, parameter or variable can have", r.Name)
		return nil
	}
	if len(r.Args) > 0 {
		c.errorf(r.At, "%s takes no type arguments", r.Name)
	}
	return sym.Type
}

// params declares a block's or action's parameters in s.
func (c *checker) params(s *scope, ps []*Param, action bool) []*Type {
	var ts []*Type
	for _, p := range ps {
		t := c.typeRef(p.Type)
		ts = append(ts, t)
		if action && p.Dir != "" {
			c.errorf(p.At, "the subset's action parameters have no direction (the control plane gives them)")
		}
		if action && t != nil && t.Kind != KBit && t.Kind != KBool {
			c.errorf(p.At, "an action parameter is bit<W> or bool, not %s", t)
		}
		sym := &Symbol{Name: p.Name, Kind: SymParam, Type: t, Decl: p, At: p.At, Writable: p.Dir == "out" || p.Dir == "inout"}
		if !action {
			// What a block's parameter holds, by its place in v1model's
			// signatures.
			roles := []string{"hdr", "meta", "std"}
			switch c.role {
			case "parser":
				roles = []string{"packet", "hdr", "meta", "std"}
			case "deparser":
				roles = []string{"packet", "hdr"}
			}
			if i := len(ts) - 1; i < len(roles) {
				sym.Role = roles[i]
			}
		}
		c.declare(s, sym)
	}
	return ts
}

func allHeaders(t *Type) bool {
	for _, f := range t.Fields {
		if f.Type.Kind != KHeader {
			return false
		}
	}
	return len(t.Fields) > 0
}

func (c *checker) block(name string, at Pos, d Node) {
	c.declare(c.global, &Symbol{Name: name, Kind: SymBlock, Type: &Type{Kind: KBlock, Name: name, Decl: d}, Decl: d, At: at})
}

func (c *checker) parserDecl(d *ParserDecl) {
	c.role, c.control, c.action = c.roles[d.Name], nil, nil
	s := &scope{parent: c.global, syms: map[string]*Symbol{}}
	c.params(s, d.Params, false)
	states := &scope{parent: s, syms: map[string]*Symbol{}}
	for _, n := range []string{"accept", "reject"} {
		states.syms[n] = &Symbol{Name: n, Kind: SymState}
	}
	hasStart := false
	for _, st := range d.States {
		c.declare(states, &Symbol{Name: st.Name, Kind: SymState, Decl: st, At: st.At})
		hasStart = hasStart || st.Name == "start"
	}
	if !hasStart {
		c.errorf(d.At, "parser %s has no state named start", d.Name)
	}
	for _, st := range d.States {
		body := &scope{parent: states, syms: map[string]*Symbol{}}
		for _, x := range st.Stmts {
			c.stmt(body, x)
		}
		tr := st.Trans
		if tr == nil {
			c.errorf(st.At, "state %s has no transition", st.Name)
			continue
		}
		if tr.Select == nil {
			c.state(states, tr.Next, tr.NextAt)
			continue
		}
		var sel []*Type
		for _, x := range tr.Select {
			t := c.expr(body, x)
			if t != nil && t.Kind != KBit && t.Kind != KBool {
				c.errorf(x.Position(), "select on %s: select takes bit<W> and bool values", t)
			}
			sel = append(sel, t)
		}
		for _, cs := range tr.Cases {
			c.keysets(body, cs.Keys, sel, cs.At, "select")
			c.state(states, cs.Next, cs.NextAt)
		}
	}
	c.block(d.Name, d.At, d)
	c.ch.Parser = pick(c.ch.Parser, d, c.roles[d.Name] == "parser")
}

func pick[T any](old, d T, ok bool) T {
	if ok {
		return d
	}
	return old
}

func (c *checker) state(s *scope, n string, at Pos) {
	sym := s.lookup(n)
	if sym == nil || sym.Kind != SymState {
		var names []string
		for k, v := range s.syms {
			if v.Kind == SymState {
				names = append(names, k)
			}
		}
		c.undeclared(at, "state", n, names)
	}
}

// keysets checks the keyset expressions of a select case or table entry
// against the types of what they match.
func (c *checker) keysets(s *scope, ks []Expr, want []*Type, at Pos, what string) {
	if len(ks) == 1 {
		if _, ok := ks[0].(*DefaultExpr); ok {
			return
		}
		if _, ok := ks[0].(*DontCare); ok && len(want) > 1 {
			return
		}
	}
	if len(ks) != len(want) {
		c.errorf(at, "%d keyset expressions for %d %s expressions", len(ks), len(want), what)
		return
	}
	for i, k := range ks {
		if want[i] == nil {
			continue
		}
		switch k := k.(type) {
		case *DefaultExpr, *DontCare:
		case *MaskExpr:
			c.want(s, k.Value, want[i], "a keyset value")
			c.want(s, k.Mask, want[i], "a keyset mask")
			if v, ok := c.ch.Consts[k.Value]; ok {
				if m, ok := c.ch.Consts[k.Mask]; ok && v&^m != 0 {
					c.errorf(k.At, "value %#x has bits outside mask %#x", v, m)
				}
			}
		case *RangeExpr:
			c.want(s, k.Lo, want[i], "a range's low end")
			c.want(s, k.Hi, want[i], "a range's high end")
		default:
			c.want(s, k, want[i], "a keyset value")
		}
		for _, x := range keysetParts(k) {
			if _, ok := c.ch.Consts[x]; !ok && c.ch.Types[x] != nil {
				c.errorf(x.Position(), "a keyset is made of constants")
			}
		}
	}
}

func keysetParts(k Expr) []Expr {
	switch k := k.(type) {
	case *MaskExpr:
		return []Expr{k.Value, k.Mask}
	case *RangeExpr:
		return []Expr{k.Lo, k.Hi}
	case *DefaultExpr, *DontCare:
		return nil
	}
	return []Expr{k}
}

func (c *checker) controlDecl(d *ControlDecl) {
	c.role, c.control, c.action = c.roles[d.Name], d, nil
	s := &scope{parent: c.global, syms: map[string]*Symbol{}}
	c.params(s, d.Params, false)
	locals := &scope{parent: s, syms: map[string]*Symbol{}}
	for _, l := range d.Locals {
		switch l := l.(type) {
		case *Instance:
			c.instance(locals, l)
		case *VarDecl:
			c.varDecl(locals, l)
		case *ActionDecl:
			c.actionDecl(locals, l)
		case *TableDecl:
			c.tableDecl(locals, l)
		}
	}
	c.stmt(locals, d.Apply)
	c.control = nil
	c.block(d.Name, d.At, d)
	switch c.roles[d.Name] {
	case "verify":
		c.ch.Verify = d
	case "ingress":
		c.ch.Ingress = d
	case "egress":
		c.ch.Egress = d
	case "compute":
		c.ch.Compute = d
	case "deparser":
		c.ch.Deparse = d
	}
}

func (c *checker) object(s *scope, sym *Symbol) {
	sym.Control = c.control
	sym.Qualified = c.control.Name + "." + sym.Name
	c.declare(s, sym)
	c.ch.Objects[sym.Qualified] = sym
}

func (c *checker) instance(s *scope, in *Instance) {
	t := &Type{Kind: KExtern, Name: in.Type.Name}
	switch in.Type.Name {
	case "register":
		if len(in.Type.Args) != 1 {
			c.errorf(in.At, "register<T>(size) takes one type argument, the cells' bit<W>")
			return
		}
		et := c.typeRef(in.Type.Args[0])
		if et != nil && et.Kind != KBit {
			c.errorf(in.Type.Args[0].At, "a register's cells are bit<W>, not %s", et)
			et = nil
		}
		t.Elem = et
		if len(in.Args) != 1 {
			c.errorf(in.At, "register<T>(bit<32> size) takes 1 argument, not %d", len(in.Args))
			return
		}
		t.Size = c.size(s, in.Args[0], "register "+in.Name)
	case "counter":
		if len(in.Type.Args) != 0 {
			c.errorf(in.At, "counter takes no type argument")
		}
		if len(in.Args) != 2 {
			c.errorf(in.At, "counter(bit<32> size, CounterType type) takes 2 arguments, not %d", len(in.Args))
			return
		}
		t.Size = c.size(s, in.Args[0], "counter "+in.Name)
		c.want(s, in.Args[1], counterTypeT, "a counter's type")
	default:
		if sym := c.global.lookup(in.Type.Name); sym == nil {
			c.resolve(c.global, in.Type.Name, in.Type.At)
		} else {
			c.errorf(in.At, "%s instances are not in the subset: a control declares registers and counters", in.Type.Name)
		}
		return
	}
	c.object(s, &Symbol{Name: in.Name, Kind: SymInstance, Type: t, Decl: in, At: in.At})
}

// size checks an extern's size argument: a constant of 1 to 2^32-1 cells.
func (c *checker) size(s *scope, x Expr, what string) uint64 {
	c.want(s, x, bitT(32), what+"'s size")
	v, ok := c.ch.Consts[x]
	if !ok {
		if c.ch.Types[x] != nil {
			c.errorf(x.Position(), "%s's size is not a constant", what)
		}
		return 0
	}
	if v == 0 {
		c.errorf(x.Position(), "%s has no cells", what)
	}
	return v
}

func (c *checker) varDecl(s *scope, v *VarDecl) {
	t := c.typeRef(v.Type)
	if t != nil && t.Kind != KBit && t.Kind != KBool {
		c.errorf(v.At, "the subset's variables are bit<W> or bool, not %s", t)
		t = nil
	}
	if v.Init != nil && t != nil {
		c.want(s, v.Init, t, "the initial value of "+v.Name)
	} else if v.Init != nil {
		c.expr(s, v.Init)
	}
	c.declare(s, &Symbol{Name: v.Name, Kind: SymVar, Type: t, Decl: v, At: v.At, Writable: true})
}

func (c *checker) actionDecl(s *scope, a *ActionDecl) {
	if c.role == "verify" || c.role == "compute" || c.role == "deparser" {
		c.errorf(a.At, "the %s control has no actions in v1model", c.role)
	}
	ps := &scope{parent: s, syms: map[string]*Symbol{}}
	pts := c.params(ps, a.Params, true)
	c.action = a
	c.stmt(ps, a.Body)
	c.action = nil
	c.object(s, &Symbol{Name: a.Name, Kind: SymAction, Type: &Type{Kind: KAction, Name: a.Name, Decl: a, Elems: pts}, Decl: a, At: a.At})
}

func (c *checker) tableDecl(s *scope, t *TableDecl) {
	if c.role != "ingress" && c.role != "egress" {
		c.errorf(t.At, "tables belong in ingress or egress, not in the %s control", orName(c.role, "unnamed"))
	}
	var keyTypes []*Type
	lpms := 0
	for _, k := range t.Keys {
		kt := c.expr(s, k.X)
		if kt != nil && kt.Kind != KBit && kt.Kind != KBool {
			c.errorf(k.X.Position(), "a table key is bit<W> or bool, not %s", kt)
			kt = nil
		}
		keyTypes = append(keyTypes, kt)
		sym := c.global.lookup(k.Match)
		if sym == nil || sym.Kind != SymMatchKind {
			if sug, ok := lang.Suggest(k.Match, matchKinds); ok {
				c.errorf(k.MatchAt, "unknown match kind %s (did you mean %s?)", k.Match, sug)
			} else {
				c.errorf(k.MatchAt, "unknown match kind %s (v1model has %s)", k.Match, strings.Join(matchKinds, ", "))
			}
			continue
		}
		if k.Match == "selector" {
			c.errorf(k.MatchAt, "selector keys need an action selector, not in the subset")
		}
		if k.Match == "lpm" {
			lpms++
			if lpms > 1 {
				c.errorf(k.MatchAt, "table %s has a second lpm key: a table has at most one", t.Name)
			}
		}
		if kt != nil && kt.Kind == KBool && k.Match != "exact" && k.Match != "ternary" && k.Match != "optional" {
			c.errorf(k.MatchAt, "a bool key matches exact, ternary or optional, not %s", k.Match)
		}
	}
	if t.Actions == nil {
		c.errorf(t.At, "table %s has no actions property", t.Name)
	}
	acts := map[string]*Symbol{}
	defaultOnly := map[string]bool{}
	for _, a := range t.Actions {
		sym := c.resolve(s, a.Name, a.At)
		if sym == nil {
			continue
		}
		if sym.Kind != SymAction {
			c.errorf(a.At, "%s in table %s's actions is not an action", a.Name, t.Name)
			continue
		}
		if acts[a.Name] != nil {
			c.errorf(a.At, "action %s is listed twice in table %s", a.Name, t.Name)
		}
		acts[a.Name] = sym
		for _, an := range a.Annos {
			if an.Name == "defaultonly" {
				defaultOnly[a.Name] = true
			}
		}
	}
	if d := t.Default; d != nil {
		if sym := acts[d.Name]; sym == nil {
			if s.lookup(d.Name) != nil {
				c.errorf(d.At, "default action %s is not in table %s's actions", d.Name, t.Name)
			} else {
				c.resolve(s, d.Name, d.At)
			}
		} else {
			c.actionArgs(s, sym, d.Args, d.At)
		}
	}
	if t.Size != nil {
		c.expr(s, t.Size)
		if v, ok := c.ch.Consts[t.Size]; !ok || v == 0 {
			c.errorf(t.Size.Position(), "table %s's size is a positive constant", t.Name)
		}
	}
	if es := t.Entries; es != nil {
		if len(t.Keys) == 0 {
			c.errorf(es.At, "table %s has entries but no key", t.Name)
		}
		for _, e := range es.List {
			c.keysets(s, e.Keys, keyTypes, e.At, "key")
			for i, k := range e.Keys {
				if i < len(t.Keys) {
					c.entryKey(k, t.Keys[i].Match)
				}
			}
			sym := acts[e.Action]
			switch {
			case sym == nil:
				c.errorf(e.ActionAt, "unknown action %s in an entry of table %s", e.Action, t.Name)
			case defaultOnly[e.Action]:
				c.errorf(e.ActionAt, "action %s is @defaultonly in table %s", e.Action, t.Name)
			default:
				c.actionArgs(s, sym, e.Args, e.ActionAt)
			}
		}
	}
	c.object(s, &Symbol{Name: t.Name, Kind: SymTable, Type: &Type{Kind: KTable, Name: t.Name, Decl: t, Elems: keyTypes}, Decl: t, At: t.At})
}

// entryKey checks that a const entry's keyset suits the key's match kind.
func (c *checker) entryKey(k Expr, match string) {
	switch k := k.(type) {
	case *RangeExpr:
		if match != "range" {
			c.errorf(k.At, "a range matches a range key, not %s", match)
		}
	case *MaskExpr:
		switch match {
		case "ternary":
		case "lpm":
			if m, ok := c.ch.Consts[k.Mask]; ok {
				if t := c.ch.Types[k.Mask]; t != nil {
					if _, ok := prefixLen(m, t.Width); !ok {
						c.errorf(k.At, "mask %#x of an lpm key is not a prefix", m)
					}
				}
			}
		default:
			c.errorf(k.At, "a mask matches a ternary or lpm key, not %s", match)
		}
	case *DontCare, *DefaultExpr:
		if match == "exact" {
			c.errorf(k.Position(), "an exact key matches a value, not everything")
		}
	}
}

// prefixLen returns how many leading ones a mask of w bits has, and
// whether it is a prefix (ones then zeros).
func prefixLen(m uint64, w int) (int, bool) {
	n := bits.OnesCount64(m)
	if n == 0 {
		return 0, true
	}
	want := (^uint64(0) << uint(w-n)) & ((^uint64(0)) >> uint(64-w))
	if w >= 64 {
		want = ^uint64(0) << uint(64-n)
	}
	return n, m == want
}

func orName(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// actionArgs checks the arguments of an action run by a table's default,
// an entry or a call.
func (c *checker) actionArgs(s *scope, sym *Symbol, args []Expr, at Pos) {
	pts := sym.Type.Elems
	if len(args) != len(pts) {
		c.errorf(at, "action %s takes %d arguments, not %d", sym.Name, len(pts), len(args))
		return
	}
	ad := sym.Type.Decl.(*ActionDecl)
	for i, a := range args {
		if pts[i] != nil {
			c.want(s, a, pts[i], "argument "+ad.Params[i].Name+" of "+sym.Name)
		}
	}
}

func (c *checker) v1switch(in *Instance) {
	if len(in.Args) != 6 {
		c.errorf(in.At, "V1Switch takes 6 blocks (parser, verify, ingress, egress, compute, deparser), not %d", len(in.Args))
		return
	}
	roles := []string{"parser", "verify checksum control", "ingress control", "egress control", "compute checksum control", "deparser"}
	var H, M *Type
	unify := func(t **Type, got *Type, at Pos, what string) {
		if got == nil {
			return
		}
		if *t == nil {
			*t = got
		} else if !same(*t, got) {
			c.errorf(at, "%s is %s here and %s in the parser: V1Switch's blocks share H and M", what, got, *t)
		}
	}
	for i, a := range in.Args {
		ce, ok := a.(*CallExpr)
		n, ok2 := Name{}, false
		if ok {
			var nn *Name
			nn, ok2 = ce.Fun.(*Name)
			if ok2 {
				n = *nn
			}
		}
		if !ok || !ok2 || len(ce.Args) > 0 {
			c.errorf(a.Position(), "V1Switch's %s is an instantiation Name()", roles[i])
			continue
		}
		sym := c.resolve(c.global, n.Name, n.At)
		if sym == nil {
			continue
		}
		if sym.Kind != SymBlock {
			c.errorf(n.At, "%s is not a parser or control", n.Name)
			continue
		}
		c.ch.Syms[ce.Fun.(*Name)] = sym
		var ps []*Param
		switch d := sym.Decl.(type) {
		case *ParserDecl:
			if i != 0 {
				c.errorf(n.At, "V1Switch's %s is a control, and %s is a parser", roles[i], n.Name)
				continue
			}
			ps = d.Params
		case *ControlDecl:
			if i == 0 {
				c.errorf(n.At, "V1Switch's parser is a parser, and %s is a control", n.Name)
				continue
			}
			ps = d.Params
		}
		// The parameter lists of v1model's Parser, VerifyChecksum,
		// Ingress, Egress, ComputeChecksum and Deparser.
		want := [][]string{
			{"packet_in", "out H", "inout M", "inout standard_metadata_t"},
			{"inout H", "inout M"},
			{"inout H", "inout M", "inout standard_metadata_t"},
			{"inout H", "inout M", "inout standard_metadata_t"},
			{"inout H", "inout M"},
			{"packet_out", "in H"},
		}[i]
		if len(ps) != len(want) {
			c.errorf(sym.At, "%s, V1Switch's %s, takes (%s)", n.Name, roles[i], strings.Join(want, ", "))
			continue
		}
		for j, w := range want {
			dir, ty, _ := strings.Cut(w, " ")
			if ty == "" {
				dir, ty = "", dir
			}
			p := ps[j]
			if p.Dir != dir {
				c.errorf(p.At, "parameter %s of %s is %q; V1Switch's %s takes (%s)", p.Name, n.Name, p.Dir, roles[i], strings.Join(want, ", "))
				continue
			}
			switch ty {
			case "H":
				t := c.typeOf(p.Type)
				if t != nil && (t.Kind != KStruct || !allHeaders(t)) {
					c.errorf(p.At, "H, the headers, is a struct of headers, not %s", t)
				}
				unify(&H, t, p.At, "H")
			case "M":
				t := c.typeOf(p.Type)
				if t != nil && t.Kind != KStruct {
					c.errorf(p.At, "M, the metadata, is a struct, not %s", t)
				}
				unify(&M, t, p.At, "M")
			default:
				if p.Type.Name != ty {
					c.errorf(p.At, "parameter %s of %s is %s, not %s", p.Name, n.Name, TypeString(p.Type), ty)
				}
			}
		}
	}
	c.ch.Headers, c.ch.Meta = H, M
}

// typeOf resolves a type without reporting (it was reported where the
// block was checked).
func (c *checker) typeOf(r *TypeRef) *Type {
	if sym := c.global.lookup(r.Name); sym != nil && sym.Kind == SymType {
		return sym.Type
	}
	return nil
}
