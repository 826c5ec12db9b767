package lang

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Error is a positioned error. Src is the whole source, kept for Caret.
type Error struct {
	Pos Pos
	Msg string
	Src string
}

// Error returns "line:col: message".
func (e *Error) Error() string {
	return strconv.Itoa(e.Pos.Line) + ":" + strconv.Itoa(e.Pos.Col) + ": " + e.Msg
}

// Caret returns the offending source line, a newline, and a line with a
// caret under Pos.Col; tabs before the column are repeated so the caret lines
// up in a terminal. It returns "" when Src does not contain Pos (for example
// an error about a request that was built, not parsed). There is no trailing
// newline.
func (e *Error) Caret() string {
	if e.Pos.Line < 1 || e.Pos.Col < 1 || e.Src == "" {
		return ""
	}
	rest := e.Src
	for l := 1; l < e.Pos.Line; l++ {
		i := strings.IndexByte(rest, '\n')
		if i < 0 {
			return ""
		}
		rest = rest[i+1:]
	}
	line := rest
	if i := strings.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	line = strings.TrimSuffix(line, "\r")
	line = strings.ToValidUTF8(line, "\uFFFD")

	var b strings.Builder
	b.Grow(2*len(line) + 2)
	b.WriteString(line)
	b.WriteByte('\n')
	col := 1
	for _, r := range line {
		if col >= e.Pos.Col {
			break
		}
		if r == '\t' {
			b.WriteByte('\t')
		} else {
			b.WriteByte(' ')
		}
		col++
	}
	for ; col < e.Pos.Col; col++ {
		b.WriteByte(' ')
	}
	b.WriteByte('^')
	return b.String()
}

// posAt computes the position of byte offset off by scanning src; used only
// on error paths that have no running position (bad UTF-8).
func posAt(src string, off int) Pos { return PosAt(src, off) }

// PosAt returns the position of byte offset off of src (counted by
// scanning it: for error paths).
func PosAt(src string, off int) Pos {
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

// describe names a token for "found X" in messages.
func describe(t token) string {
	switch t.kind {
	case tEOF:
		return "end of input"
	case tWord:
		return strconv.Quote(shorten(t.raw))
	case tString:
		return "string " + shorten(t.raw)
	case tNumber:
		return "number " + shorten(t.raw)
	}
	return `"` + t.raw + `"`
}

func shorten(s string) string { return Shorten(s, 24) }

// Shorten cuts s to max runes and an ellipsis, for quoting input in
// messages.
func Shorten(s string, max int) string {
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
