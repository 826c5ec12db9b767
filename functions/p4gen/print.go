package p4gen

import (
	"cmp"
	"fmt"
	gobits "math/bits"
	"slices"
	"strings"

	"github.com/ffpf-go/ffpf/lang/p4"
)

// The names of the printed program's blocks and of their parameters
// (p4common: every part of the switch flowspace uses these).
const (
	ParserName   = "ffpf_parser"
	VerifyName   = "ffpf_verify"
	IngressName  = "ffpf_ingress"
	EgressName   = "ffpf_egress"
	ComputeName  = "ffpf_compute"
	DeparserName = "ffpf_deparser"
	HeadersType  = "headers_t"
	MetadataType = "metadata_t"
)

// rmwOld and rmwNew are the local variables an RMW is printed with: the
// cell's value before and after the packet.
const (
	rmwOld = "ffpf_old"
	rmwNew = "ffpf_new"
)

// Printed is a Program as P4_16 text for v1model.
type Printed struct {
	AST  *p4.Program
	Text []byte
	// Lines is the count of lines of P4 that are not blank (MAFIA's
	// Table II counts lines of code).
	Lines int
	// Control maps each register, counter, table and action to the
	// control it is declared in (IngressName or EgressName); an action
	// used by both pipelines is declared in both, listed here as
	// ingress's and in Shared.
	Control map[any]string
	Shared  map[*Action]bool
}

// Name returns the fully qualified name of a register, counter, table or
// action, as p4c writes it in the P4Info ("ffpf_ingress.cms_2_row0"),
// or "" for an object the program does not declare.
func (pr *Printed) Name(obj any) string {
	c, ok := pr.Control[obj]
	if !ok {
		return ""
	}
	switch o := obj.(type) {
	case *Register:
		return c + "." + o.Name
	case *Counter:
		return c + "." + o.Name
	case *Table:
		return c + "." + o.Name
	case *Action:
		return c + "." + o.Name
	}
	return ""
}

// Print turns a valid program (Validate) into the AST of a P4_16 v1model
// program and its text, Format's canonical form. It fails on what v1model
// cannot say: a start state not named start, a table or counter used in
// both ingress and egress.
func Print(p *Program) (*Printed, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	pr := &printer{p: p, control: map[any]string{}}
	ast, err := pr.program()
	if err != nil {
		return nil, err
	}
	text := p4.Format(ast)
	shared := map[*Action]bool{}
	for _, a := range p.Actions {
		if pr.ingress[a] && pr.egress[a] {
			shared[a] = true
		}
	}
	return &Printed{AST: ast, Text: text, Lines: p4.Lines(text), Control: pr.control, Shared: shared}, nil
}

type printer struct {
	p       *Program
	control map[any]string
	// ingress and egress hold what each pipeline uses.
	ingress, egress map[any]bool
}

func bitType(w int) *p4.TypeRef  { return &p4.TypeRef{Name: "bit", Width: w} }
func named(n string) *p4.TypeRef { return &p4.TypeRef{Name: n} }
func name(n string) *p4.Name     { return &p4.Name{Name: n} }
func lit(v uint64, w int) *p4.IntLit {
	return &p4.IntLit{Width: w, Value: v, Base: 10}
}
func hexLit(v uint64, w int) *p4.IntLit { return &p4.IntLit{Width: w, Value: v, Base: 16} }

// pathExpr turns "hdr.ipv4.ttl" into the expression hdr.ipv4.ttl.
func pathExpr(s string) p4.Expr {
	parts := strings.Split(s, ".")
	var e p4.Expr = name(parts[0])
	for _, f := range parts[1:] {
		e = &p4.Member{X: e, Name: f}
	}
	return e
}

func call(fun p4.Expr, args ...p4.Expr) *p4.CallExpr { return &p4.CallExpr{Fun: fun, Args: args} }

