package p4

// keywords may not be used as names.
var keywords = map[string]bool{
	"abstract": true, "action": true, "apply": true, "bit": true, "bool": true, "const": true,
	"control": true, "default": true, "else": true, "entries": true, "enum": true, "error": true,
	"exit": true, "extern": true, "false": true, "header": true, "header_union": true, "if": true,
	"in": true, "inout": true, "int": true, "list": true, "match_kind": true, "out": true,
	"package": true, "parser": true, "return": true, "select": true, "state": true, "string": true,
	"struct": true, "switch": true, "table": true, "this": true, "transition": true, "true": true,
	"tuple": true, "type": true, "typedef": true, "varbit": true, "void": true,
}

// Parse parses a P4_16 source of the subset. file names the source in
// errors. The first error ends parsing; it is an *Error.
func Parse(file, src string) (*Program, error) {
	toks, err := lex(file, src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks, file: file, src: src}
	prog, err := p.program()
	if err != nil {
		return nil, err
	}
	return prog, nil
}

type parser struct {
	toks []token
	i    int
	file string
	src  string
	// depth bounds the nesting of expressions and statements, so that a
	// hostile input cannot exhaust the stack.
	depth int
}

const maxDepth = 200

// bail carries a parse error up through the recursive descent.
type bail struct{ err *Error }

func (p *parser) program() (prog *Program, err error) {
	defer func() {
		if r := recover(); r != nil {
			b, ok := r.(bail)
			if !ok {
				panic(r)
			}
			prog, err = nil, b.err
		}
	}()
	prog = &Program{}
	for p.peek().kind == tInclude {
		t := p.take()
		prog.Includes = append(prog.Includes, &Include{At: t.pos, Path: t.text[1 : len(t.text)-1], System: t.text[0] == '<'})
	}
	for p.peek().kind != tEOF {
		if p.peek().kind == tInclude {
			p.fail(p.peek().pos, "#include must come before the declarations")
		}
		prog.Decls = append(prog.Decls, p.topDecl())
	}
	return prog, nil
}

func (p *parser) peek() token        { return p.toks[p.i] }
func (p *parser) peekAt(n int) token { return p.toks[min(p.i+n, len(p.toks)-1)] }

func (p *parser) take() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) fail(at Pos, format string, args ...any) {
	panic(bail{&Error{File: p.file, Pos: at, Msg: sprintf(format, args...), Src: p.src}})
}

// is reports whether the next token is the punctuation or keyword s.
func (p *parser) is(s string) bool {
	t := p.peek()
	return (t.kind == tPunct || t.kind == tIdent) && t.text == s
}

func (p *parser) accept(s string) bool {
	if p.is(s) {
		p.take()
		return true
	}
	return false
}

func (p *parser) expect(s string) token {
	if !p.is(s) {
		p.fail(p.peek().pos, "expected %q, found %s", s, describe(p.peek()))
	}
	return p.take()
}

// ident takes a name that is not a keyword.
func (p *parser) ident(what string) (string, Pos) {
	t := p.peek()
	if t.kind != tIdent {
		p.fail(t.pos, "expected %s, found %s", what, describe(t))
	}
	if keywords[t.text] {
		p.fail(t.pos, "expected %s, found keyword %q", what, t.text)
	}
	p.take()
	return t.text, t.pos
}

func (p *parser) enter() {
	p.depth++
	if p.depth > maxDepth {
		p.fail(p.peek().pos, "nesting deeper than %d", maxDepth)
	}
}

func (p *parser) leave() { p.depth-- }

func (p *parser) annotations() []*Annotation {
	var as []*Annotation
	for p.is("@") {
		at := p.take().pos
		name, _ := p.anyName("an annotation name")
		a := &Annotation{At: at, Name: name}
		if p.is("(") && p.peek().pos.Offset == p.toks[p.i-1].pos.Offset+len(name) {
			p.take()
			a.HasArgs = true
			a.Args = p.exprList(")")
			p.expect(")")
		}
		as = append(as, a)
	}
	return as
}

