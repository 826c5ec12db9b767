package p4

import "fmt"

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// Node is any node of the AST.
type Node interface{ Position() Pos }

// Program is a parsed P4_16 source: its includes and declarations.
type Program struct {
	Includes []*Include
	Decls    []Decl
}

// Include is "#include <Path>" (System) or "#include "Path"".
type Include struct {
	At     Pos
	Path   string
	System bool
}

// Annotation is "@Name" or "@Name(Args)".
type Annotation struct {
	At      Pos
	Name    string
	Args    []Expr
	HasArgs bool
}

// Decl is a top-level declaration or a control's local one.
type Decl interface {
	Node
	DeclName() string
}

// HeaderDecl is "header Name { Fields }".
type HeaderDecl struct {
	At     Pos
	Annos  []*Annotation
	Name   string
	Fields []*FieldDecl
}

// StructDecl is "struct Name { Fields }".
type StructDecl struct {
	At     Pos
	Annos  []*Annotation
	Name   string
	Fields []*FieldDecl
}

// FieldDecl is a field of a header or struct.
type FieldDecl struct {
	At    Pos
	Annos []*Annotation
	Type  *TypeRef
	Name  string
}

// TypeRef names a type: "bit<W>", "varbit<W>", "bool", "int", or a named
// type with optional type arguments ("register<bit<32>>").
type TypeRef struct {
	At    Pos
	Name  string
	Width int // of bit and varbit
	Args  []*TypeRef
}

// Param is a parameter of a parser, control or action.
type Param struct {
	At   Pos
	Dir  string // "", "in", "out", "inout"
	Type *TypeRef
	Name string
}

// ParserDecl is "parser Name(Params) { States }".
type ParserDecl struct {
	At     Pos
	Annos  []*Annotation
	Name   string
	Params []*Param
	States []*State
}

// State is a parser state: its statements, then its transition.
type State struct {
	At    Pos
	Annos []*Annotation
	Name  string
	Stmts []Stmt
	Trans *Transition
}

// Transition is "transition Next;" or "transition select(Select) { Cases }".
type Transition struct {
	At     Pos
	Next   string // when Select is nil
	NextAt Pos
	Select []Expr
	Cases  []*SelectCase
}

// SelectCase is "Keys: Next;": one keyset expression per select
// expression (IntLit and other expressions, *MaskExpr, *RangeExpr,
// *DefaultExpr, *DontCare).
type SelectCase struct {
	At     Pos
	Keys   []Expr
	Next   string
	NextAt Pos
}

// ControlDecl is "control Name(Params) { Locals apply Apply }".
type ControlDecl struct {
	At     Pos
	Annos  []*Annotation
	Name   string
	Params []*Param
	Locals []Decl // *Instance, *VarDecl, *ActionDecl, *TableDecl
	Apply  *Block
}

// Instance is an instantiation "Type(Args) Name;" (an extern such as a
// register or counter, or the package: "V1Switch(...) main;").
type Instance struct {
	At    Pos
	Annos []*Annotation
	Type  *TypeRef
	Args  []Expr
	Name  string
}

// VarDecl is "Type Name [= Init];", a control's local or a statement.
type VarDecl struct {
	At    Pos
	Annos []*Annotation
	Type  *TypeRef
	Name  string
	Init  Expr
}

// ActionDecl is "action Name(Params) Body".
type ActionDecl struct {
	At     Pos
	Annos  []*Annotation
	Name   string
	Params []*Param
	Body   *Block
}

// TableDecl is a table and its properties, printed in this order.
type TableDecl struct {
	At      Pos
	Annos   []*Annotation
	Name    string
	Keys    []*KeyElem // nil: no key property
	HasKey  bool
	Actions []*ActionRef
	Default *DefaultAction
	Size    Expr
	Entries *Entries
}

// KeyElem is "X: Match;" of a table's key.
type KeyElem struct {
	At      Pos
	X       Expr
	Match   string
	MatchAt Pos
	Annos   []*Annotation
}

// ActionRef is an action of a table's actions list.
type ActionRef struct {
	At    Pos
	Annos []*Annotation
	Name  string
}

// DefaultAction is "[const] default_action = Name(Args);".
type DefaultAction struct {
	At    Pos
	Const bool
	Name  string
	Args  []Expr
}

// Entries is "[const] entries = { List }".
type Entries struct {
	At    Pos
	Const bool
	List  []*Entry
}

// Entry is "Keys: Action(Args);" (one keyset per key; printed in
// parentheses when there are several).
type Entry struct {
	At       Pos
	Keys     []Expr
	Action   string
	ActionAt Pos
	Args     []Expr
}

func (d *HeaderDecl) DeclName() string  { return d.Name }
func (d *StructDecl) DeclName() string  { return d.Name }
func (d *ParserDecl) DeclName() string  { return d.Name }
func (d *ControlDecl) DeclName() string { return d.Name }
func (d *Instance) DeclName() string    { return d.Name }
func (d *VarDecl) DeclName() string     { return d.Name }
func (d *ActionDecl) DeclName() string  { return d.Name }
func (d *TableDecl) DeclName() string   { return d.Name }

func (d *HeaderDecl) Position() Pos  { return d.At }
func (d *StructDecl) Position() Pos  { return d.At }
func (d *ParserDecl) Position() Pos  { return d.At }
func (d *ControlDecl) Position() Pos { return d.At }
func (d *Instance) Position() Pos    { return d.At }
func (d *VarDecl) Position() Pos     { return d.At }
func (d *ActionDecl) Position() Pos  { return d.At }
func (d *TableDecl) Position() Pos   { return d.At }
func (d *FieldDecl) Position() Pos   { return d.At }
func (d *TypeRef) Position() Pos     { return d.At }
func (d *Param) Position() Pos       { return d.At }
func (d *State) Position() Pos       { return d.At }