func callStmt(fun p4.Expr, args ...p4.Expr) p4.Stmt { return &p4.CallStmt{Call: call(fun, args...)} }

func method(obj, m string) p4.Expr { return &p4.Member{X: pathExpr(obj), Name: m} }

func (pr *printer) program() (*p4.Program, error) {
	p := pr.p
	if p.Parser[0].Name != "start" {
		return nil, fmt.Errorf("the parser's first state is %s: v1model starts in a state named start", p.Parser[0].Name)
	}
	if err := pr.names(); err != nil {
		return nil, err
	}
	if err := pr.assign(); err != nil {
		return nil, err
	}
	prog := &p4.Program{Includes: []*p4.Include{{Path: "core.p4", System: true}, {Path: "v1model.p4", System: true}}}
	for _, t := range p.HeaderTypes {
		h := &p4.HeaderDecl{Name: t.Name}
		for _, f := range t.Fields {
			ty := bitType(f.Bits)
			if f.Var {
				ty.Name = "varbit"
			}
			h.Fields = append(h.Fields, &p4.FieldDecl{Type: ty, Name: f.Name})
		}
		prog.Decls = append(prog.Decls, h)
	}
	hs := &p4.StructDecl{Name: HeadersType}
	for _, h := range p.Headers {
		hs.Fields = append(hs.Fields, &p4.FieldDecl{Type: named(h.Type.Name), Name: h.Name})
	}
	ms := &p4.StructDecl{Name: MetadataType}
	preserved := preservedMeta(p)
	for _, f := range p.Metadata {
		fd := &p4.FieldDecl{Type: bitType(f.Bits), Name: f.Name}
		if preserved[f.Name] {
			// The field list egress-to-egress clones preserve (Clone).
			fd.Annos = []*p4.Annotation{{Name: "field_list", Args: []p4.Expr{lit(FieldList, 0)}, HasArgs: true}}
		}
		ms.Fields = append(ms.Fields, fd)
	}
	prog.Decls = append(prog.Decls, hs, ms)
	for _, d := range p.Digests {
		s := &p4.StructDecl{Name: d.Name}
		for _, f := range d.Fields {
			s.Fields = append(s.Fields, &p4.FieldDecl{Type: bitType(f.Bits), Name: f.Name})
		}
		prog.Decls = append(prog.Decls, s)
	}
	parser, err := pr.parser()
	if err != nil {
		return nil, err
	}
	prog.Decls = append(prog.Decls, parser, pr.emptyControl(VerifyName))
	for _, c := range []struct {
		name string
		body []Stmt
	}{{IngressName, p.Ingress}, {EgressName, p.Egress}} {
		ctl, err := pr.pipeline(c.name, c.body)
		if err != nil {
			return nil, err
		}
		prog.Decls = append(prog.Decls, ctl)
	}
	compute, err := pr.compute()
	if err != nil {
		return nil, err
	}
	prog.Decls = append(prog.Decls, compute, pr.deparser())
	var blocks []p4.Expr
	for _, n := range []string{ParserName, VerifyName, IngressName, EgressName, ComputeName, DeparserName} {
		blocks = append(blocks, call(name(n)))
	}
	prog.Decls = append(prog.Decls, &p4.Instance{Type: named("V1Switch"), Args: blocks, Name: "main"})
	return prog, nil
}

// FieldList is the one field list a program's clones preserve
// (@field_list(1) on its metadata fields).
const FieldList = 1

// preservedMeta returns the metadata fields (by name, without "meta.")
// an egress-to-egress clone of the program preserves: every clone
// preserves the one field list, the union of their Preserve.
func preservedMeta(p *Program) map[string]bool {
	out := map[string]bool{}
	var walk func([]Stmt)
	walk = func(ss []Stmt) {
		for _, s := range ss {
			switch s := s.(type) {
			case Clone:
				for _, r := range s.Preserve {
					out[strings.TrimPrefix(r.Path, "meta.")] = true
				}
			case If:
				walk(s.Then)
				walk(s.Else)
			}
		}
	}
	walk(p.Ingress)
	walk(p.Egress)
	for _, a := range p.Actions {
		walk(a.Body)
	}
	return out
}