// anyName takes an identifier, keywords included (annotation names and
// type names such as "bit").
func (p *parser) anyName(what string) (string, Pos) {
	t := p.peek()
	if t.kind != tIdent {
		p.fail(t.pos, "expected %s, found %s", what, describe(t))
	}
	p.take()
	return t.text, t.pos
}

func (p *parser) topDecl() Decl {
	annos := p.annotations()
	t := p.peek()
	if t.kind != tIdent {
		p.fail(t.pos, "expected a declaration, found %s", describe(t))
	}
	switch t.text {
	case "header", "struct":
		p.take()
		name, _ := p.ident("a type name")
		fields := p.fields()
		if t.text == "header" {
			return &HeaderDecl{At: t.pos, Annos: annos, Name: name, Fields: fields}
		}
		return &StructDecl{At: t.pos, Annos: annos, Name: name, Fields: fields}
	case "parser":
		return p.parserDecl(annos)
	case "control":
		return p.controlDecl(annos)
	case "const", "typedef", "type", "enum", "extern", "header_union", "match_kind", "error", "package":
		p.fail(t.pos, "%q declarations are not in the subset ffpf prints", t.text)
	}
	if keywords[t.text] && t.text != "bit" && t.text != "bool" && t.text != "varbit" {
		p.fail(t.pos, "expected a declaration, found keyword %q", t.text)
	}
	d := p.localDecl(annos, t.pos)
	if _, ok := d.(*Instance); !ok {
		p.fail(t.pos, "a variable at the top level is not in the subset: declare it in a control")
	}
	return d
}

func (p *parser) fields() []*FieldDecl {
	p.expect("{")
	var fs []*FieldDecl
	for !p.is("}") {
		annos := p.annotations()
		at := p.peek().pos
		ty := p.typeRef()
		name, _ := p.ident("a field name")
		p.expect(";")
		fs = append(fs, &FieldDecl{At: at, Annos: annos, Type: ty, Name: name})
	}
	p.take()
	return fs
}

// typeRef parses bit<W>, varbit<W>, bool, int, or Name[<TypeArgs>].
func (p *parser) typeRef() *TypeRef {
	t := p.peek()
	if t.kind != tIdent {
		p.fail(t.pos, "expected a type, found %s", describe(t))
	}
	switch t.text {
	case "bit", "varbit":
		p.take()
		ty := &TypeRef{At: t.pos, Name: t.text, Width: 1}
		if !p.accept("<") {
			if t.text == "varbit" {
				p.fail(p.peek().pos, "varbit needs a width: varbit<W>")
			}
			return ty // "bit" is bit<1>
		}
		w := p.peek()
		if w.kind != tInt || w.width != 0 {
			p.fail(w.pos, "expected the width of %s, found %s", t.text, describe(w))
		}
		if w.val < 1 || w.val > MaxWidth {
			p.fail(w.pos, "%s<%d>: a width of 1 to %d bits", t.text, w.val, MaxWidth)
		}
		p.take()
		ty.Width = int(w.val)
		p.expect(">")
		return ty
	case "bool", "int", "error", "packet_in", "packet_out":
		p.take()
		return &TypeRef{At: t.pos, Name: t.text}
	}
	name, at := p.ident("a type")
	ty := &TypeRef{At: at, Name: name}
	if p.is("<") {
		p.take()
		for {
			ty.Args = append(ty.Args, p.typeRef())
			if !p.accept(",") {
				break
			}
		}
		p.expect(">")
	}
	return ty
}

func (p *parser) params() []*Param {
	p.expect("(")
	var ps []*Param
	for !p.is(")") {
		if len(ps) > 0 {
			p.expect(",")
		}
		at := p.peek().pos
		dir := ""
		if p.is("in") || p.is("out") || p.is("inout") {
			dir = p.take().text
		}
		ty := p.typeRef()
		name, _ := p.ident("a parameter name")
		ps = append(ps, &Param{At: at, Dir: dir, Type: ty, Name: name})
	}
	p.take()
	return ps
}

