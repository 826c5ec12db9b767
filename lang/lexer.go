package lang

import (
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"
)

type tokKind uint8

const (
	tEOF tokKind = iota
	tLParen
	tRParen
	tLBrack
	tRBrack
	tPipe
	tGt
	tSemi
	tComma
	tEq
	tColon
	tWord
	tString
	tNumber
)

type token struct {
	kind tokKind
	pos  Pos
	raw  string // source text
	text string // word, unquoted string, or number digits
	unit string // number unit
}

var punct = [128]tokKind{
	'(': tLParen, ')': tRParen, '[': tLBrack, ']': tRBrack, '|': tPipe,
	'>': tGt, ';': tSemi, ',': tComma, '=': tEq, ':': tColon,
}

// asciiWord marks the ASCII bytes that may appear in a word: printable, not
// a delimiter, and not '#', which always starts a comment outside strings.
var asciiWord = func() (t [128]bool) {
	for c := 0x21; c < 0x7f; c++ {
		t[c] = true
	}
	for _, c := range `,()[]|>;=":#` {
		t[c] = false
	}
	return t
}()

// isSpace includes U+FEFF so that a byte-order mark is not part of a word.
func isSpace(r rune) bool { return unicode.IsSpace(r) || r == '\uFEFF' }

func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return asciiWord[r]
	}
	return !isSpace(r) && !unicode.IsControl(r)
}

// isWord reports whether s lexes back as exactly one word with text s.
func isWord(s string) bool {
	if s == "" || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !isWordRune(r) {
			return false
		}
	}
	_, _, num := splitNumber(s)
	return !num
}

// splitNumber splits "-?digits[.digits][unit]" into digits and unit.
func splitNumber(s string) (text, unit string, ok bool) {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	d := i
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	if i == d {
		return "", "", false
	}
	if i < len(s) && s[i] == '.' {
		j := i + 1
		for j < len(s) && '0' <= s[j] && s[j] <= '9' {
			j++
		}
		if j == i+1 {
			return "", "", false
		}
		i = j
	}
	switch s[i:] {
	case "", "ns", "us", "ms", "s", "m", "h", "B", "KB", "MB", "GB", "K", "M", "G":
		return s[:i], s[i:], true
	}
	return "", "", false
}

// lexer produces tokens on demand; the source must be valid UTF-8.
type lexer struct {
	src  string
	off  int
	line int
	col  int
}

func (l *lexer) pos() Pos { return Pos{Offset: l.off, Line: l.line, Col: l.col} }

func (l *lexer) errorf(p Pos, format string, args ...any) *Error {
	return &Error{Pos: p, Msg: fmt.Sprintf(format, args...), Src: l.src}
}

func (l *lexer) skipSpace() {
	for l.off < len(l.src) {
		c := l.src[l.off]
		switch {
		case c == '\n':
			l.off++
			l.line++
			l.col = 1
		case c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f':
			l.off++
			l.col++
		case c == '#':
			for l.off < len(l.src) && l.src[l.off] != '\n' {
				if !utf8.RuneStart(l.src[l.off]) {
					l.col--
				}
				l.off++
				l.col++
			}
		case c < utf8.RuneSelf:
			return
		default:
			r, n := utf8.DecodeRuneInString(l.src[l.off:])
			if !isSpace(r) {
				return
			}
			l.off += n
			l.col++
		}
	}
}

func (l *lexer) next() (token, *Error) {
	l.skipSpace()
	p := l.pos()
	if l.off >= len(l.src) {
		return token{kind: tEOF, pos: p}, nil
	}
	c := l.src[l.off]
	if c < utf8.RuneSelf && punct[c] != 0 {
		l.off++
		l.col++
		return token{kind: punct[c], pos: p, raw: l.src[p.Offset:l.off]}, nil
	}
	if c == '"' {
		return l.str(p)
	}
	for l.off < len(l.src) {
		c := l.src[l.off]
		if c < utf8.RuneSelf {
			if !asciiWord[c] {
				break
			}
			l.off++
		} else {
			r, n := utf8.DecodeRuneInString(l.src[l.off:])
			if !isWordRune(r) {
				break
			}
			l.off += n
		}
		l.col++
	}
	if l.off == p.Offset {
		r, _ := utf8.DecodeRuneInString(l.src[l.off:])
		return token{}, l.errorf(p, "invalid character %U", r)
	}
	raw := l.src[p.Offset:l.off]
	if text, unit, ok := splitNumber(raw); ok {
		return token{kind: tNumber, pos: p, raw: raw, text: text, unit: unit}, nil
	}
	return token{kind: tWord, pos: p, raw: raw, text: raw}, nil
}

// str lexes a double-quoted string with Go escapes (strconv.Unquote
// semantics); like Go, a string cannot span lines.
func (l *lexer) str(p Pos) (token, *Error) {
	i := p.Offset + 1
	esc := false
	for {
		if i >= len(l.src) || l.src[i] == '\n' {
			return token{}, l.errorf(p, "unterminated string")
		}
		c := l.src[i]
		if c == '"' {
			break
		}
		if c == '\\' {
			esc = true
			if i+1 >= len(l.src) || l.src[i+1] == '\n' {
				return token{}, l.errorf(p, "unterminated string")
			}
			i += 2
			continue
		}
		i++
	}
	raw := l.src[p.Offset : i+1]
	body := raw[1 : len(raw)-1]
	text := body
	if esc {
		buf := make([]byte, 0, len(body))
		for s := body; len(s) > 0; {
			r, multibyte, tail, err := strconv.UnquoteChar(s, '"')
			if err != nil {
				at := len(body) - len(s)
				ep := p
				ep.Offset += 1 + at
				ep.Col += 1 + utf8.RuneCountInString(body[:at])
				bad := s[:1]
				if len(s) > 1 {
					_, n := utf8.DecodeRuneInString(s[1:])
					bad = s[:1+n]
				}
				return token{}, l.errorf(ep, "invalid escape sequence %s in string", bad)
			}
			if r < utf8.RuneSelf || !multibyte {
				buf = append(buf, byte(r))
			} else {
				buf = utf8.AppendRune(buf, r)
			}
			s = tail
		}
		text = string(buf)
	}
	l.off = i + 1
	l.col += utf8.RuneCountInString(raw)
	return token{kind: tString, pos: p, raw: raw, text: text}, nil
}