// names refuses a name that is a P4 keyword ("type"), which p4c would.
func (pr *printer) names() error {
	p := pr.p
	type named struct{ kind, name string }
	var ns []named
	fields := func(kind string, fs []Field) {
		for _, f := range fs {
			ns = append(ns, named{kind, f.Name})
		}
	}
	for _, t := range p.HeaderTypes {
		ns = append(ns, named{"header type", t.Name})
		fields("field of "+t.Name, t.Fields)
	}
	for _, h := range p.Headers {
		ns = append(ns, named{"header", h.Name})
	}
	fields("metadata", p.Metadata)
	for _, s := range p.Parser {
		ns = append(ns, named{"parser state", s.Name})
	}
	for _, r := range p.Registers {
		ns = append(ns, named{"register", r.Name})
	}
	for _, c := range p.Counters {
		ns = append(ns, named{"counter", c.Name})
	}
	for _, a := range p.Actions {
		ns = append(ns, named{"action", a.Name})
		fields("parameter of "+a.Name, a.Params)
	}
	for _, t := range p.Tables {
		ns = append(ns, named{"table", t.Name})
	}
	for _, d := range p.Digests {
		ns = append(ns, named{"digest", d.Name})
		fields("field of "+d.Name, d.Fields)
	}
	for _, n := range ns {
		if p4.IsKeyword(n.name) || n.name == rmwOld || n.name == rmwNew {
			return fmt.Errorf("%s %q is a P4 keyword or a name the printer keeps for itself", n.kind, n.name)
		}
	}
	return nil
}

// uses collects the registers, counters, tables and actions that ss
// reaches (through applied tables and called actions).
func uses(ss []Stmt, seen map[any]bool) {
	for _, s := range ss {
		switch s := s.(type) {
		case If:
			uses(s.Then, seen)
			uses(s.Else, seen)
		case Apply:
			seen[s.Table] = true
			for _, a := range append(slices.Clone(s.Table.Actions), s.Table.Default) {
				if !seen[a] {
					seen[a] = true
					uses(a.Body, seen)
				}
			}
		case Call:
			if !seen[s.Action] {
				seen[s.Action] = true
				uses(s.Action.Body, seen)
			}
		case RMW:
			seen[s.Reg] = true
		case Count:
			seen[s.Counter] = true
		}
	}
}

// assign decides the control each object is declared in: where it is
// used; an object used nowhere goes to ingress.
func (pr *printer) assign() error {
	in, eg := map[any]bool{}, map[any]bool{}
	uses(pr.p.Ingress, in)
	uses(pr.p.Egress, eg)
	objs := []any{}
	for _, r := range pr.p.Registers {
		objs = append(objs, r)
	}
	for _, c := range pr.p.Counters {
		objs = append(objs, c)
	}
	for _, t := range pr.p.Tables {
		objs = append(objs, t)
	}
	for _, o := range objs {
		if in[o] && eg[o] {
			return fmt.Errorf("%s is used in ingress and in egress: it belongs to one control", describeObj(o))
		}
		pr.control[o] = IngressName
		if eg[o] {
			pr.control[o] = EgressName
		}
	}
	for _, a := range pr.p.Actions {
		pr.control[a] = IngressName
		if eg[a] && !in[a] {
			pr.control[a] = EgressName
		}
	}
	pr.ingress, pr.egress = in, eg
	return nil
}

func describeObj(o any) string {
	switch o := o.(type) {
	case *Register:
		return "register " + o.Name
	case *Counter:
		return "counter " + o.Name
	case *Table:
		return "table " + o.Name
	}
	return fmt.Sprint(o)
}