func (p *parser) parserDecl(annos []*Annotation) *ParserDecl {
	at := p.expect("parser").pos
	name, _ := p.ident("a parser name")
	d := &ParserDecl{At: at, Annos: annos, Name: name, Params: p.params()}
	p.expect("{")
	for !p.is("}") {
		sa := p.annotations()
		if !p.is("state") {
			p.fail(p.peek().pos, "expected a parser state, found %s", describe(p.peek()))
		}
		d.States = append(d.States, p.state(sa))
	}
	p.take()
	return d
}

func (p *parser) state(annos []*Annotation) *State {
	at := p.expect("state").pos
	name, _ := p.ident("a state name")
	s := &State{At: at, Annos: annos, Name: name}
	p.expect("{")
	for !p.is("transition") && !p.is("}") {
		s.Stmts = append(s.Stmts, p.stmt())
	}
	if p.is("transition") {
		s.Trans = p.transition()
	}
	p.expect("}")
	return s
}

func (p *parser) transition() *Transition {
	at := p.expect("transition").pos
	tr := &Transition{At: at}
	if !p.is("select") {
		tr.Next, tr.NextAt = p.ident("a state name")
		p.expect(";")
		return tr
	}
	p.take()
	p.expect("(")
	tr.Select = p.exprList(")")
	p.expect(")")
	if len(tr.Select) == 0 {
		p.fail(at, "select needs an expression")
	}
	p.expect("{")
	for !p.is("}") {
		c := &SelectCase{At: p.peek().pos, Keys: p.keysets()}
		p.expect(":")
		c.Next, c.NextAt = p.ident("a state name")
		p.expect(";")
		tr.Cases = append(tr.Cases, c)
	}
	p.take()
	return tr
}

// keysets parses one keyset expression or a parenthesised tuple of them.
func (p *parser) keysets() []Expr {
	if !p.is("(") {
		return []Expr{p.keyset()}
	}
	// A parenthesised list of keysets, or one keyset that starts with a
	// parenthesised expression ("(a + b) &&& m"): try the list first.
	save := p.i
	p.take()
	var ks []Expr
	ok := func() (ok bool) {
		defer func() {
			if r := recover(); r != nil {
				if _, isBail := r.(bail); !isBail {
					panic(r)
				}
				ok = false
			}
		}()
		for {
			ks = append(ks, p.keyset())
			if !p.accept(",") {
				break
			}
		}
		p.expect(")")
		return !p.is("&&&") && !p.is("..") && p.is(":")
	}()
	if ok {
		return ks
	}
	p.i = save
	return []Expr{p.keyset()}
}

func (p *parser) keyset() Expr {
	t := p.peek()
	switch {
	case p.is("default"):
		p.take()
		return &DefaultExpr{At: t.pos}
	case t.kind == tIdent && t.text == "_":
		p.take()
		return &DontCare{At: t.pos}
	}
	v := p.expr()
	switch {
	case p.is("&&&"):
		at := p.take().pos
		return &MaskExpr{At: at, Value: v, Mask: p.expr()}
	case p.is(".."):
		at := p.take().pos
		return &RangeExpr{At: at, Lo: v, Hi: p.expr()}
	}
	return v
}

func (p *parser) controlDecl(annos []*Annotation) *ControlDecl {
	at := p.expect("control").pos
	name, _ := p.ident("a control name")
	d := &ControlDecl{At: at, Annos: annos, Name: name, Params: p.params()}
	p.expect("{")
	for !p.is("apply") {
		if p.is("}") || p.peek().kind == tEOF {
			p.fail(p.peek().pos, "control %s has no apply block", name)
		}
		la := p.annotations()
		lt := p.peek()
		switch {
		case p.is("action"):
			d.Locals = append(d.Locals, p.actionDecl(la))
		case p.is("table"):
			d.Locals = append(d.Locals, p.tableDecl(la))
		default:
			d.Locals = append(d.Locals, p.localDecl(la, lt.pos))
		}
	}
	p.take()
	d.Apply = p.block()
	p.expect("}")
	return d
}

