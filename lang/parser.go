package lang

import (
	"strconv"
	"unicode/utf8"
)

// Limits bound the work Parse does on hostile input. A zero or negative
// field takes its value from DefaultLimits.
type Limits struct {
	MaxBytes int // longest source accepted
	MaxDepth int // deepest nesting of "[ ]"
	MaxTerms int // most terms (functions, groups and references) in a request
}

// DefaultLimits are the limits Parse uses.
var DefaultLimits = Limits{MaxBytes: 1 << 20, MaxDepth: 64, MaxTerms: 100000}

// hardMaxDepth caps MaxDepth so that the recursive descent can never exhaust
// the stack, whatever the caller asks for.
const hardMaxDepth = 10000

// Parse parses a request with DefaultLimits. The error is an *Error.
func Parse(src string) (*Request, error) { return ParseWith(src, DefaultLimits) }

// ParseWith parses a request with the given limits. The error is an *Error.
func ParseWith(src string, lim Limits) (*Request, error) {
	if lim.MaxBytes <= 0 {
		lim.MaxBytes = DefaultLimits.MaxBytes
	}
	if lim.MaxDepth <= 0 {
		lim.MaxDepth = DefaultLimits.MaxDepth
	}
	if lim.MaxDepth > hardMaxDepth {
		lim.MaxDepth = hardMaxDepth
	}
	if lim.MaxTerms <= 0 {
		lim.MaxTerms = DefaultLimits.MaxTerms
	}
	p := &parser{lx: lexer{src: src, line: 1, col: 1}, lim: lim}
	if len(src) > lim.MaxBytes {
		// Src is left empty: a caret under a megabyte line helps no one.
		return nil, &Error{Pos: Pos{Line: 1, Col: 1}, Msg: "expression is longer than " + strconv.Itoa(lim.MaxBytes) + " bytes"}
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
		return nil, &Error{Pos: posAt(src, off), Msg: "invalid UTF-8 encoding", Src: src}
	}
	r, err := p.request()
	if err != nil {
		return nil, err
	}
	return r, nil
}

type parser struct {
	lx    lexer
	tok   token
	lim   Limits
	depth int
	terms int
}

