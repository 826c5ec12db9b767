package p4

import (
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ffpf-go/ffpf/lang"
)

type tokKind uint8

const (
	tEOF     tokKind = iota
	tIdent           // identifiers and keywords
	tInt             // integer literal
	tString          // string literal
	tPunct           // operator or delimiter
	tInclude         // #include <...> or "..."
)

type token struct {
	kind tokKind
	pos  Pos
	text string // the source text; a string literal's unquoted value
	// an integer literal: width (0 unsized), value, base
	width int
	val   uint64
	base  int
}

// puncts are the operators and delimiters, longest first so that the
// lexer takes the longest match. ">>" is not one: two ">" tokens side by
// side are a shift where an expression is parsed, and close two type
// argument lists where a type is (register<bit<32>>).
var puncts = []string{
	"&&&", "|+|", "|-|",
	"&&", "||", "==", "!=", "<=", ">=", "<<", "..", "++",
	"{", "}", "(", ")", "[", "]", ";", ":", ",", ".", "=", "<", ">",
	"!", "~", "&", "|", "^", "+", "-", "*", "/", "%", "?", "@",
}

// MaxWidth is the widest varbit<W> the subset parses; bit<W> values and
// literals have at most 64 bits.
const MaxWidth = 1 << 16

// lexer turns a source into tokens, all at once.
type lexer struct {
	src  string
	file string
	off  int
	line int
	col  int
	toks []token
}

func lex(file, src string) ([]token, error) {
	l := &lexer{src: src, file: file, line: 1, col: 1}
	for {
		t, err := l.next()
		if err != nil {
			return nil, err
		}
		l.toks = append(l.toks, t)
		if t.kind == tEOF {
			return l.toks, nil
		}
	}
}

func (l *lexer) pos() Pos { return Pos{Offset: l.off, Line: l.line, Col: l.col} }

func (l *lexer) errAt(p Pos, format string, args ...any) error {
	return &Error{File: l.file, Pos: p, Msg: sprintf(format, args...), Src: l.src}
}

// advance moves past n bytes, counting lines and columns.
func (l *lexer) advance(n int) {
	for _, r := range l.src[l.off : l.off+n] {
		if r == '\n' {
			l.line++
			l.col = 1
		} else {
			l.col++
		}
	}
	l.off += n
}

func isLetter(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

func (l *lexer) next() (token, error) {
	// white space and comments
	for l.off < len(l.src) {
		c := l.src[l.off]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			l.advance(1)
		case strings.HasPrefix(l.src[l.off:], "//"):
			i := strings.IndexByte(l.src[l.off:], '\n')
			if i < 0 {
				i = len(l.src) - l.off
			}
			l.advance(i)
		case strings.HasPrefix(l.src[l.off:], "/*"):
			p := l.pos()
			i := strings.Index(l.src[l.off+2:], "*/")
			if i < 0 {
				return token{}, l.errAt(p, "comment not terminated")
			}
			l.advance(i + 4)
		default:
			goto tok
		}
	}
tok:
	p := l.pos()
	if l.off >= len(l.src) {
		return token{kind: tEOF, pos: p}, nil
	}
	c := l.src[l.off]
	switch {
	case c == '#':
		return l.directive()
	case isLetter(c):
		n := 1
		for l.off+n < len(l.src) && (isLetter(l.src[l.off+n]) || isDigit(l.src[l.off+n])) {
			n++
		}
		t := token{kind: tIdent, pos: p, text: l.src[l.off : l.off+n]}
		l.advance(n)
		return t, nil
	case isDigit(c):
		return l.number()
	case c == '"':
		return l.str()
	}
	for _, s := range puncts {
		if strings.HasPrefix(l.src[l.off:], s) {
			l.advance(len(s))
			return token{kind: tPunct, pos: p, text: s}, nil
		}
	}
	r, _ := utf8.DecodeRuneInString(l.src[l.off:])
	if r == utf8.RuneError {
		return token{}, l.errAt(p, "invalid UTF-8")
	}
	return token{}, l.errAt(p, "unexpected character %q", r)
}

