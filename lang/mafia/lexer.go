package mafia

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

type tokKind uint8

const (
	tEOF tokKind = iota
	tIdent
	tNumber
	tString
	tPunct // Text is the operator or delimiter
)

type token struct {
	kind tokKind
	pos  Pos
	text string // ident, punct, string content, number digits
	unit string // number unit
	raw  string // as written
}

// units are the suffixes a number may carry: times, sizes, multipliers.
var units = map[string]bool{"ns": true, "us": true, "ms": true, "s": true, "m": true, "h": true,
	"B": true, "KB": true, "MB": true, "GB": true, "K": true, "M": true, "G": true}

// twoByte are the operators of two characters; the lexer takes the
// longest match.
var twoByte = []string{">>", "==", "!=", "<=", ">=", "&&", "||"}

const oneByte = "()[],.=;:+-*/%&|!<>"

type lexer struct {
	src       string
	off       int
	line, col int
}

func (l *lexer) pos() Pos { return Pos{Offset: l.off, Line: l.line, Col: l.col} }

// advance moves over n bytes of the current line (no newline among them).
func (l *lexer) advance(n int) {
	l.col += utf8.RuneCountInString(l.src[l.off : l.off+n])
	l.off += n
}

func (l *lexer) errorf(p Pos, format string, args ...any) error {
	return errorf(l.src, p, format, args...)
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

// next returns the next token, skipping white space and comments (// to
// the end of the line).
func (l *lexer) next() (token, error) {
	for l.off < len(l.src) {
		c := l.src[l.off]
		switch {
		case c == '\n':
			l.off++
			l.line++
			l.col = 1
			continue
		case c == ' ' || c == '\t' || c == '\r':
			l.advance(1)
			continue
		case c == '/' && strings.HasPrefix(l.src[l.off:], "//"):
			end := strings.IndexByte(l.src[l.off:], '\n')
			if end < 0 {
				end = len(l.src) - l.off
			}
			l.advance(end)
			continue
		case strings.HasPrefix(l.src[l.off:], "\uFEFF"):
			l.advance(3)
			continue
		}
		break
	}
	p := l.pos()
	if l.off >= len(l.src) {
		return token{kind: tEOF, pos: p}, nil
	}
	rest := l.src[l.off:]
	c := rest[0]
	switch {
	case isLetter(c):
		n := 1
		for n < len(rest) && (isLetter(rest[n]) || isDigit(rest[n])) {
			n++
		}
		l.advance(n)
		return token{kind: tIdent, pos: p, text: rest[:n], raw: rest[:n]}, nil
	case isDigit(c):
		return l.number(p)
	case c == '"':
		return l.goString(p)
	case strings.HasPrefix(rest, "“") || strings.HasPrefix(rest, "”"):
		return l.curlyString(p)
	}
	for _, op := range twoByte {
		if strings.HasPrefix(rest, op) {
			l.advance(2)
			return token{kind: tPunct, pos: p, text: op, raw: op}, nil
		}
	}
	if strings.IndexByte(oneByte, c) >= 0 {
		l.advance(1)
		return token{kind: tPunct, pos: p, text: rest[:1], raw: rest[:1]}, nil
	}
	r, _ := utf8.DecodeRuneInString(rest)
	return token{}, l.errorf(p, "unexpected character %q", r)
}

// number lexes digits[.digits] or 0xHEX, then an optional unit.
func (l *lexer) number(p Pos) (token, error) {
	rest := l.src[l.off:]
	n := 0
	if len(rest) > 1 && rest[0] == '0' && (rest[1] == 'x' || rest[1] == 'X') {
		n = 2
		for n < len(rest) && strings.IndexByte("0123456789abcdefABCDEF", rest[n]) >= 0 {
			n++
		}
		if n == 2 {
			return token{}, l.errorf(p, "%s is not a hexadecimal number", rest[:2])
		}
	} else {
		for n < len(rest) && isDigit(rest[n]) {
			n++
		}
		if n+1 < len(rest) && rest[n] == '.' && isDigit(rest[n+1]) {
			n++
			for n < len(rest) && isDigit(rest[n]) {
				n++
			}
		}
	}
	digits := rest[:n]
	u := n
	for u < len(rest) && (isLetter(rest[u]) || isDigit(rest[u])) {
		u++
	}
	unit := rest[n:u]
	if unit != "" && !units[unit] {
		return token{}, l.errorf(p, "%s has an unknown unit %q (ns us ms s, B KB MB GB, K M G)", rest[:u], unit)
	}
	if unit != "" && n > 2 && (digits[1] == 'x' || digits[1] == 'X') {
		return token{}, l.errorf(p, "a hexadecimal number takes no unit: %s", rest[:u])
	}
	l.advance(u)
	return token{kind: tNumber, pos: p, text: digits, unit: unit, raw: rest[:u]}, nil
}

// goString lexes a double-quoted string with Go's escapes.
func (l *lexer) goString(p Pos) (token, error) {
	rest := l.src[l.off:]
	for i := 1; i < len(rest); i++ {
		switch rest[i] {
		case '\\':
			i++
		case '\n':
			return token{}, l.errorf(p, "the string is not closed on its line")
		case '"':
			s, err := strconv.Unquote(rest[:i+1])
			if err != nil {
				return token{}, l.errorf(p, "bad string %s: %v", shorten(rest[:i+1]), err)
			}
			l.advance(i + 1)
			return token{kind: tString, pos: p, text: s, raw: rest[:i+1]}, nil
		}
	}
	return token{}, l.errorf(p, "the string is not closed")
}

// curlyString lexes a string in the paper's quotes, “…” or ”…”, without
// escapes, so that a program copied from the paper reads as written.
func (l *lexer) curlyString(p Pos) (token, error) {
	rest := l.src[l.off:]
	_, open := utf8.DecodeRuneInString(rest)
	body := rest[open:]
	for i, r := range body {
		switch r {
		case '\n':
			return token{}, l.errorf(p, "the string is not closed on its line")
		case '”', '“':
			l.advance(open + i + len("”"))
			return token{kind: tString, pos: p, text: body[:i], raw: rest[:open+i+len("”")]}, nil
		}
	}
	return token{}, l.errorf(p, "the string is not closed")
}

// describe names a token for "found X" in messages.
func describe(t token) string {
	switch t.kind {
	case tEOF:
		return "the end of the program"
	case tString:
		return "string " + shorten(t.raw)
	case tNumber:
		return "number " + shorten(t.raw)
	}
	return strconv.Quote(shorten(t.raw))
}

func shorten(s string) string {
	const max = 24
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	n := 0
	for i := range s {
		if n == max {
			return s[:i] + "…"
		}
		n++
	}
	return s
}