// localDecl parses "Type(Args) Name;" or "Type Name [= Init];".
func (p *parser) localDecl(annos []*Annotation, at Pos) Decl {
	ty := p.typeRef()
	if p.is("(") {
		p.take()
		args := p.exprList(")")
		p.expect(")")
		name, _ := p.ident("an instance name")
		p.expect(";")
		return &Instance{At: at, Annos: annos, Type: ty, Args: args, Name: name}
	}
	name, _ := p.ident("a variable name")
	v := &VarDecl{At: at, Annos: annos, Type: ty, Name: name}
	if p.accept("=") {
		v.Init = p.expr()
	}
	p.expect(";")
	return v
}

func (p *parser) actionDecl(annos []*Annotation) *ActionDecl {
	at := p.expect("action").pos
	name, _ := p.ident("an action name")
	return &ActionDecl{At: at, Annos: annos, Name: name, Params: p.params(), Body: p.block()}
}

func (p *parser) tableDecl(annos []*Annotation) *TableDecl {
	at := p.expect("table").pos
	name, _ := p.ident("a table name")
	d := &TableDecl{At: at, Annos: annos, Name: name}
	p.expect("{")
	seen := map[string]bool{}
	for !p.is("}") {
		isConst := p.accept("const")
		pt := p.peek()
		prop, _ := p.anyName("a table property")
		if seen[prop] {
			p.fail(pt.pos, "table %s: property %s given twice", name, prop)
		}
		seen[prop] = true
		if isConst && prop != "entries" && prop != "default_action" {
			p.fail(pt.pos, "table %s: property %s cannot be const", name, prop)
		}
		p.expect("=")
		switch prop {
		case "key":
			d.HasKey = true
			p.expect("{")
			for !p.is("}") {
				k := &KeyElem{At: p.peek().pos, X: p.expr()}
				p.expect(":")
				k.Match, k.MatchAt = p.ident("a match kind")
				k.Annos = p.annotations()
				p.expect(";")
				d.Keys = append(d.Keys, k)
			}
			p.take()
		case "actions":
			p.expect("{")
			for !p.is("}") {
				aa := p.annotations()
				n, nat := p.ident("an action name")
				p.expect(";")
				d.Actions = append(d.Actions, &ActionRef{At: nat, Annos: aa, Name: n})
			}
			p.take()
		case "default_action":
			da := &DefaultAction{At: pt.pos, Const: isConst}
			da.Name, _ = p.ident("an action name")
			p.expect("(")
			da.Args = p.exprList(")")
			p.expect(")")
			p.expect(";")
			d.Default = da
		case "size":
			d.Size = p.expr()
			p.expect(";")
		case "entries":
			es := &Entries{At: pt.pos, Const: isConst}
			p.expect("{")
			for !p.is("}") {
				e := &Entry{At: p.peek().pos, Keys: p.keysets()}
				p.expect(":")
				e.Action, e.ActionAt = p.ident("an action name")
				p.expect("(")
				e.Args = p.exprList(")")
				p.expect(")")
				p.expect(";")
				es.List = append(es.List, e)
			}
			p.take()
			d.Entries = es
		default:
			p.fail(pt.pos, "table %s: property %q is not in the subset (key, actions, default_action, size, entries)", name, prop)
		}
	}
	p.take()
	return d
}

func (p *parser) block() *Block {
	at := p.expect("{").pos
	p.enter()
	defer p.leave()
	b := &Block{At: at}
	for !p.is("}") {
		if p.peek().kind == tEOF {
			p.fail(p.peek().pos, "block not closed: expected \"}\"")
		}
		b.Stmts = append(b.Stmts, p.stmt())
	}
	p.take()
	return b
}