// directive lexes "#include <file>" (or "file"); the subset has no other
// preprocessor directive.
func (l *lexer) directive() (token, error) {
	p := l.pos()
	end := strings.IndexByte(l.src[l.off:], '\n')
	if end < 0 {
		end = len(l.src) - l.off
	}
	line := strings.TrimRight(l.src[l.off:l.off+end], " \t\r")
	rest, ok := strings.CutPrefix(line, "#include")
	if !ok {
		return token{}, l.errAt(p, "unsupported preprocessor directive %q: only #include is", shorten(line))
	}
	rest = strings.TrimLeft(rest, " \t")
	if len(rest) < 3 || !(rest[0] == '<' && rest[len(rest)-1] == '>' || rest[0] == '"' && rest[len(rest)-1] == '"') {
		return token{}, l.errAt(p, "#include needs <file> or \"file\"")
	}
	t := token{kind: tInclude, pos: p, text: rest}
	l.advance(len(line))
	return t, nil
}

// number lexes an integer literal: [width (w|s)] (0x|0b|0o|0d)? digits,
// with underscores between digits.
func (l *lexer) number() (token, error) {
	p := l.pos()
	n := 0
	for l.off+n < len(l.src) && (isLetter(l.src[l.off+n]) || isDigit(l.src[l.off+n])) {
		n++
	}
	raw := l.src[l.off : l.off+n]
	t := token{kind: tInt, pos: p, text: raw, base: 10}
	body := raw
	if i := strings.IndexAny(raw, "ws"); i > 0 && allDigits(raw[:i]) && !strings.HasPrefix(raw, "0x") && !strings.HasPrefix(raw, "0X") {
		if raw[i] == 's' {
			return token{}, l.errAt(p, "signed literal %s: the subset has no int<W>", raw)
		}
		w, err := strconv.Atoi(raw[:i])
		if err != nil || w < 1 || w > 64 {
			return token{}, l.errAt(p, "literal %s: a width of 1 to 64 bits", raw)
		}
		t.width = w
		body = raw[i+1:]
	}
	digits := body
	if len(body) > 2 && body[0] == '0' {
		switch body[1] {
		case 'x', 'X':
			t.base, digits = 16, body[2:]
		case 'b', 'B':
			t.base, digits = 2, body[2:]
		case 'o', 'O':
			t.base, digits = 8, body[2:]
		case 'd', 'D':
			t.base, digits = 10, body[2:]
		}
	}
	clean := strings.ReplaceAll(digits, "_", "")
	if clean == "" || strings.HasPrefix(digits, "_") {
		return token{}, l.errAt(p, "malformed integer %s", raw)
	}
	v, err := strconv.ParseUint(clean, t.base, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return token{}, l.errAt(p, "integer %s does not fit 64 bits", raw)
		}
		return token{}, l.errAt(p, "malformed integer %s", raw)
	}
	if t.width > 0 && t.width < 64 && bits.Len64(v) > t.width {
		return token{}, l.errAt(p, "%s does not fit bit<%d>", raw, t.width)
	}
	t.val = v
	l.advance(n)
	return t, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

func (l *lexer) str() (token, error) {
	p := l.pos()
	i := 1
	for l.off+i < len(l.src) {
		switch l.src[l.off+i] {
		case '\\':
			i += 2
			continue
		case '\n':
			return token{}, l.errAt(p, "string not terminated")
		case '"':
			raw := l.src[l.off : l.off+i+1]
			v, err := strconv.Unquote(raw)
			if err != nil {
				return token{}, l.errAt(p, "malformed string %s", shorten(raw))
			}
			l.advance(i + 1)
			return token{kind: tString, pos: p, text: v}, nil
		}
		i++
	}
	return token{}, l.errAt(p, "string not terminated")
}

// describe names a token for "found X" in messages.
func describe(t token) string {
	switch t.kind {
	case tEOF:
		return "end of file"
	case tString:
		return "string " + strconv.Quote(shorten(t.text))
	case tInclude:
		return "#include"
	}
	return strconv.Quote(shorten(t.text))
}

func shorten(s string) string { return lang.Shorten(s, 32) }
