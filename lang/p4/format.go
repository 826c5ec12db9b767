package p4

import (
	"bytes"
	"strconv"
	"strings"
)

// Format prints a program in canonical form: four-space indents, one
// declaration, property or statement a line, a blank line between
// top-level declarations, parser states, and a control's actions and
// tables, integer literals in the base they were written in, and the
// fewest parentheses that keep the tree (a conditional expression inside
// another expression is always parenthesised). Parsing the output and
// printing it again gives the same bytes.
func Format(prog *Program) []byte {
	f := &formatter{}
	for _, in := range prog.Includes {
		if in.System {
			f.line("#include <" + in.Path + ">")
		} else {
			f.line("#include " + strconv.Quote(in.Path))
		}
	}
	for i, d := range prog.Decls {
		if i > 0 || len(prog.Includes) > 0 {
			f.blank()
		}
		f.decl(d)
	}
	return f.buf.Bytes()
}

// Lines counts the lines of a P4 source that are not blank: the lines of
// P4 of MAFIA's Table II.
func Lines(src []byte) int {
	n := 0
	for _, l := range bytes.Split(src, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			n++
		}
	}
	return n
}

type formatter struct {
	buf    bytes.Buffer
	indent int
}

func (f *formatter) line(s string) {
	for range f.indent {
		f.buf.WriteString("    ")
	}
	f.buf.WriteString(s)
	f.buf.WriteByte('\n')
}

func (f *formatter) blank() { f.buf.WriteByte('\n') }

func annos(as []*Annotation) string {
	var b strings.Builder
	for _, a := range as {
		b.WriteString("@" + a.Name)
		if a.HasArgs {
			b.WriteString("(" + exprs(a.Args) + ")")
		}
		b.WriteByte(' ')
	}
	return b.String()
}

// TypeString prints a type reference.
func TypeString(t *TypeRef) string {
	switch t.Name {
	case "bit", "varbit":
		return t.Name + "<" + strconv.Itoa(t.Width) + ">"
	}
	if len(t.Args) == 0 {
		return t.Name
	}
	args := make([]string, len(t.Args))
	for i, a := range t.Args {
		args[i] = TypeString(a)
	}
	return t.Name + "<" + strings.Join(args, ", ") + ">"
}

func params(ps []*Param) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = TypeString(p.Type) + " " + p.Name
		if p.Dir != "" {
			s[i] = p.Dir + " " + s[i]
		}
	}
	return "(" + strings.Join(s, ", ") + ")"
}

func (f *formatter) decl(d Decl) {
	switch d := d.(type) {
	case *HeaderDecl:
		f.fields(annos(d.Annos)+"header "+d.Name, d.Fields)
	case *StructDecl:
		f.fields(annos(d.Annos)+"struct "+d.Name, d.Fields)
	case *ParserDecl:
		f.line(annos(d.Annos) + "parser " + d.Name + params(d.Params) + " {")
		f.indent++
		for i, s := range d.States {
			if i > 0 {
				f.blank()
			}
			f.state(s)
		}
		f.indent--
		f.line("}")
	case *ControlDecl:
		f.line(annos(d.Annos) + "control " + d.Name + params(d.Params) + " {")
		f.indent++
		for i, l := range d.Locals {
			if i > 0 && !(isSimple(l) && isSimple(d.Locals[i-1])) {
				f.blank()
			}
			f.decl(l)
		}
		if len(d.Locals) > 0 {
			f.blank()
		}
		f.block("apply ", d.Apply, "")
		f.indent--
		f.line("}")
	case *Instance:
		f.line(annos(d.Annos) + TypeString(d.Type) + "(" + exprs(d.Args) + ") " + d.Name + ";")
	case *VarDecl:
		f.varDecl(d)
	case *ActionDecl:
		f.block(annos(d.Annos)+"action "+d.Name+params(d.Params)+" ", d.Body, "")
	case *TableDecl:
		f.table(d)
	}
}