func (p *parser) stmt() Stmt {
	t := p.peek()
	switch {
	case p.is("{"):
		return p.block()
	case p.is("if"):
		p.take()
		p.enter()
		defer p.leave()
		p.expect("(")
		s := &IfStmt{At: t.pos, Cond: p.expr()}
		p.expect(")")
		s.Then = p.stmt()
		if p.accept("else") {
			s.Else = p.stmt()
		}
		return s
	case p.is("bit") || p.is("varbit") || p.is("bool"),
		t.kind == tIdent && !keywords[t.text] && p.peekAt(1).kind == tIdent && !keywords[p.peekAt(1).text],
		t.kind == tIdent && !keywords[t.text] && p.peekAt(1).kind == tPunct && p.peekAt(1).text == "<" && p.declAhead():
		d := p.localDecl(nil, t.pos)
		v, ok := d.(*VarDecl)
		if !ok {
			p.fail(t.pos, "an instantiation belongs among a control's declarations, not in a block")
		}
		return v
	case t.kind == tIdent && keywords[t.text] && t.text != "true" && t.text != "false":
		p.fail(t.pos, "%q statements are not in the subset ffpf prints", t.text)
	}
	x := p.expr()
	if p.is("=") {
		at := p.take().pos
		s := &AssignStmt{At: at, Dst: x, X: p.expr()}
		p.expect(";")
		return s
	}
	c, ok := x.(*CallExpr)
	if !ok {
		p.fail(p.peek().pos, "expected \"=\" or a call, found %s", describe(p.peek()))
	}
	p.expect(";")
	return &CallStmt{Call: c}
}

// declAhead reports whether "Name <" starts a declaration of a variable
// of a specialised type ("T<bit<8>> x;") rather than a comparison.
func (p *parser) declAhead() (ok bool) {
	save := p.i
	defer func() {
		p.i = save
		if r := recover(); r != nil {
			if _, isBail := r.(bail); !isBail {
				panic(r)
			}
			ok = false
		}
	}()
	p.typeRef()
	return p.peek().kind == tIdent
}

// exprList parses expressions separated by "," up to (not including) end.
func (p *parser) exprList(end string) []Expr {
	var xs []Expr
	for !p.is(end) {
		if len(xs) > 0 {
			p.expect(",")
		}
		xs = append(xs, p.expr())
	}
	return xs
}

// Binary operators by precedence level, lowest first (the P4_16 grammar's
// %left declarations); "?:" is below them all.
var binLevels = [][]string{
	{"||"},
	{"&&"},
	{"==", "!="},
	{"<", ">", "<=", ">="},
	{"|"},
	{"^"},
	{"&"},
	{"<<", ">>"},
	{"++", "+", "-", "|+|", "|-|"},
	{"*", "/", "%"},
}

func (p *parser) expr() Expr {
	p.enter()
	defer p.leave()
	c := p.binary(0)
	if p.is("?") {
		at := p.take().pos
		then := p.expr()
		p.expect(":")
		return &CondExpr{At: at, Cond: c, Then: then, Else: p.expr()}
	}
	return c
}

// binOp returns the binary operator at the next token of level lv, and
// how many tokens it takes ("> >" side by side is one ">>").
func (p *parser) binOp(lv int) (string, int) {
	t := p.peek()
	if t.kind != tPunct {
		return "", 0
	}
	op := t.text
	n := 1
	if op == ">" {
		if u := p.peekAt(1); u.kind == tPunct && u.text == ">" && u.pos.Offset == t.pos.Offset+1 {
			op, n = ">>", 2
		}
	}
	for _, o := range binLevels[lv] {
		if o == op {
			return op, n
		}
	}
	return "", 0
}