func (p *parser) advance() *Error {
	t, err := p.lx.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

func (p *parser) errorf(pos Pos, format string, args ...any) *Error {
	return p.lx.errorf(pos, format, args...)
}

func (p *parser) found(format string, args ...any) *Error {
	return p.errorf(p.tok.pos, format+", found %s", append(args, describe(p.tok))...)
}

func (p *parser) request() (*Request, *Error) {
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind == tEOF {
		return nil, p.errorf(Pos{Line: 1, Col: 1}, "empty expression")
	}
	r := &Request{src: p.lx.src}
	for {
		c, err := p.chain()
		if err != nil {
			return nil, err
		}
		r.Chains = append(r.Chains, c)
		switch p.tok.kind {
		case tSemi:
			if err := p.advance(); err != nil {
				return nil, err
			}
			if p.tok.kind == tEOF {
				return r, nil
			}
		case tEOF:
			return r, nil
		case tRParen, tRBrack:
			return nil, p.errorf(p.tok.pos, "unexpected %s", describe(p.tok))
		case tPipe:
			return nil, p.errorf(p.tok.pos, `unexpected "|" outside a group`)
		default:
			return nil, p.found(`expected ">" or ";" after a term`)
		}
	}
}

func (p *parser) chain() (*Chain, *Error) {
	c := &Chain{Pos: p.tok.pos}
	for {
		t, err := p.term()
		if err != nil {
			return nil, err
		}
		c.Terms = append(c.Terms, t)
		if p.tok.kind != tGt {
			return c, nil
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
}

func (p *parser) term() (Term, *Error) {
	p.terms++
	if p.terms > p.lim.MaxTerms {
		return nil, p.errorf(p.tok.pos, "too many terms (the limit is %d)", p.lim.MaxTerms)
	}
	switch p.tok.kind {
	case tLParen:
		return p.fn("", Pos{})
	case tLBrack:
		return p.group("", Pos{})
	case tWord:
		name := p.tok
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind != tColon {
			return &Ref{Pos: name.pos, Name: name.text}, nil
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		switch p.tok.kind {
		case tLParen:
			return p.fn(name.text, name.pos)
		case tLBrack:
			return p.group(name.text, name.pos)
		}
		return nil, p.found(`expected a function "(" or a group "[" after label %q`, name.text+":")
	}
	return nil, p.found(`expected a function "(", a group "[" or a label`)
}

func (p *parser) fn(label string, labelPos Pos) (*Func, *Error) {
	f := &Func{Pos: p.tok.pos, Label: label, LabelPos: labelPos}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind != tWord {
		return nil, p.found(`expected a class name after "("`)
	}
	f.Class, f.ClassPos = p.tok.text, p.tok.pos
	if err := p.advance(); err != nil {
		return nil, err
	}
	for {
		switch p.tok.kind {
		case tRParen:
			return f, p.advance()
		case tComma:
			if err := p.advance(); err != nil {
				return nil, err
			}
			a, err := p.arg()
			if err != nil {
				return nil, err
			}
			f.Args = append(f.Args, a)
		case tEOF:
			return nil, p.errorf(p.tok.pos, `missing ")" to close the function opened at %s`, f.Pos)
		default:
			return nil, p.found(`expected "," or ")" in the function opened at %s`, f.Pos)
		}
	}
}

func isValue(k tokKind) bool { return k == tWord || k == tString || k == tNumber }

func valueOf(t token) Value {
	v := Value{Pos: t.pos, Raw: t.raw, Text: t.text, Unit: t.unit}
	switch t.kind {
	case tString:
		v.Kind = String
	case tNumber:
		v.Kind = Number
	}
	return v
}

func (p *parser) arg() (*Arg, *Error) {
	if !isValue(p.tok.kind) {
		return nil, p.found(`expected a parameter after ","`)
	}
	first := p.tok
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind != tEq {
		return &Arg{Pos: first.pos, Value: valueOf(first)}, nil
	}
	if first.kind != tWord {
		return nil, p.errorf(first.pos, "a parameter name must be a word, found %s", describe(first))
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if !isValue(p.tok.kind) {
		return nil, p.found(`expected a value after "%s="`, first.text)
	}
	v := p.tok
	if err := p.advance(); err != nil {
		return nil, err
	}
	if v.kind != tString && p.tok.kind == tColon && p.tok.pos.Offset == v.pos.Offset+len(v.raw) {
		var err *Error
		if v, err = p.colonWord(v); err != nil {
			return nil, err
		}
	}
	return &Arg{Pos: first.pos, Key: first.text, KeyPos: first.pos, Value: valueOf(v)}, nil
}

// colonWord joins a value and the colons and words written against it into
// one word, so that addresses read unquoted as a user writes them:
// to=127.0.0.1:40040, addr=fe80::1. A colon elsewhere still ends a label.
func (p *parser) colonWord(v token) (token, *Error) {
	end := v.pos.Offset + len(v.raw)
	for p.tok.pos.Offset == end && (p.tok.kind == tColon || p.tok.kind == tWord || p.tok.kind == tNumber) {
		end += len(p.tok.raw)
		if err := p.advance(); err != nil {
			return token{}, err
		}
	}
	raw := p.lx.src[v.pos.Offset:end]
	return token{kind: tWord, pos: v.pos, raw: raw, text: raw}, nil
}

func (p *parser) group(label string, labelPos Pos) (*Group, *Error) {
	g := &Group{Pos: p.tok.pos, Label: label, LabelPos: labelPos}
	p.depth++
	if p.depth > p.lim.MaxDepth {
		return nil, p.errorf(g.Pos, "groups are nested too deeply (the limit is %d)", p.lim.MaxDepth)
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind == tRBrack {
		return nil, p.errorf(g.Pos, "empty group")
	}
	for {
		if p.tok.kind == tPipe || p.tok.kind == tRBrack {
			return nil, p.errorf(p.tok.pos, "empty alternative in the group opened at %s", g.Pos)
		}
		c, err := p.chain()
		if err != nil {
			return nil, err
		}
		g.Chains = append(g.Chains, c)
		switch p.tok.kind {
		case tPipe:
			if err := p.advance(); err != nil {
				return nil, err
			}
		case tRBrack:
			p.depth--
			return g, p.advance()
		case tEOF:
			return nil, p.errorf(p.tok.pos, `missing "]" to close the group opened at %s`, g.Pos)
		default:
			return nil, p.found(`expected "|" or "]" in the group opened at %s`, g.Pos)
		}
	}
}
