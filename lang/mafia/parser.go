package mafia

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ffpf-go/ffpf/lang"
)

// MaxBytes bounds a program's source (a file is bounded by
// functions.ReadFile before it gets here); MaxDepth bounds the nesting of
// compositions and expressions, so that no input exhausts the stack.
const (
	MaxBytes = 1 << 20
	MaxDepth = 50
)

// errorf returns a positioned error (a *lang.Error, with its caret) about
// src.
func errorf(src string, p Pos, format string, args ...any) *lang.Error {
	return &lang.Error{Pos: p, Msg: fmt.Sprintf(format, args...), Src: src}
}

// stateTypes are the declarations of state, by their lowercased names
// (the paper writes Key and key).
var stateTypes = map[string]string{"key": "Key", "counter": "Counter", "timestamp": "Timestamp",
	"hashmap": "HashMap", "sketch": "Sketch", "bloomfilter": "BloomFilter"}

// primitives are the operations that are not methods of a state variable.
var primitives = map[string]bool{"match": true, "tag": true, "timestamp": true, "duplicate": true, "collect": true}

type parser struct {
	src   string
	toks  []token
	at    int
	depth int
}

// Parse parses a MAFIA program. The error is a *lang.Error with the
// position of the first problem and its source line.
func Parse(src string) (*Program, error) {
	if len(src) > MaxBytes {
		return nil, &lang.Error{Pos: Pos{Line: 1, Col: 1}, Msg: "the program is longer than " + strconv.Itoa(MaxBytes) + " bytes"}
	}
	if !utf8.ValidString(src) {
		off := 0
		for off < len(src) {
			r, n := utf8.DecodeRuneInString(src[off:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			off += n
		}
		return nil, errorf(src, posAt(src, off), "invalid UTF-8 encoding")
	}
	lx := &lexer{src: src, line: 1, col: 1}
	p := &parser{src: src}
	for {
		t, err := lx.next()
		if err != nil {
			return nil, err
		}
		p.toks = append(p.toks, t)
		if t.kind == tEOF {
			break
		}
	}
	prog := &Program{src: src}
	for p.peek().kind != tEOF {
		if p.isPunct(";") {
			p.next()
			continue
		}
		s, err := p.statement()
		if err != nil {
			return nil, err
		}
		prog.Stmts = append(prog.Stmts, s)
	}
	return prog, nil
}

// posAt is the position of byte offset off in src.
func posAt(src string, off int) Pos {
	p := Pos{Offset: off, Line: 1, Col: 1}
	for _, r := range src[:off] {
		if r == '\n' {
			p.Line++
			p.Col = 1
		} else {
			p.Col++
		}
	}
	return p
}

func (p *parser) peek() token { return p.toks[p.at] }
func (p *parser) peekAt(k int) token {
	if p.at+k < len(p.toks) {
		return p.toks[p.at+k]
	}
	return p.toks[len(p.toks)-1]
}
func (p *parser) next() token {
	t := p.toks[p.at]
	if t.kind != tEOF {
		p.at++
	}
	return t
}

func (p *parser) isPunct(s string) bool {
	t := p.peek()
	return t.kind == tPunct && t.text == s
}

func (p *parser) errorf(at Pos, format string, args ...any) error {
	return errorf(p.src, at, format, args...)
}

// expect consumes the punctuation s or fails naming what it was for.
func (p *parser) expect(s, what string) (token, error) {
	t := p.peek()
	if t.kind != tPunct || t.text != s {
		return t, p.errorf(t.pos, "%q expected %s, found %s", s, what, describe(t))
	}
	return p.next(), nil
}

func (p *parser) ident(what string) (token, error) {
	t := p.peek()
	if t.kind != tIdent {
		return t, p.errorf(t.pos, "%s expected, found %s", what, describe(t))
	}
	return p.next(), nil
}

func (p *parser) enter(at Pos) error {
	p.depth++
	if p.depth > MaxDepth {
		return p.errorf(at, "nested more than %d deep", MaxDepth)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// statement parses one statement: NAME = INIT, window(D), at ROLE:, or a
// flow STREAM [.window(D)] >> COMP.
func (p *parser) statement() (Stmt, error) {
	t := p.peek()
	if t.kind != tIdent {
		return nil, p.errorf(t.pos, "a statement starts with a name: a declaration (name = ...), a flow (pkts >> ...), window(...) or at ROLE:; found %s", describe(t))
	}
	n1 := p.peekAt(1)
	switch {
	case n1.kind == tPunct && n1.text == "=":
		return p.decl()
	case t.text == "window" && n1.kind == tPunct && n1.text == "(":
		p.next()
		d, err := p.parenDuration("window")
		if err != nil {
			return nil, err
		}
		return &Window{Pos: t.pos, Dur: d}, nil
	case t.text == "at" && n1.kind == tIdent:
		p.next()
		role := p.next()
		if _, err := p.expect(":", "after at "+role.text); err != nil {
			return nil, err
		}
		return &Section{Pos: t.pos, Role: role.text}, nil
	case n1.kind == tPunct && (n1.text == ">>" || n1.text == "."):
		return p.flow()
	}
	if n1.kind == tPunct && n1.text == "(" {
		return nil, p.errorf(t.pos, "%s(...) is a step of a flow: write it after a stream, as in pkts >> %s(...)", t.text, t.text)
	}
	return nil, p.errorf(n1.pos, "after %q a declaration has \"=\" and a flow \">>\"; found %s", t.text, describe(n1))
}

func (p *parser) decl() (Stmt, error) {
	name := p.next()
	p.next() // =
	t := p.peek()
	switch {
	case t.kind == tIdent && stateTypes[strings.ToLower(t.text)] != "" && p.peekAt(1).kind == tPunct && p.peekAt(1).text == "(":
		si, err := p.stateInit()
		if err != nil {
			return nil, err
		}
		return &Decl{Pos: name.pos, Name: name.text, Init: si}, nil
	case t.kind == tNumber:
		p.next()
		return &Decl{Pos: name.pos, Name: name.text, Init: &Const{Value: &Num{Pos: t.pos, Text: t.text, Unit: t.unit}}}, nil
	case t.kind == tString:
		p.next()
		return &Decl{Pos: name.pos, Name: name.text, Init: &Const{Value: &Str{Pos: t.pos, Text: t.text}}}, nil
	case t.kind == tIdent:
		if s, ok := lang.Suggest(t.text, []string{"Key", "Counter", "Timestamp", "HashMap", "Sketch", "BloomFilter"}); ok {
			return nil, p.errorf(t.pos, "unknown declaration %s (did you mean %s?)", t.text, s)
		}
	}
	return nil, p.errorf(t.pos, "%s = needs a state (Key, Counter, Timestamp, HashMap, Sketch, BloomFilter), a number or a string; found %s", name.text, describe(t))
}

// stateInit parses TYPE(ARGS): Key's are fields, the others' name=value.
func (p *parser) stateInit() (*StateInit, error) {
	t := p.next()
	if err := p.enter(t.pos); err != nil {
		return nil, err
	}
	defer p.leave()
	si := &StateInit{Pos: t.pos, Type: t.text}
	p.next() // (
	key := strings.EqualFold(t.text, "key")
	for !p.isPunct(")") {
		if len(si.Fields)+len(si.Args) > 0 {
			if _, err := p.expect(",", "between the arguments of "+t.text); err != nil {
				return nil, err
			}
		}
		if key {
			f, err := p.fieldName()
			if err != nil {
				return nil, err
			}
			si.Fields = append(si.Fields, f)
			continue
		}
		n, err := p.ident("a parameter name (name=value)")
		if err != nil {
			return nil, err
		}
		if _, err := p.expect("=", "after the parameter "+n.text); err != nil {
			return nil, err
		}
		v := p.peek()
		var val Expr
		switch {
		case v.kind == tNumber:
			p.next()
			val = &Num{Pos: v.pos, Text: v.text, Unit: v.unit}
		case v.kind == tString:
			p.next()
			val = &Str{Pos: v.pos, Text: v.text}
		case v.kind == tIdent && p.peekAt(1).kind == tPunct && p.peekAt(1).text == "(":
			val, err = p.stateInit()
			if err != nil {
				return nil, err
			}
		case v.kind == tIdent:
			p.next()
			val = &Ident{Pos: v.pos, Name: v.text}
		default:
			return nil, p.errorf(v.pos, "the value of %s expected, found %s", n.text, describe(v))
		}
		si.Args = append(si.Args, &KwArg{Pos: n.pos, Name: n.text, Value: val})
	}
	p.next() // )
	return si, nil
}

// fieldName parses a dotted name (a field of a key).
func (p *parser) fieldName() (*Field, error) {
	t, err := p.ident("a packet field (ip.src, tcp.dst, pkt.input_port …)")
	if err != nil {
		return nil, err
	}
	f := &Field{Pos: t.pos, Path: []string{t.text}}
	for p.isPunct(".") {
		p.next()
		n, err := p.ident("a field name after \".\"")
		if err != nil {
			return nil, err
		}
		f.Path = append(f.Path, n.text)
	}
	return f, nil
}

// parenDuration parses "(D)" after window: a number or a constant's name.
func (p *parser) parenDuration(what string) (Expr, error) {
	if _, err := p.expect("(", "after "+what); err != nil {
		return nil, err
	}
	t := p.next()
	var d Expr
	switch t.kind {
	case tNumber:
		d = &Num{Pos: t.pos, Text: t.text, Unit: t.unit}
	case tIdent:
		d = &Ident{Pos: t.pos, Name: t.text}
	default:
		return nil, p.errorf(t.pos, "%s takes a duration (10ms, 5s) or a constant's name, found %s", what, describe(t))
	}
	if _, err := p.expect(")", "to close "+what+"("); err != nil {
		return nil, err
	}
	return d, nil
}

func (p *parser) flow() (Stmt, error) {
	s := p.next()
	f := &Flow{Pos: s.pos, Stream: s.text}
	if p.isPunct(".") {
		p.next()
		w, err := p.ident("window after " + s.text + ".")
		if err != nil {
			return nil, err
		}
		if w.text != "window" {
			return nil, p.errorf(w.pos, "a stream has one method, window(DURATION): %s.%s", s.text, w.text)
		}
		if f.Window, err = p.parenDuration(s.text + ".window"); err != nil {
			return nil, err
		}
	}
	if _, err := p.expect(">>", "after the stream "+s.text); err != nil {
		return nil, err
	}
	body, err := p.comp()
	if err != nil {
		return nil, err
	}
	f.Body = body
	return f, nil
}

// comp parses SEQ { + SEQ }.
func (p *parser) comp() (Comp, error) {
	at := p.peek().pos
	if err := p.enter(at); err != nil {
		return nil, err
	}
	defer p.leave()
	first, err := p.seq()
	if err != nil {
		return nil, err
	}
	if !p.isPunct("+") {
		return first, nil
	}
	par := &Par{Pos: at, Branches: []Comp{first}}
	for p.isPunct("+") {
		p.next()
		s, err := p.seq()
		if err != nil {
			return nil, err
		}
		par.Branches = append(par.Branches, s)
	}
	return par, nil
}

// seq parses STEP { >> STEP }.
func (p *parser) seq() (Comp, error) {
	at := p.peek().pos
	first, err := p.step()
	if err != nil {
		return nil, err
	}
	if !p.isPunct(">>") {
		return first, nil
	}
	s := &Seq{Pos: at, Steps: []Comp{first}}
	for p.isPunct(">>") {
		p.next()
		st, err := p.step()
		if err != nil {
			return nil, err
		}
		s.Steps = append(s.Steps, st)
	}
	return s, nil
}

// step parses ( COMP ) or one operation.
func (p *parser) step() (Comp, error) {
	t := p.peek()
	if t.kind == tPunct && t.text == "(" {
		p.next()
		c, err := p.comp()
		if err != nil {
			return nil, err
		}
		if _, err := p.expect(")", "to close the ( at "+t.pos.String()); err != nil {
			return nil, err
		}
		return c, nil
	}
	if t.kind != tIdent {
		return nil, p.errorf(t.pos, "a step expected (match(...), tag(...), timestamp(...), duplicate(...), collect(...) or STATE.METHOD(...)), found %s", describe(t))
	}
	p.next()
	op := &Op{Pos: t.pos, Name: t.text}
	if p.isPunct(".") {
		p.next()
		m, err := p.ident("a method after " + t.text + ".")
		if err != nil {
			return nil, err
		}
		op.Target, op.Name = t.text, m.text
	} else if !primitives[t.text] {
		if s, ok := lang.Suggest(t.text, []string{"match", "tag", "timestamp", "duplicate", "collect"}); ok {
			return nil, p.errorf(t.pos, "unknown step %s (did you mean %s?)", t.text, s)
		}
		return nil, p.errorf(t.pos, "unknown step %s: a step is match, tag, timestamp, duplicate, collect or STATE.METHOD(...)", t.text)
	}
	args, err := p.args("(", ")", op.describe())
	if err != nil {
		return nil, err
	}
	op.Args = args
	return op, nil
}

// describe names the op for messages: "match", "hh.insert".
func (o *Op) describe() string {
	if o.Target != "" {
		return o.Target + "." + o.Name
	}
	return o.Name
}

// args parses OPEN [ EXPR { , EXPR } ] CLOSE.
func (p *parser) args(open, close, what string) ([]Expr, error) {
	if _, err := p.expect(open, "after "+what); err != nil {
		return nil, err
	}
	var out []Expr
	for !p.isPunct(close) {
		if len(out) > 0 {
			if t := p.peek(); t.kind != tPunct || t.text != "," {
				return nil, p.errorf(t.pos, "\",\" or %q expected after an argument of %s, found %s", close, what, describe(t))
			}
			p.next()
		}
		e, err := p.expr()
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	p.next()
	return out, nil
}

// Expressions, loosest binding first (as Python's, in which MAFIA is
// embedded: a comparison binds looser than | and &):
//
//	or   = and { ("||" | "or") and }
//	and  = not { ("&&" | "and") not }
//	not  = ("!" | "not") not | cmp
//	cmp  = bor [ ("==" | "!=" | "<" | "<=" | ">" | ">=") bor ]
//	bor  = band { "|" band }
//	band = sum { "&" sum }
//	sum  = prod { ("+" | "-") prod }
//	prod = unary { ("*" | "/" | "%") unary }
//	unary = "-" unary | primary
func (p *parser) expr() (Expr, error) {
	at := p.peek().pos
	if err := p.enter(at); err != nil {
		return nil, err
	}
	defer p.leave()
	return p.or()
}

// binaryLevel parses sub { OP sub } for the operators of one level.
func (p *parser) binaryLevel(sub func() (Expr, error), ops map[string]string) (Expr, error) {
	x, err := sub()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		op, ok := ops[t.text]
		if !ok || t.kind == tString || t.kind == tNumber {
			return x, nil
		}
		p.next()
		y, err := sub()
		if err != nil {
			return nil, err
		}
		x = &Binary{Pos: t.pos, Op: op, X: x, Y: y}
	}
}

func (p *parser) or() (Expr, error) {
	return p.binaryLevel(p.and, map[string]string{"||": "||", "or": "||"})
}

func (p *parser) and() (Expr, error) {
	return p.binaryLevel(p.not, map[string]string{"&&": "&&", "and": "&&"})
}

func (p *parser) not() (Expr, error) {
	if t := p.peek(); (t.kind == tPunct && t.text == "!") || (t.kind == tIdent && t.text == "not") {
		p.next()
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		defer p.leave()
		x, err := p.not()
		if err != nil {
			return nil, err
		}
		return &Unary{Pos: t.pos, Op: "!", X: x}, nil
	}
	return p.cmp()
}

var cmpOps = map[string]string{"==": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}

func (p *parser) cmp() (Expr, error) {
	x, err := p.bor()
	if err != nil {
		return nil, err
	}
	t := p.peek()
	op, ok := cmpOps[t.text]
	if !ok || t.kind != tPunct {
		return x, nil
	}
	p.next()
	y, err := p.bor()
	if err != nil {
		return nil, err
	}
	if u := p.peek(); u.kind == tPunct && cmpOps[u.text] != "" {
		return nil, p.errorf(u.pos, "comparisons do not chain: write a < b && b < c")
	}
	return &Binary{Pos: t.pos, Op: op, X: x, Y: y}, nil
}

func (p *parser) bor() (Expr, error)  { return p.binaryLevel(p.band, map[string]string{"|": "|"}) }
func (p *parser) band() (Expr, error) { return p.binaryLevel(p.sum, map[string]string{"&": "&"}) }
func (p *parser) sum() (Expr, error) {
	return p.binaryLevel(p.prod, map[string]string{"+": "+", "-": "-"})
}
func (p *parser) prod() (Expr, error) {
	return p.binaryLevel(p.unary, map[string]string{"*": "*", "/": "/", "%": "%"})
}

func (p *parser) unary() (Expr, error) {
	t := p.peek()
	if t.kind == tPunct && t.text == "-" {
		p.next()
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		defer p.leave()
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &Unary{Pos: t.pos, Op: "-", X: x}, nil
	}
	return p.primary()
}

func (p *parser) primary() (Expr, error) {
	t := p.next()
	switch t.kind {
	case tNumber:
		return &Num{Pos: t.pos, Text: t.text, Unit: t.unit}, nil
	case tString:
		return &Str{Pos: t.pos, Text: t.text}, nil
	case tIdent:
		if t.text == "not" || t.text == "and" || t.text == "or" {
			return nil, p.errorf(t.pos, "a value expected, found %q", t.text)
		}
		path := []string{t.text}
		for p.isPunct(".") {
			p.next()
			n, err := p.ident("a name after \".\"")
			if err != nil {
				return nil, err
			}
			path = append(path, n.text)
		}
		if p.isPunct("(") {
			if len(path) > 2 {
				return nil, p.errorf(t.pos, "%s(...) is not a call: a method is STATE.METHOD(...)", strings.Join(path, "."))
			}
			c := &Call{Pos: t.pos, Name: path[len(path)-1]}
			if len(path) == 2 {
				c.Target = path[0]
			}
			args, err := p.args("(", ")", strings.Join(path, "."))
			if err != nil {
				return nil, err
			}
			c.Args = args
			return c, nil
		}
		if len(path) == 1 {
			return &Ident{Pos: t.pos, Name: t.text}, nil
		}
		return &Field{Pos: t.pos, Path: path}, nil
	case tPunct:
		switch t.text {
		case "(":
			x, err := p.expr()
			if err != nil {
				return nil, err
			}
			if _, err := p.expect(")", "to close the ( at "+t.pos.String()); err != nil {
				return nil, err
			}
			return x, nil
		case "[":
			lo, err := p.expr()
			if err != nil {
				return nil, err
			}
			if _, err := p.expect(":", "in a range [LO:HI]"); err != nil {
				return nil, err
			}
			hi, err := p.expr()
			if err != nil {
				return nil, err
			}
			if _, err := p.expect("]", "to close the range at "+t.pos.String()); err != nil {
				return nil, err
			}
			return &Range{Pos: t.pos, Lo: lo, Hi: hi}, nil
		}
	}
	return nil, p.errorf(t.pos, "a value expected, found %s", describe(t))
}
