package lang

import (
	"strconv"
	"strings"
)

// Format prints the canonical form of a request: chains joined by "; ",
// terms by " > ", groups as "[a | b]", functions as "(class,key=value,...)"
// with the class lowercased (unless that would make it a number, as "-5H"
// would), labels as "label:". Parsing the result gives a
// request Equal to r, provided r's names (labels, classes, keys) are words,
// as they are in any parsed request.
func Format(r *Request) string {
	if r == nil {
		return ""
	}
	var b strings.Builder
	formatChains(&b, r.Chains, "; ")
	return b.String()
}

func formatChains(b *strings.Builder, cs []*Chain, sep string) {
	for i, c := range cs {
		if i > 0 {
			b.WriteString(sep)
		}
		if c == nil {
			continue
		}
		for j, t := range c.Terms {
			if j > 0 {
				b.WriteString(" > ")
			}
			formatTerm(b, t)
		}
	}
}

func formatTerm(b *strings.Builder, t Term) {
	switch t := t.(type) {
	case *Func:
		if t == nil {
			return
		}
		writeLabel(b, t.Label)
		b.WriteByte('(')
		b.WriteString(canonicalClass(t.Class))
		for _, a := range t.Args {
			if a == nil {
				continue
			}
			b.WriteByte(',')
			if a.Key != "" {
				b.WriteString(a.Key)
				b.WriteByte('=')
			}
			b.WriteString(a.Value.String())
		}
		b.WriteByte(')')
	case *Group:
		if t == nil {
			return
		}
		writeLabel(b, t.Label)
		b.WriteByte('[')
		formatChains(b, t.Chains, " | ")
		b.WriteByte(']')
	case *Ref:
		if t == nil {
			return
		}
		b.WriteString(t.Name)
	}
}

// canonicalClass lowercases a class name unless that would stop it lexing as
// a word: "-67H" is a word, but "-67h" is a number (67 hours).
func canonicalClass(c string) string {
	if l := strings.ToLower(c); isWord(l) {
		return l
	}
	return c
}

func writeLabel(b *strings.Builder, label string) {
	if label != "" {
		b.WriteString(label)
		b.WriteByte(':')
	}
}

// String returns the value's canonical text, as Format prints it: a word
// as-is unless it would not lex back as the same word (then it is quoted),
// a string quoted with strconv.Quote, a number as digits and unit.
func (v Value) String() string {
	switch v.Kind {
	case Number:
		s := v.Text + v.Unit
		if text, unit, ok := splitNumber(s); ok && text == v.Text && unit == v.Unit {
			return s
		}
		return strconv.Quote(s)
	case String:
		return strconv.Quote(v.Text)
	}
	if isWord(v.Text) {
		return v.Text
	}
	return strconv.Quote(v.Text)
}
