package lang

import (
	"strconv"
	"strings"
)

// Pos is a position in the source: byte offset (0-based), line and column
// (1-based; the column counts runes, so a tab is one column).
type Pos struct{ Offset, Line, Col int }

// String returns "line:col".
func (p Pos) String() string { return strconv.Itoa(p.Line) + ":" + strconv.Itoa(p.Col) }

// Request is one expression: chains separated by ";". Labels are shared by
// all chains of a request, which is how a DAG that is not a tree is written.
type Request struct {
	Chains []*Chain

	src string // kept so that Check can attach carets to its errors
}

// Chain is terms joined by ">": every output of a term feeds every input of
// the next.
type Chain struct {
	Pos   Pos
	Terms []Term
}

// Term is *Func, *Group or *Ref.
type Term interface {
	TermPos() Pos
	term()
}

// Func is one function: a class and its arguments.
type Func struct {
	Pos      Pos    // of "("
	Label    string // "" when unlabelled
	LabelPos Pos
	Class    string // as written; class names are case-insensitive
	ClassPos Pos
	Args     []*Arg
}

// Group is "[a | b]": its inputs are the inputs of all alternatives, its
// outputs the outputs of all alternatives.
type Group struct {
	Pos      Pos // of "["
	Label    string
	LabelPos Pos
	Chains   []*Chain // the alternatives separated by "|"
}

// Ref is a bare label referring to a labelled term of the same request.
type Ref struct {
	Pos  Pos
	Name string
}

func (f *Func) TermPos() Pos  { return f.Pos }
func (g *Group) TermPos() Pos { return g.Pos }
func (r *Ref) TermPos() Pos   { return r.Pos }

func (*Func) term()  {}
func (*Group) term() {}
func (*Ref) term()   {}

// Arg is "key=value", or a bare value (Key == "") that binds to the class's
// first parameter.
type Arg struct {
	Pos    Pos
	Key    string // "" for a bare (positional) value
	KeyPos Pos
	Value  Value
}

// ValueKind says how a value was written.
type ValueKind int

const (
	Word ValueKind = iota
	String
	Number
)

func (k ValueKind) String() string {
	switch k {
	case Word:
		return "word"
	case String:
		return "string"
	case Number:
		return "number"
	}
	return "ValueKind(" + strconv.Itoa(int(k)) + ")"
}

// Value is an argument value.
type Value struct {
	Pos  Pos
	Kind ValueKind
	Raw  string // exactly as written in the source (with quotes for strings)
	Text string // Word: the word; String: the unquoted content; Number: the digits as written, e.g. "64", "1.5", "-3"
	Unit string // Number only: "" or one of ns us ms s m h B KB MB GB K M G
}

// Equal reports whether two requests are the same expression, ignoring
// positions and Raw. Class names compare case-insensitively (as the language
// defines them), and a Word equals a String with the same Text: quoting is
// notation, which is what lets Format quote a word that would not re-lex.
func Equal(a, b *Request) bool {
	if a == nil || b == nil {
		return a == b
	}
	return chainsEqual(a.Chains, b.Chains)
}

func chainsEqual(a, b []*Chain) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x == nil || y == nil {
			if x != y {
				return false
			}
			continue
		}
		if len(x.Terms) != len(y.Terms) {
			return false
		}
		for j := range x.Terms {
			if !termEqual(x.Terms[j], y.Terms[j]) {
				return false
			}
		}
	}
	return true
}

func termEqual(a, b Term) bool {
	switch x := a.(type) {
	case *Func:
		y, ok := b.(*Func)
		if !ok || x == nil || y == nil {
			return ok && x == y
		}
		if x.Label != y.Label || strings.ToLower(x.Class) != strings.ToLower(y.Class) || len(x.Args) != len(y.Args) {
			return false
		}
		for i := range x.Args {
			p, q := x.Args[i], y.Args[i]
			if p == nil || q == nil {
				if p != q {
					return false
				}
				continue
			}
			if p.Key != q.Key || !p.Value.Equal(q.Value) {
				return false
			}
		}
		return true
	case *Group:
		y, ok := b.(*Group)
		if !ok || x == nil || y == nil {
			return ok && x == y
		}
		return x.Label == y.Label && chainsEqual(x.Chains, y.Chains)
	case *Ref:
		y, ok := b.(*Ref)
		if !ok || x == nil || y == nil {
			return ok && x == y
		}
		return x.Name == y.Name
	}
	return a == nil && b == nil
}

// Equal reports whether two values mean the same, ignoring Pos and Raw
// (a Word and a String with the same Text are equal).
func (v Value) Equal(w Value) bool {
	if v.Kind == Number || w.Kind == Number {
		return v.Kind == w.Kind && v.Text == w.Text && v.Unit == w.Unit
	}
	return v.Text == w.Text
}
