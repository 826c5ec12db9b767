package mafia

import (
	"strconv"

	"github.com/ffpf-go/ffpf/lang"
)

// Pos is a position in the source, as lang's: byte offset, line, column.
type Pos = lang.Pos

// Program is a parsed MAFIA program: its statements in source order.
type Program struct {
	Stmts []Stmt

	src string // kept for the errors' carets
}

// Src returns the source the program was parsed from ("" for a program
// that was built, not parsed).
func (p *Program) Src() string { return p.src }

// Stmt is *Decl, *Window, *Section or *Flow.
type Stmt interface {
	StmtPos() Pos
	stmt()
}

// Decl is "NAME = INIT": a state variable, a flow key or a constant.
type Decl struct {
	Pos  Pos // of the name
	Name string
	Init Init
}

// Init is what a declaration gives its name: *StateInit or *Const.
type Init interface {
	InitPos() Pos
	init()
}

// StateInit is "Key(...)", "Counter(...)", "Timestamp()", "HashMap(...)",
// "Sketch(...)" or "BloomFilter(...)". Key's arguments are fields
// (positional); the others' are keyword arguments. HashMap's type= is a
// nested StateInit (Counter or Timestamp).
type StateInit struct {
	Pos    Pos    // of the type's name
	Type   string // as written: Key, Counter, Timestamp, HashMap, Sketch, BloomFilter
	Fields []*Field
	Args   []*KwArg
}

// KwArg is "name=value" in a state declaration.
type KwArg struct {
	Pos   Pos
	Name  string
	Value Expr // *Num, *Str, *Ident (a name: a key, a constant) or *StateInit (HashMap's type=)
}

// Const is a constant: a number (with its unit) or a string.
type Const struct {
	Value Expr // *Num or *Str
}

// Window is "window(DURATION)": the measurement interval of every state
// the section (or, before any section, the program) updates.
type Window struct {
	Pos Pos
	Dur Expr // *Num with a time unit, or *Ident naming a constant
}

// Section is "at ROLE:": the flows after it, up to the next section, run
// on the switches of that role on a path (first_hop, intermediate,
// last_hop).
type Section struct {
	Pos  Pos
	Role string
}

// Flow is "STREAM [.window(DURATION)] >> COMPOSITION".
type Flow struct {
	Pos    Pos // of the stream's name
	Stream string
	Window Expr // nil, or the stream's window
	Body   Comp
}

func (d *Decl) StmtPos() Pos    { return d.Pos }
func (w *Window) StmtPos() Pos  { return w.Pos }
func (s *Section) StmtPos() Pos { return s.Pos }
func (f *Flow) StmtPos() Pos    { return f.Pos }
func (*Decl) stmt()             {}
func (*Window) stmt()           {}
func (*Section) stmt()          {}
func (*Flow) stmt()             {}

func (s *StateInit) InitPos() Pos { return s.Pos }
func (c *Const) InitPos() Pos     { return c.Value.ExprPos() }
func (*StateInit) init()          {}
func (*Const) init()              {}

// Comp is a composition: *Par, *Seq or *Op.
type Comp interface {
	CompPos() Pos
	comp()
}

// Par is "A + B + ...": the branches run on the packet independently.
type Par struct {
	Pos      Pos
	Branches []Comp
}

// Seq is "A >> B >> ...": each step sees the side effects of the steps
// before it, and after a match only the packets for which it held go on.
type Seq struct {
	Pos   Pos
	Steps []Comp
}

// Op is one primitive: match(E), tag(FIELD, E), timestamp(NAME),
// duplicate(NAME), collect(ENDPOINT), or NAME.METHOD(ARGS) on a state
// variable.
type Op struct {
	Pos    Pos    // of the op's first token
	Name   string // match, tag, timestamp, duplicate, collect; or the method
	Target string // the state variable of NAME.METHOD(...), "" otherwise
	Args   []Expr
}

func (p *Par) CompPos() Pos { return p.Pos }
func (s *Seq) CompPos() Pos { return s.Pos }
func (o *Op) CompPos() Pos  { return o.Pos }
func (*Par) comp()          {}
func (*Seq) comp()          {}
func (*Op) comp()           {}

// Expr is an expression: *Num, *Str, *Ident, *Field, *Call, *Unary,
// *Binary, *Range, *StateInit (only as HashMap's type=).
type Expr interface {
	ExprPos() Pos
	expr()
}

// Num is a number as written: digits (decimal, with a fraction, or 0x
// hex) and an optional unit (ns us ms s, B KB MB GB, K M G).
type Num struct {
	Pos  Pos
	Text string
	Unit string
}

// Str is a double-quoted string (or one in the paper's curly quotes).
type Str struct {
	Pos  Pos
	Text string // unquoted
}

// Ident is a bare name: a state variable, a constant, a stream.
type Ident struct {
	Pos  Pos
	Name string
}

// Field is a dotted name: a packet field (ipv4.tos, pkt.size,
// pkt.ipv4.tos), switch metadata (switch.id).
type Field struct {
	Pos  Pos
	Path []string
}

// Call is FN(ARGS) (max, min, random) or NAME.METHOD(ARGS) on a state
// variable (nbytes.min(), hh.test(), paths.any(ipv4.checksum)).
type Call struct {
	Pos    Pos
	Target string // the state variable, "" for a function
	Name   string
	Args   []Expr
}

// Unary is "-X" or "!X" (also written "not X").
type Unary struct {
	Pos Pos
	Op  string // "-" or "!"
	X   Expr
}

// Binary is "X OP Y": || && == != < <= > >= | & + - * / %.
type Binary struct {
	Pos  Pos // of the operator
	Op   string
	X, Y Expr
}

// Range is "[LO:HI]", random's argument.
type Range struct {
	Pos    Pos
	Lo, Hi Expr
}

func (n *Num) ExprPos() Pos       { return n.Pos }
func (s *Str) ExprPos() Pos       { return s.Pos }
func (i *Ident) ExprPos() Pos     { return i.Pos }
func (f *Field) ExprPos() Pos     { return f.Pos }
func (c *Call) ExprPos() Pos      { return c.Pos }
func (u *Unary) ExprPos() Pos     { return u.Pos }
func (b *Binary) ExprPos() Pos    { return b.Pos }
func (r *Range) ExprPos() Pos     { return r.Pos }
func (s *StateInit) ExprPos() Pos { return s.Pos }
func (*Num) expr()                {}
func (*Str) expr()                {}
func (*Ident) expr()              {}
func (*Field) expr()              {}
func (*Call) expr()               {}
func (*Unary) expr()              {}
func (*Binary) expr()             {}
func (*Range) expr()              {}
func (*StateInit) expr()          {}

// Name returns the field's dotted name.
func (f *Field) Name() string {
	s := ""
	for i, p := range f.Path {
		if i > 0 {
			s += "."
		}
		s += p
	}
	return s
}

// String returns the number as written.
func (n *Num) String() string { return n.Text + n.Unit }

// value parses a number without its unit: an integer (decimal or 0x hex)
// or a float.
func (n *Num) value() (i int64, f float64, isInt bool, err error) {
	if len(n.Text) > 2 && (n.Text[:2] == "0x" || n.Text[:2] == "0X") {
		u, err := strconv.ParseUint(n.Text[2:], 16, 63)
		return int64(u), float64(u), true, err
	}
	if i, err := strconv.ParseInt(n.Text, 10, 64); err == nil {
		return i, float64(i), true, nil
	}
	f, err = strconv.ParseFloat(n.Text, 64)
	return 0, f, false, err
}