func (pr *printer) emptyControl(n string) *p4.ControlDecl {
	return &p4.ControlDecl{Name: n, Params: []*p4.Param{
		{Dir: "inout", Type: named(HeadersType), Name: "hdr"},
		{Dir: "inout", Type: named(MetadataType), Name: "meta"}}, Apply: &p4.Block{}}
}

func stdParams() []*p4.Param {
	return []*p4.Param{
		{Dir: "inout", Type: named(HeadersType), Name: "hdr"},
		{Dir: "inout", Type: named(MetadataType), Name: "meta"},
		{Dir: "inout", Type: named("standard_metadata_t"), Name: "standard_metadata"}}
}

func (pr *printer) parser() (*p4.ParserDecl, error) {
	d := &p4.ParserDecl{Name: ParserName, Params: []*p4.Param{
		{Type: named("packet_in"), Name: "packet"},
		{Dir: "out", Type: named(HeadersType), Name: "hdr"},
		{Dir: "inout", Type: named(MetadataType), Name: "meta"},
		{Dir: "inout", Type: named("standard_metadata_t"), Name: "standard_metadata"}}}
	for _, s := range pr.p.Parser {
		st := &p4.State{Name: s.Name}
		for i, h := range s.Extract {
			args := []p4.Expr{pathExpr("hdr." + h)}
			if i == len(s.Extract)-1 && s.VarBits != nil {
				n, err := pr.expr(s.VarBits)
				if err != nil {
					return nil, err
				}
				if s.VarBits.Type() != Bit(32) {
					n = &p4.CastExpr{Type: bitType(32), X: n}
				}
				args = append(args, n)
			}
			st.Stmts = append(st.Stmts, callStmt(method("packet", "extract"), args...))
		}
		tr := &p4.Transition{Next: s.Default}
		if len(s.Select) > 0 {
			tr = &p4.Transition{}
			for _, x := range s.Select {
				e, err := pr.expr(x)
				if err != nil {
					return nil, err
				}
				tr.Select = append(tr.Select, e)
			}
			for _, c := range s.Cases {
				sc := &p4.SelectCase{Next: c.Next}
				for i, v := range c.Values {
					t := s.Select[i].Type()
					m := t.Mask()
					if c.Masks != nil {
						m = c.Masks[i] & t.Mask()
					}
					sc.Keys = append(sc.Keys, keyset(v&m, m, t))
				}
				tr.Cases = append(tr.Cases, sc)
			}
			tr.Cases = append(tr.Cases, &p4.SelectCase{Keys: []p4.Expr{&p4.DefaultExpr{}}, Next: s.Default})
		}
		st.Trans = tr
		d.States = append(d.States, st)
	}
	return d, nil
}

// keyset prints value v under mask m for a select expression of type t:
// the value, "_" under an empty mask, or "v &&& m".
func keyset(v, m uint64, t Type) p4.Expr {
	switch {
	case m == t.Mask():
		return constExpr(v, t)
	case m == 0:
		return &p4.DontCare{}
	}
	return &p4.MaskExpr{Value: constExpr(v, t), Mask: constExpr(m, t)}
}

// constExpr prints v as a constant of type t: true or false for a bool,
// else a literal of t's width (hexadecimal from 16 bits up).
func constExpr(v uint64, t Type) p4.Expr {
	if t.IsBool() {
		return &p4.BoolLit{Value: v != 0}
	}
	if t.Bits >= 16 {
		return hexLit(v, t.Bits)
	}
	return lit(v, t.Bits)
}