// isSimple reports whether a control local is printed on one line, so that
// consecutive ones are not separated by blank lines.
func isSimple(d Decl) bool {
	switch d.(type) {
	case *Instance, *VarDecl:
		return true
	}
	return false
}

func (f *formatter) fields(head string, fs []*FieldDecl) {
	f.line(head + " {")
	f.indent++
	for _, x := range fs {
		f.line(annos(x.Annos) + TypeString(x.Type) + " " + x.Name + ";")
	}
	f.indent--
	f.line("}")
}

func (f *formatter) varDecl(d *VarDecl) {
	s := annos(d.Annos) + TypeString(d.Type) + " " + d.Name
	if d.Init != nil {
		s += " = " + exprString(d.Init, 0)
	}
	f.line(s + ";")
}

func (f *formatter) state(s *State) {
	f.line(annos(s.Annos) + "state " + s.Name + " {")
	f.indent++
	for _, st := range s.Stmts {
		f.stmt(st)
	}
	if t := s.Trans; t != nil {
		if t.Select == nil {
			f.line("transition " + t.Next + ";")
		} else {
			f.line("transition select(" + exprs(t.Select) + ") {")
			f.indent++
			for _, c := range t.Cases {
				f.line(keysets(c.Keys) + ": " + c.Next + ";")
			}
			f.indent--
			f.line("}")
		}
	}
	f.indent--
	f.line("}")
}

func keysets(ks []Expr) string {
	if len(ks) == 1 {
		return exprString(ks[0], 0)
	}
	return "(" + exprs(ks) + ")"
}

func (f *formatter) table(t *TableDecl) {
	f.line(annos(t.Annos) + "table " + t.Name + " {")
	f.indent++
	if t.HasKey {
		f.line("key = {")
		f.indent++
		for _, k := range t.Keys {
			a := ""
			if len(k.Annos) > 0 {
				a = " " + strings.TrimSuffix(annos(k.Annos), " ")
			}
			f.line(exprString(k.X, 0) + ": " + k.Match + a + ";")
		}
		f.indent--
		f.line("}")
	}
	if t.Actions != nil {
		f.line("actions = {")
		f.indent++
		for _, a := range t.Actions {
			f.line(annos(a.Annos) + a.Name + ";")
		}
		f.indent--
		f.line("}")
	}
	if d := t.Default; d != nil {
		c := ""
		if d.Const {
			c = "const "
		}
		f.line(c + "default_action = " + d.Name + "(" + exprs(d.Args) + ");")
	}
	if t.Size != nil {
		f.line("size = " + exprString(t.Size, 0) + ";")
	}
	if es := t.Entries; es != nil {
		c := ""
		if es.Const {
			c = "const "
		}
		f.line(c + "entries = {")
		f.indent++
		for _, e := range es.List {
			f.line(keysets(e.Keys) + ": " + e.Action + "(" + exprs(e.Args) + ");")
		}
		f.indent--
		f.line("}")
	}
	f.indent--
	f.line("}")
}

// block prints head, the block's statements and its closing brace
// followed by tail.
func (f *formatter) block(head string, b *Block, tail string) {
	f.line(head + "{")
	f.indent++
	for _, s := range b.Stmts {
		f.stmt(s)
	}
	f.indent--
	f.line("}" + tail)
}

func (f *formatter) stmt(s Stmt) {
	switch s := s.(type) {
	case *Block:
		f.block("", s, "")
	case *AssignStmt:
		f.line(exprString(s.Dst, 0) + " = " + exprString(s.X, 0) + ";")
	case *CallStmt:
		f.line(exprString(s.Call, 0) + ";")
	case *VarDecl:
		f.varDecl(s)
	case *IfStmt:
		f.ifStmt("", s)
	}
}

// ifStmt prints "if (c) { ... } else ...", chaining "else if".
func (f *formatter) ifStmt(head string, s *IfStmt) {
	head += "if (" + exprString(s.Cond, 0) + ") "
	then, ok := s.Then.(*Block)
	if !ok {
		then = &Block{Stmts: []Stmt{s.Then}}
	}
	switch e := s.Else.(type) {
	case nil:
		f.block(head, then, "")
	case *IfStmt:
		f.blockOpen(head, then)
		f.ifStmt("} else ", e)
	default:
		eb, ok := e.(*Block)
		if !ok {
			eb = &Block{Stmts: []Stmt{e}}
		}
		f.blockOpen(head, then)
		f.block("} else ", eb, "")
	}
}

