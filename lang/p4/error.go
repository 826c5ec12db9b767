package p4

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ffpf-go/ffpf/lang"
)

// Pos is a position in a P4 source: byte offset, line and column (1-based,
// in runes), as the expression language's.
type Pos = lang.Pos

// Error is a positioned error in a P4 source file.
type Error struct {
	File string // "" when the source has no name
	Pos  Pos
	Msg  string
	Src  string // the whole source, for Caret
}

// Error returns "file:line:col: message" ("line:col: message" without a
// file name).
func (e *Error) Error() string {
	s := strconv.Itoa(e.Pos.Line) + ":" + strconv.Itoa(e.Pos.Col) + ": " + e.Msg
	if e.File != "" {
		s = e.File + ":" + s
	}
	return s
}

// Caret returns the offending line and a caret under the column, as
// lang.Error's Caret does ("" when Src lacks the position).
func (e *Error) Caret() string {
	return (&lang.Error{Pos: e.Pos, Msg: e.Msg, Src: e.Src}).Caret()
}

// ErrorList is the errors Check found, in source order.
type ErrorList []*Error

// Error returns the first error and how many more there are.
func (l ErrorList) Error() string {
	switch len(l) {
	case 0:
		return "no errors"
	case 1:
		return l[0].Error()
	}
	return fmt.Sprintf("%s (and %d more errors)", l[0].Error(), len(l)-1)
}

// Format returns every error with its caret, one after the other.
func (l ErrorList) Format() string {
	var b strings.Builder
	for _, e := range l {
		b.WriteString(e.Error())
		b.WriteByte('\n')
		if c := e.Caret(); c != "" {
			b.WriteString("  ")
			b.WriteString(strings.ReplaceAll(c, "\n", "\n  "))
			b.WriteByte('\n')
		}
	}
	return b.String()
}