// Stmt is a statement: *Block, *AssignStmt, *CallStmt, *IfStmt, *VarDecl.
type Stmt interface {
	Node
	stmt()
}

// Block is "{ Stmts }".
type Block struct {
	At    Pos
	Stmts []Stmt
}

// AssignStmt is "Dst = X;".
type AssignStmt struct {
	At  Pos // of "="
	Dst Expr
	X   Expr
}

// CallStmt is a method or function call as a statement.
type CallStmt struct {
	Call *CallExpr
}

// IfStmt is "if (Cond) Then [else Else]".
type IfStmt struct {
	At   Pos
	Cond Expr
	Then Stmt
	Else Stmt // nil for none
}

func (*Block) stmt()      {}
func (*AssignStmt) stmt() {}
func (*CallStmt) stmt()   {}
func (*IfStmt) stmt()     {}
func (*VarDecl) stmt()    {}

func (s *Block) Position() Pos      { return s.At }
func (s *AssignStmt) Position() Pos { return s.At }
func (s *CallStmt) Position() Pos   { return s.Call.Position() }
func (s *IfStmt) Position() Pos     { return s.At }

// Expr is an expression.
type Expr interface {
	Node
	expr()
}

// IntLit is an integer literal: Width 0 for an unsized one ("5"), else
// "Width w Value" in Base 2, 8, 10 or 16.
type IntLit struct {
	At    Pos
	Width int
	Value uint64
	Base  int
}

// BoolLit is true or false.
type BoolLit struct {
	At    Pos
	Value bool
}

// StringLit is a string (in annotations).
type StringLit struct {
	At    Pos
	Value string
}

// Name is an identifier used as an expression.
type Name struct {
	At   Pos
	Name string
}

// Member is "X.Name".
type Member struct {
	X      Expr
	Name   string
	NameAt Pos
}

// CallExpr is "Fun<TypeArgs>(Args)".
type CallExpr struct {
	At       Pos // of "("
	Fun      Expr
	TypeArgs []*TypeRef
	Args     []Expr
}

// UnaryExpr is Op X for Op "!", "~" or "-".
type UnaryExpr struct {
	At Pos
	Op string
	X  Expr
}

// BinaryExpr is L Op R; At is the operator's position.
type BinaryExpr struct {
	At   Pos
	Op   string
	L, R Expr
}

// CastExpr is "(Type) X".
type CastExpr struct {
	At   Pos
	Type *TypeRef
	X    Expr
}

// SliceExpr is "X[Hi:Lo]".
type SliceExpr struct {
	At     Pos // of "["
	X      Expr
	Hi, Lo Expr
}

// CondExpr is "Cond ? Then : Else".
type CondExpr struct {
	At               Pos // of "?"
	Cond, Then, Else Expr
}

// ListExpr is "{ Elems }".
type ListExpr struct {
	At    Pos
	Elems []Expr
}

// MaskExpr is the keyset "Value &&& Mask".
type MaskExpr struct {
	At          Pos
	Value, Mask Expr
}

// RangeExpr is the keyset "Lo .. Hi".
type RangeExpr struct {
	At     Pos
	Lo, Hi Expr
}

// DefaultExpr is the keyset "default".
type DefaultExpr struct{ At Pos }

// DontCare is the keyset "_".
type DontCare struct{ At Pos }

func (*IntLit) expr()      {}
func (*BoolLit) expr()     {}
func (*StringLit) expr()   {}
func (*Name) expr()        {}
func (*Member) expr()      {}
func (*CallExpr) expr()    {}
func (*UnaryExpr) expr()   {}
func (*BinaryExpr) expr()  {}
func (*CastExpr) expr()    {}
func (*SliceExpr) expr()   {}
func (*CondExpr) expr()    {}
func (*ListExpr) expr()    {}
func (*MaskExpr) expr()    {}
func (*RangeExpr) expr()   {}
func (*DefaultExpr) expr() {}
func (*DontCare) expr()    {}

func (e *IntLit) Position() Pos      { return e.At }
func (e *BoolLit) Position() Pos     { return e.At }
func (e *StringLit) Position() Pos   { return e.At }
func (e *Name) Position() Pos        { return e.At }
func (e *Member) Position() Pos      { return e.NameAt }
func (e *CallExpr) Position() Pos    { return e.Fun.Position() }
func (e *UnaryExpr) Position() Pos   { return e.At }
func (e *BinaryExpr) Position() Pos  { return e.At }
func (e *CastExpr) Position() Pos    { return e.At }
func (e *SliceExpr) Position() Pos   { return e.At }
func (e *CondExpr) Position() Pos    { return e.At }
func (e *ListExpr) Position() Pos    { return e.At }
func (e *MaskExpr) Position() Pos    { return e.At }
func (e *RangeExpr) Position() Pos   { return e.At }
func (e *DefaultExpr) Position() Pos { return e.At }
func (e *DontCare) Position() Pos    { return e.At }

// Path returns the dotted name of a Name or Member chain ("hdr.ipv4.ttl")
// and true, or "" and false for any other expression.
func Path(e Expr) (string, bool) {
	switch e := e.(type) {
	case *Name:
		return e.Name, true
	case *Member:
		p, ok := Path(e.X)
		if !ok {
			return "", false
		}
		return p + "." + e.Name, true
	}
	return "", false
}