// pipeline prints ingress or egress: the objects it uses, then its
// statements.
func (pr *printer) pipeline(ctl string, body []Stmt) (*p4.ControlDecl, error) {
	d := &p4.ControlDecl{Name: ctl, Params: stdParams()}
	mine := func(o any) bool { return pr.control[o] == ctl }
	for _, r := range pr.p.Registers {
		if mine(r) {
			d.Locals = append(d.Locals, &p4.Instance{Type: &p4.TypeRef{Name: "register", Args: []*p4.TypeRef{bitType(r.Width)}},
				Args: []p4.Expr{lit(uint64(r.Size), 32)}, Name: r.Name})
		}
	}
	for _, c := range pr.p.Counters {
		if mine(c) {
			kind := map[CounterType]string{Packets: "packets", Bytes: "bytes", PacketsAndBytes: "packets_and_bytes"}[c.Type]
			d.Locals = append(d.Locals, &p4.Instance{Type: named("counter"),
				Args: []p4.Expr{lit(uint64(c.Size), 32), pathExpr("CounterType." + kind)}, Name: c.Name})
		}
	}
	used := pr.ingress
	if ctl == EgressName {
		used = pr.egress
	}
	for _, a := range pr.p.Actions {
		if !mine(a) && !used[a] {
			continue
		}
		ad := &p4.ActionDecl{Name: a.Name}
		for _, f := range a.Params {
			ad.Params = append(ad.Params, &p4.Param{Type: bitType(f.Bits), Name: f.Name})
		}
		b, err := pr.stmts(a.Body)
		if err != nil {
			return nil, fmt.Errorf("action %s: %v", a.Name, err)
		}
		ad.Body = &p4.Block{Stmts: b}
		d.Locals = append(d.Locals, ad)
	}
	for _, t := range pr.p.Tables {
		if mine(t) {
			td, err := pr.table(t)
			if err != nil {
				return nil, err
			}
			d.Locals = append(d.Locals, td)
		}
	}
	b, err := pr.stmts(body)
	if err != nil {
		return nil, err
	}
	d.Apply = &p4.Block{Stmts: b}
	return d, nil
}

func (pr *printer) table(t *Table) (*p4.TableDecl, error) {
	td := &p4.TableDecl{Name: t.Name, HasKey: len(t.Keys) > 0}
	for _, k := range t.Keys {
		x, err := pr.expr(k.X)
		if err != nil {
			return nil, err
		}
		td.Keys = append(td.Keys, &p4.KeyElem{X: x, Match: k.Match.String()})
	}
	inList := false
	for _, a := range t.Actions {
		td.Actions = append(td.Actions, &p4.ActionRef{Name: a.Name})
		inList = inList || a == t.Default
	}
	if !inList {
		td.Actions = append(td.Actions, &p4.ActionRef{Name: t.Default.Name, Annos: []*p4.Annotation{{Name: "defaultonly"}}})
	}
	td.Default = &p4.DefaultAction{Name: t.Default.Name, Args: args(t.Default, t.DefaultArgs)}
	td.Size = &p4.IntLit{Value: uint64(t.Size), Base: 10}
	if t.Const {
		entries := slices.Clone(t.Entries)
		if !hasLPM(t) {
			// Among matching entries the highest priority wins; P4's
			// const entries are in priority order, first highest.
			slices.SortStableFunc(entries, func(a, b Entry) int { return cmp.Compare(b.Priority, a.Priority) })
		}
		td.Entries = &p4.Entries{Const: true}
		for _, e := range entries {
			pe := &p4.Entry{Action: e.Action.Name, Args: args(e.Action, e.Args)}
			for i, k := range t.Keys {
				ks, err := entryKey(k, e.Match[i])
				if err != nil {
					return nil, fmt.Errorf("table %s: %v", t.Name, err)
				}
				pe.Keys = append(pe.Keys, ks)
			}
			td.Entries.List = append(td.Entries.List, pe)
		}
	}
	return td, nil
}

func args(a *Action, vals []uint64) []p4.Expr {
	out := make([]p4.Expr, len(vals))
	for i, v := range vals {
		out[i] = lit(v&Bit(a.Params[i].Bits).Mask(), a.Params[i].Bits)
	}
	return out
}

