package mafia

import (
	"strconv"
	"strings"
)

// Format prints a program in its canonical form: one statement a line, a
// flow's steps joined by " >> " and branches by " + ", expressions with
// the parentheses their precedence needs and no others (but a nested
// composition of the same kind keeps its own, so that it parses back to
// the same tree). Parsing the result gives a program Equal to p.
func Format(p *Program) string {
	var b strings.Builder
	for _, s := range p.Stmts {
		formatStmt(&b, s)
		b.WriteByte('\n')
	}
	return b.String()
}

func formatStmt(b *strings.Builder, s Stmt) {
	switch s := s.(type) {
	case *Decl:
		b.WriteString(s.Name)
		b.WriteString(" = ")
		switch in := s.Init.(type) {
		case *StateInit:
			formatState(b, in)
		case *Const:
			formatExpr(b, in.Value, 0)
		}
	case *Window:
		b.WriteString("window(")
		formatExpr(b, s.Dur, 0)
		b.WriteByte(')')
	case *Section:
		b.WriteString("at ")
		b.WriteString(s.Role)
		b.WriteByte(':')
	case *Flow:
		b.WriteString(s.Stream)
		if s.Window != nil {
			b.WriteString(".window(")
			formatExpr(b, s.Window, 0)
			b.WriteByte(')')
		}
		b.WriteString(" >> ")
		formatComp(b, s.Body, 0)
	}
}

func formatState(b *strings.Builder, s *StateInit) {
	b.WriteString(s.Type)
	b.WriteByte('(')
	for i, f := range s.Fields {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f.Name())
	}
	for i, a := range s.Args {
		if i > 0 || len(s.Fields) > 0 {
			b.WriteString(", ")
		}
		b.WriteString(a.Name)
		b.WriteByte('=')
		if si, ok := a.Value.(*StateInit); ok {
			formatState(b, si)
		} else {
			formatExpr(b, a.Value, 0)
		}
	}
	b.WriteByte(')')
}

// Composition levels: a Par is looser than a Seq, which is looser than an
// Op. ctx is the level of the place c is printed in: 0 anywhere, 1 a
// branch of a Par, 2 a step of a Seq.
func formatComp(b *strings.Builder, c Comp, ctx int) {
	switch c := c.(type) {
	case *Par:
		if ctx >= 1 {
			b.WriteByte('(')
		}
		for i, x := range c.Branches {
			if i > 0 {
				b.WriteString(" + ")
			}
			formatComp(b, x, 1)
		}
		if ctx >= 1 {
			b.WriteByte(')')
		}
	case *Seq:
		if ctx >= 2 {
			b.WriteByte('(')
		}
		for i, x := range c.Steps {
			if i > 0 {
				b.WriteString(" >> ")
			}
			formatComp(b, x, 2)
		}
		if ctx >= 2 {
			b.WriteByte(')')
		}
	case *Op:
		b.WriteString(c.describe())
		b.WriteByte('(')
		for i, a := range c.Args {
			if i > 0 {
				b.WriteString(", ")
			}
			formatExpr(b, a, 0)
		}
		b.WriteByte(')')
	}
}

// Expression precedence, loosest first (parser.go's grammar).
const (
	pOr = iota + 1
	pAnd
	pNot
	pCmp
	pBor
	pBand
	pSum
	pProd
	pNeg
	pAtom
)

var binPrec = map[string]int{"||": pOr, "&&": pAnd, "==": pCmp, "!=": pCmp, "<": pCmp, "<=": pCmp,
	">": pCmp, ">=": pCmp, "|": pBor, "&": pBand, "+": pSum, "-": pSum, "*": pProd, "/": pProd, "%": pProd}

func precOf(e Expr) int {
	switch e := e.(type) {
	case *Binary:
		return binPrec[e.Op]
	case *Unary:
		if e.Op == "!" {
			return pNot
		}
		return pNeg
	}
	return pAtom
}