// blockOpen prints head, "{" and the block's statements, leaving the
// closing brace to the caller.
func (f *formatter) blockOpen(head string, b *Block) {
	f.line(head + "{")
	f.indent++
	for _, s := range b.Stmts {
		f.stmt(s)
	}
	f.indent--
}

func exprs(xs []Expr) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = exprString(x, 0)
	}
	return strings.Join(s, ", ")
}

// binLevel returns the precedence level of a binary operator (1 the
// lowest), and 0 for none.
func binLevel(op string) int {
	for i, ops := range binLevels {
		for _, o := range ops {
			if o == op {
				return i + 1
			}
		}
	}
	return 0
}

// Unary operators and casts bind more tightly than every binary
// operator, and postfix ones (member, slice, call) more tightly still.
const (
	precUnary   = 11
	precPostfix = 12
)

// ExprString prints an expression as Format does.
func ExprString(e Expr) string { return exprString(e, 0) }

// exprString prints e in a context that binds at least as tightly as
// prec, adding parentheses when e binds more loosely.
func exprString(e Expr, prec int) string {
	paren := func(s string, p int) string {
		if p < prec {
			return "(" + s + ")"
		}
		return s
	}
	switch e := e.(type) {
	case *IntLit:
		return IntString(e)
	case *BoolLit:
		return strconv.FormatBool(e.Value)
	case *StringLit:
		return strconv.Quote(e.Value)
	case *Name:
		return e.Name
	case *Member:
		return exprString(e.X, precPostfix) + "." + e.Name
	case *CallExpr:
		s := exprString(e.Fun, precPostfix)
		if len(e.TypeArgs) > 0 {
			ts := make([]string, len(e.TypeArgs))
			for i, t := range e.TypeArgs {
				ts[i] = TypeString(t)
			}
			s += "<" + strings.Join(ts, ", ") + ">"
		}
		return s + "(" + exprs(e.Args) + ")"
	case *SliceExpr:
		return exprString(e.X, precPostfix) + "[" + exprString(e.Hi, 0) + ":" + exprString(e.Lo, 0) + "]"
	case *UnaryExpr:
		return paren(e.Op+exprString(e.X, precUnary), precUnary)
	case *CastExpr:
		return paren("("+TypeString(e.Type)+")"+exprString(e.X, precUnary), precUnary)
	case *BinaryExpr:
		lv := binLevel(e.Op)
		return paren(exprString(e.L, lv)+" "+e.Op+" "+exprString(e.R, lv+1), lv)
	case *CondExpr:
		s := exprString(e.Cond, 1) + " ? " + exprString(e.Then, 1) + " : " + exprString(e.Else, 1)
		if prec > 0 {
			return "(" + s + ")"
		}
		return s
	case *ListExpr:
		return "{" + exprs(e.Elems) + "}"
	case *MaskExpr:
		return exprString(e.Value, 1) + " &&& " + exprString(e.Mask, 1)
	case *RangeExpr:
		return exprString(e.Lo, 1) + " .. " + exprString(e.Hi, 1)
	case *DefaultExpr:
		return "default"
	case *DontCare:
		return "_"
	}
	return "?"
}

// IntString prints an integer literal: [W w] value in its base.
func IntString(e *IntLit) string {
	var v string
	switch e.Base {
	case 16:
		v = "0x" + strconv.FormatUint(e.Value, 16)
	case 8:
		v = "0o" + strconv.FormatUint(e.Value, 8)
	case 2:
		v = "0b" + strconv.FormatUint(e.Value, 2)
	default:
		v = strconv.FormatUint(e.Value, 10)
	}
	if e.Width > 0 {
		return strconv.Itoa(e.Width) + "w" + v
	}
	return v
}