// entryKey prints how one key of a const entry matches.
func entryKey(k TableKey, m Match) (p4.Expr, error) {
	t := k.X.Type()
	if t.IsBool() {
		if k.Match != Exact {
			return nil, fmt.Errorf("a bool key matches exactly, not by %s", k.Match)
		}
		return constExpr(m.Value, t), nil
	}
	switch k.Match {
	case Exact:
		return constExpr(m.Value&t.Mask(), t), nil
	case Ternary:
		return keyset(m.Value&m.Mask&t.Mask(), m.Mask&t.Mask(), t), nil
	case LPM:
		if m.PrefixLen < 0 || m.PrefixLen > t.Bits {
			return nil, fmt.Errorf("prefix length %d of a %s key", m.PrefixLen, t)
		}
		mask := t.Mask() &^ Bit(t.Bits).Mask() // 0
		if m.PrefixLen > 0 {
			mask = t.Mask() &^ (t.Mask() >> uint(m.PrefixLen))
		}
		return &p4.MaskExpr{Value: constExpr(m.Value&mask, t), Mask: constExpr(mask, t)}, nil
	case Range:
		return &p4.RangeExpr{Lo: constExpr(m.Lo&t.Mask(), t), Hi: constExpr(m.Hi&t.Mask(), t)}, nil
	}
	return nil, fmt.Errorf("match kind %v", k.Match)
}

func (pr *printer) compute() (*p4.ControlDecl, error) {
	d := pr.emptyControl(ComputeName)
	if !pr.p.UpdateIPv4Checksum {
		return d, nil
	}
	// Exec sums the IPv4 chunks and the options that are valid, with the
	// checksum zeroed: the same sum as that of every other field, since
	// the checksum is a 16-bit word of its own.
	list := &p4.ListExpr{}
	for _, h := range append(slices.Clone(IPv4Chunks), "ipv4_opts") {
		hd := pr.p.Header(h)
		if hd == nil {
			return nil, fmt.Errorf("UpdateIPv4Checksum without the standard IPv4 header %s", h)
		}
		for _, f := range hd.Type.Fields {
			if path := "hdr." + h + "." + f.Name; path != IPv4ChecksumField.Path {
				list.Elems = append(list.Elems, pathExpr(path))
			}
		}
	}
	d.Apply.Stmts = append(d.Apply.Stmts, callStmt(name("update_checksum"),
		call(method("hdr."+IPv4Chunks[len(IPv4Chunks)-1], "isValid")), list, pathExpr(IPv4ChecksumField.Path), pathExpr("HashAlgorithm.csum16")))
	return d, nil
}

func (pr *printer) deparser() *p4.ControlDecl {
	d := &p4.ControlDecl{Name: DeparserName, Params: []*p4.Param{
		{Type: named("packet_out"), Name: "packet"},
		{Dir: "in", Type: named(HeadersType), Name: "hdr"}}, Apply: &p4.Block{}}
	for _, h := range pr.p.Deparse {
		d.Apply.Stmts = append(d.Apply.Stmts, callStmt(method("packet", "emit"), pathExpr("hdr."+h)))
	}
	return d
}