// formatExpr prints e where an expression of precedence at least min is
// expected, in parentheses when its own is lower.
func formatExpr(b *strings.Builder, e Expr, min int) {
	paren := precOf(e) < min
	if paren {
		b.WriteByte('(')
	}
	switch e := e.(type) {
	case *Num:
		b.WriteString(e.Text)
		b.WriteString(e.Unit)
	case *Str:
		b.WriteString(strconv.Quote(e.Text))
	case *Ident:
		b.WriteString(e.Name)
	case *Field:
		b.WriteString(e.Name())
	case *Call:
		if e.Target != "" {
			b.WriteString(e.Target)
			b.WriteByte('.')
		}
		b.WriteString(e.Name)
		b.WriteByte('(')
		for i, a := range e.Args {
			if i > 0 {
				b.WriteString(", ")
			}
			formatExpr(b, a, 0)
		}
		b.WriteByte(')')
	case *Range:
		b.WriteByte('[')
		formatExpr(b, e.Lo, 0)
		b.WriteByte(':')
		formatExpr(b, e.Hi, 0)
		b.WriteByte(']')
	case *Unary:
		b.WriteString(e.Op)
		if e.Op == "!" {
			formatExpr(b, e.X, pNot)
		} else {
			formatExpr(b, e.X, pNeg)
		}
	case *Binary:
		p := binPrec[e.Op]
		left, right := p, p+1 // left-associative
		if p == pCmp {
			left = p + 1 // comparisons do not chain
		}
		formatExpr(b, e.X, left)
		b.WriteByte(' ')
		b.WriteString(e.Op)
		b.WriteByte(' ')
		formatExpr(b, e.Y, right)
	case *StateInit:
		formatState(b, e)
	}
	if paren {
		b.WriteByte(')')
	}
}

// Equal reports whether two programs are the same, ignoring positions.
func Equal(a, b *Program) bool {
	if a == nil || b == nil {
		return a == b
	}
	return Format(a) == Format(b) && dump(a) == dump(b)
}

// dump prints the tree's structure with every node explicit, so that two
// programs that print alike but differ in their trees (which Format's
// parentheses should make impossible) do not compare equal.
func dump(p *Program) string {
	var b strings.Builder
	for _, s := range p.Stmts {
		switch s := s.(type) {
		case *Flow:
			b.WriteString("flow " + s.Stream + " ")
			if s.Window != nil {
				dumpExpr(&b, s.Window)
			}
			dumpComp(&b, s.Body)
		default:
			formatStmt(&b, s)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func dumpComp(b *strings.Builder, c Comp) {
	switch c := c.(type) {
	case *Par:
		b.WriteString("(par")
		for _, x := range c.Branches {
			b.WriteByte(' ')
			dumpComp(b, x)
		}
		b.WriteByte(')')
	case *Seq:
		b.WriteString("(seq")
		for _, x := range c.Steps {
			b.WriteByte(' ')
			dumpComp(b, x)
		}
		b.WriteByte(')')
	case *Op:
		b.WriteString("(op " + c.describe())
		for _, a := range c.Args {
			b.WriteByte(' ')
			dumpExpr(b, a)
		}
		b.WriteByte(')')
	}
}

func dumpExpr(b *strings.Builder, e Expr) {
	switch e := e.(type) {
	case *Binary:
		b.WriteString("(" + e.Op + " ")
		dumpExpr(b, e.X)
		b.WriteByte(' ')
		dumpExpr(b, e.Y)
		b.WriteByte(')')
	case *Unary:
		b.WriteString("(" + e.Op + " ")
		dumpExpr(b, e.X)
		b.WriteByte(')')
	case *Call:
		b.WriteString("(call " + e.Target + "." + e.Name)
		for _, a := range e.Args {
			b.WriteByte(' ')
			dumpExpr(b, a)
		}
		b.WriteByte(')')
	case *Range:
		b.WriteString("(range ")
		dumpExpr(b, e.Lo)
		b.WriteByte(' ')
		dumpExpr(b, e.Hi)
		b.WriteByte(')')
	default:
		formatExpr(b, e, 0)
	}
}