func (p *parser) binary(lv int) Expr {
	if lv == len(binLevels) {
		return p.unary()
	}
	l := p.binary(lv + 1)
	for {
		op, n := p.binOp(lv)
		if op == "" {
			return l
		}
		at := p.peek().pos
		p.i += n
		p.enter()
		r := p.binary(lv + 1)
		p.leave()
		l = &BinaryExpr{At: at, Op: op, L: l, R: r}
	}
}

func (p *parser) unary() Expr {
	t := p.peek()
	if t.kind == tPunct {
		switch t.text {
		case "!", "~", "-":
			p.take()
			p.enter()
			defer p.leave()
			return &UnaryExpr{At: t.pos, Op: t.text, X: p.unary()}
		case "(":
			if u := p.peekAt(1); u.kind == tIdent && (u.text == "bit" || u.text == "bool" || u.text == "varbit" || u.text == "int") {
				p.take()
				ty := p.typeRef()
				p.expect(")")
				p.enter()
				defer p.leave()
				return &CastExpr{At: t.pos, Type: ty, X: p.unary()}
			}
		}
	}
	return p.postfix(p.primary())
}

func (p *parser) primary() Expr {
	t := p.peek()
	switch t.kind {
	case tInt:
		p.take()
		return &IntLit{At: t.pos, Width: t.width, Value: t.val, Base: t.base}
	case tString:
		p.take()
		return &StringLit{At: t.pos, Value: t.text}
	case tIdent:
		switch t.text {
		case "true", "false":
			p.take()
			return &BoolLit{At: t.pos, Value: t.text == "true"}
		}
		name, at := p.ident("an expression")
		return &Name{At: at, Name: name}
	case tPunct:
		switch t.text {
		case "(":
			p.take()
			x := p.expr()
			p.expect(")")
			return x
		case "{":
			p.take()
			l := &ListExpr{At: t.pos, Elems: p.exprList("}")}
			p.expect("}")
			return l
		}
	}
	p.fail(t.pos, "expected an expression, found %s", describe(t))
	return nil
}

func (p *parser) postfix(x Expr) Expr {
	for {
		t := p.peek()
		switch {
		case p.is("."):
			p.take()
			name, at := p.anyName("a member name")
			if keywords[name] && name != "apply" {
				p.fail(at, "expected a member name, found keyword %q", name)
			}
			x = &Member{X: x, Name: name, NameAt: at}
		case p.is("["):
			p.take()
			hi := p.expr()
			if !p.is(":") {
				p.fail(p.peek().pos, "header stacks and arrays are not in the subset: expected a slice [hi:lo]")
			}
			p.take()
			lo := p.expr()
			p.expect("]")
			x = &SliceExpr{At: t.pos, X: x, Hi: hi, Lo: lo}
		case p.is("("):
			p.take()
			args := p.exprList(")")
			p.expect(")")
			x = &CallExpr{At: t.pos, Fun: x, Args: args}
		case p.is("<") && isCallee(x) && p.typeArgsCall():
			p.take()
			var targs []*TypeRef
			for {
				targs = append(targs, p.typeRef())
				if !p.accept(",") {
					break
				}
			}
			p.expect(">")
			at := p.expect("(").pos
			args := p.exprList(")")
			p.expect(")")
			x = &CallExpr{At: at, Fun: x, TypeArgs: targs, Args: args}
		default:
			return x
		}
	}
}

func isCallee(x Expr) bool {
	_, ok := Path(x)
	return ok
}

// typeArgsCall reports whether "<" starts type arguments of a call
// ("digest<t>(...)") rather than a comparison.
func (p *parser) typeArgsCall() (ok bool) {
	save := p.i
	defer func() {
		p.i = save
		if r := recover(); r != nil {
			if _, isBail := r.(bail); !isBail {
				panic(r)
			}
			ok = false
		}
	}()
	p.take()
	for {
		p.typeRef()
		if !p.accept(",") {
			break
		}
	}
	p.expect(">")
	return p.is("(")
}

// IsKeyword reports whether s is a P4_16 keyword, which no name may be.
func IsKeyword(s string) bool { return keywords[s] }