func (pr *printer) stmts(ss []Stmt) ([]p4.Stmt, error) {
	var out []p4.Stmt
	for _, s := range ss {
		ps, err := pr.stmt(s)
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	return out, nil
}

func (pr *printer) exprs(xs ...Expr) ([]p4.Expr, error) {
	out := make([]p4.Expr, len(xs))
	for i, x := range xs {
		e, err := pr.expr(x)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

func (pr *printer) stmt(s Stmt) ([]p4.Stmt, error) {
	one := func(st p4.Stmt) ([]p4.Stmt, error) { return []p4.Stmt{st}, nil }
	switch s := s.(type) {
	case Assign:
		x, err := pr.expr(s.X)
		if err != nil {
			return nil, err
		}
		return one(&p4.AssignStmt{Dst: pr.ref(s.Dst), X: x})
	case If:
		c, err := pr.expr(s.Cond)
		if err != nil {
			return nil, err
		}
		then, err := pr.stmts(s.Then)
		if err != nil {
			return nil, err
		}
		st := &p4.IfStmt{Cond: c, Then: &p4.Block{Stmts: then}}
		if len(s.Else) > 0 {
			els, err := pr.stmts(s.Else)
			if err != nil {
				return nil, err
			}
			st.Else = &p4.Block{Stmts: els}
			if len(s.Else) == 1 {
				if _, ok := s.Else[0].(If); ok {
					st.Else = els[0]
				}
			}
		}
		return one(st)
	case Apply:
		return one(callStmt(method(s.Table.Name, "apply")))
	case Call:
		xs, err := pr.exprs(s.Args...)
		if err != nil {
			return nil, err
		}
		return one(callStmt(name(s.Action.Name), xs...))
	case Hash:
		return pr.hash(s)
	case Random:
		w := s.Dst.Bits
		return one(callStmt(name("random"), pr.ref(s.Dst), lit(s.Lo, w), lit(s.Hi, w)))
	case RMW:
		return pr.rmw(s)
	case Count:
		i, err := pr.expr(s.Index)
		if err != nil {
			return nil, err
		}
		return one(callStmt(method(s.Counter.Name, "count"), i))
	case Digest:
		xs, err := pr.exprs(s.Values...)
		if err != nil {
			return nil, err
		}
		return one(&p4.CallStmt{Call: &p4.CallExpr{Fun: name("digest"), TypeArgs: []*p4.TypeRef{named(s.Type.Name)},
			Args: []p4.Expr{lit(1, 32), &p4.ListExpr{Elems: xs}}}})
	case Clone:
		if !s.E2E {
			return one(callStmt(name("clone"), pathExpr("CloneType.I2E"), lit(uint64(s.Session), 32)))
		}
		if len(s.Preserve) == 0 {
			return one(callStmt(name("clone"), pathExpr("CloneType.E2E"), lit(uint64(s.Session), 32)))
		}
		return one(callStmt(name("clone_preserving_field_list"), pathExpr("CloneType.E2E"), lit(uint64(s.Session), 32), lit(FieldList, 8)))
	case SetValid:
		m := "setInvalid"
		if s.Valid {
			m = "setValid"
		}
		return one(callStmt(method("hdr."+s.Header, m)))
	case MarkToDrop:
		return one(callStmt(name("mark_to_drop"), name("standard_metadata")))
	}
	return nil, fmt.Errorf("unknown statement %T", s)
}

// hash prints v1model's hash. With Max 0 the IR means base + h at the
// destination's width, and v1model means base alone: the printed max is
// then 2^k for k the smaller of the destination's width and the hash's,
// which leaves the sum's low bits as they are.
func (pr *printer) hash(s Hash) ([]p4.Stmt, error) {
	data, err := pr.exprs(s.Data...)
	if err != nil {
		return nil, err
	}
	algo := map[HashAlgo]string{CRC32: "crc32", CRC16: "crc16", Identity: "identity"}[s.Algo]
	w := s.Dst.Bits
	baseW := w
	if gobits.Len64(s.Base) > w {
		baseW = 64
	}
	var max p4.Expr
	if s.Max > 0 {
		mw := 32
		if gobits.Len64(s.Max) > 32 {
			mw = 64
		}
		max = lit(s.Max, mw)
	} else {
		hw := map[HashAlgo]int{CRC32: 32, CRC16: 16}[s.Algo]
		if s.Algo == Identity {
			for _, d := range s.Data {
				hw += d.Type().Bits
			}
		}
		k := min(w, hw)
		if k >= 64 {
			return nil, fmt.Errorf("hash into %s: the whole %d-bit hash cannot be kept through v1model's max (give Max)", s.Dst.Path, k)
		}
		max = lit(1<<uint(k), k+1)
	}
	return []p4.Stmt{callStmt(name("hash"), pr.ref(s.Dst), pathExpr("HashAlgorithm."+algo), lit(s.Base, baseW),
		&p4.ListExpr{Elems: data}, max)}, nil
}

// rmw prints one stateful access as a block: read the cell, compute the
// new value (the old one when Cond fails), write it back, then hand the
// values read and written to OldTo and NewTo.
func (pr *printer) rmw(s RMW) ([]p4.Stmt, error) {
	idx, err := pr.expr(s.Index)
	if err != nil {
		return nil, err
	}
	nv, err := pr.expr(s.New)
	if err != nil {
		return nil, err
	}
	if s.Cond != nil {
		c, err := pr.expr(s.Cond)
		if err != nil {
			return nil, err
		}
		nv = &p4.CondExpr{Cond: c, Then: nv, Else: name(rmwOld)}
	}
	idx2, _ := pr.expr(s.Index)
	w := s.Reg.Width
	b := &p4.Block{Stmts: []p4.Stmt{
		&p4.VarDecl{Type: bitType(w), Name: rmwOld},
		callStmt(method(s.Reg.Name, "read"), name(rmwOld), idx),
		&p4.VarDecl{Type: bitType(w), Name: rmwNew, Init: nv},
		callStmt(method(s.Reg.Name, "write"), idx2, name(rmwNew)),
	}}
	if s.OldTo != nil {
		b.Stmts = append(b.Stmts, &p4.AssignStmt{Dst: pr.ref(*s.OldTo), X: name(rmwOld)})
	}
	if s.NewTo != nil {
		b.Stmts = append(b.Stmts, &p4.AssignStmt{Dst: pr.ref(*s.NewTo), X: name(rmwNew)})
	}
	return []p4.Stmt{b}, nil
}

func (pr *printer) ref(r Ref) p4.Expr { return pathExpr(r.Path) }

func (pr *printer) expr(x Expr) (p4.Expr, error) {
	switch x := x.(type) {
	case Const:
		return constExprDec(x.Value, x.Type()), nil
	case Ref:
		return pr.ref(x), nil
	case Valid:
		return call(method("hdr."+x.Header, "isValid")), nil
	case Old:
		return name(rmwOld), nil
	case Unary:
		e, err := pr.expr(x.X)
		if err != nil {
			return nil, err
		}
		op := "!"
		if x.Op == Inv {
			op = "~"
		}
		return &p4.UnaryExpr{Op: op, X: e}, nil
	case Binary:
		l, err := pr.expr(x.L)
		if err != nil {
			return nil, err
		}
		r, err := pr.expr(x.R)
		if err != nil {
			return nil, err
		}
		return &p4.BinaryExpr{Op: x.Op.String(), L: l, R: r}, nil
	case Cast:
		e, err := pr.expr(x.X)
		if err != nil {
			return nil, err
		}
		if x.X.Type().IsBool() && x.Bits != 1 {
			e = &p4.CastExpr{Type: bitType(1), X: e} // P4 casts a bool to bit<1> only
		}
		return &p4.CastExpr{Type: bitType(x.Bits), X: e}, nil
	case Slice:
		e, err := pr.expr(x.X)
		if err != nil {
			return nil, err
		}
		return &p4.SliceExpr{X: e, Hi: &p4.IntLit{Value: uint64(x.Hi), Base: 10}, Lo: &p4.IntLit{Value: uint64(x.Lo), Base: 10}}, nil
	case Mux:
		es, err := pr.exprs(x.Cond, x.Then, x.Else)
		if err != nil {
			return nil, err
		}
		return &p4.CondExpr{Cond: es[0], Then: es[1], Else: es[2]}, nil
	}
	return nil, fmt.Errorf("unknown expression %T", x)
}

// constExprDec prints a constant of an expression in decimal.
func constExprDec(v uint64, t Type) p4.Expr {
	if t.IsBool() {
		return &p4.BoolLit{Value: v != 0}
	}
	return lit(v, t.Bits)
}
