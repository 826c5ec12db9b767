package p4gen

import (
	"fmt"
	"strings"
)

// Type is the type of a value: bit<Bits> for 1 ≤ Bits ≤ 64, or bool
// (Bits 0).
type Type struct{ Bits int }

// Bool is the type of conditions.
var Bool = Type{}

// Bit returns bit<w>.
func Bit(w int) Type { return Type{Bits: w} }

// IsBool reports whether t is bool.
func (t Type) IsBool() bool { return t.Bits == 0 }

func (t Type) String() string {
	if t.IsBool() {
		return "bool"
	}
	return fmt.Sprintf("bit<%d>", t.Bits)
}

// Mask returns the values of t: the low Bits bits set (1 for bool).
func (t Type) Mask() uint64 {
	if t.Bits == 0 {
		return 1
	}
	if t.Bits >= 64 {
		return ^uint64(0)
	}
	return 1<<uint(t.Bits) - 1
}

// Expr is a value computed per packet.
type Expr interface {
	Type() Type
	isExpr()
}

// Const is a constant: bit<Bits>, or a bool (Bits 0, Value 0 or 1).
type Const struct {
	Value uint64
	Bits  int
}

// Ref names a value of the packet: a header field ("hdr.ipv4.protocol"),
// a metadata field ("meta.cms_2_idx0"), a standard metadata field
// ("standard_metadata.ingress_port", StdMeta), or, inside an action, one
// of its parameters ("port"). A Ref is also a place an Assign writes.
type Ref struct {
	Path string
	Bits int
}

// Valid is hdr.<Header>.isValid(): the parser extracted it (or an action
// set it valid).
type Valid struct{ Header string }

// Unary applies Op to X: Not to a bool, Inv (bitwise ~) to a bit<W>.
type Unary struct {
	Op UnOp
	X  Expr
}

// Binary applies Op to L and R, which have one type (P4 does not widen
// implicitly: Cast first).
type Binary struct {
	Op   BinOp
	L, R Expr
}

// Cast is (bit<Bits>) X: X's low bits, or X widened with zeros; a bool
// casts to bit<1>.
type Cast struct {
	Bits int
	X    Expr
}

// Slice is X[Hi:Lo], bits Lo to Hi of X (Hi ≥ Lo).
type Slice struct {
	X      Expr
	Hi, Lo int
}

// Mux is Cond ? Then : Else.
type Mux struct{ Cond, Then, Else Expr }

// Old is, inside an RMW's New and Cond, the value the register cell
// held before the packet.
type Old struct{ Bits int }

// UnOp is a unary operator.
type UnOp uint8

const (
	Not UnOp = iota + 1 // !b
	Inv                 // ~x
)

// BinOp is a binary operator.
type BinOp uint8

const (
	Add    BinOp = iota + 1 // wraps at the width
	Sub                     // wraps
	SatAdd                  // |+|: saturates at the width's largest value
	And                     // &
	Or                      // |
	Xor                     // ^
	Shl                     // << by a constant
	Shr                     // >> by a constant
	Eq                      // == (any type; bool result)
	Ne                      // !=
	Lt                      // < (unsigned)
	Le                      // <=
	Gt                      // >
	Ge                      // >=
	LAnd                    // && of bools
	LOr                     // || of bools
)

var binNames = [...]string{Add: "+", Sub: "-", SatAdd: "|+|", And: "&", Or: "|", Xor: "^", Shl: "<<", Shr: ">>",
	Eq: "==", Ne: "!=", Lt: "<", Le: "<=", Gt: ">", Ge: ">=", LAnd: "&&", LOr: "||"}

// String returns the operator as P4 writes it.
func (op BinOp) String() string {
	if int(op) < len(binNames) && binNames[op] != "" {
		return binNames[op]
	}
	return fmt.Sprintf("BinOp(%d)", uint8(op))
}

// Compares reports whether op yields a bool from two operands of one type.
func (op BinOp) Compares() bool { return op >= Eq && op <= Ge }

func (c Const) Type() Type { return Type{c.Bits} }
func (r Ref) Type() Type   { return Type{r.Bits} }
func (Valid) Type() Type   { return Bool }
func (u Unary) Type() Type { return u.X.Type() }
func (c Cast) Type() Type  { return Type{c.Bits} }
func (s Slice) Type() Type { return Type{s.Hi - s.Lo + 1} }
func (m Mux) Type() Type   { return m.Then.Type() }
func (o Old) Type() Type   { return Type{o.Bits} }
func (b Binary) Type() Type {
	if b.Op.Compares() || b.Op == LAnd || b.Op == LOr {
		return Bool
	}
	return b.L.Type()
}

func (Const) isExpr()  {}
func (Ref) isExpr()    {}
func (Valid) isExpr()  {}
func (Unary) isExpr()  {}
func (Binary) isExpr() {}
func (Cast) isExpr()   {}
func (Slice) isExpr()  {}
func (Mux) isExpr()    {}
func (Old) isExpr()    {}

// True and False are the bool constants.
var (
	True  = Const{Value: 1}
	False = Const{Value: 0}
)

// C returns the constant v of w bits.
func C(v uint64, w int) Const { return Const{Value: v & Bit(w).Mask(), Bits: w} }

// B builds Binary{op, l, r}.
func B(op BinOp, l, r Expr) Binary { return Binary{Op: op, L: l, R: r} }

// AllOf is the conjunction of cs (True when there is none).
func AllOf(cs ...Expr) Expr {
	var e Expr
	for _, c := range cs {
		if e == nil {
			e = c
		} else {
			e = B(LAnd, e, c)
		}
	}
	if e == nil {
		return True
	}
	return e
}

// AnyOf is the disjunction of cs (False when there is none).
func AnyOf(cs ...Expr) Expr {
	var e Expr
	for _, c := range cs {
		if e == nil {
			e = c
		} else {
			e = B(LOr, e, c)
		}
	}
	if e == nil {
		return False
	}
	return e
}

// Stmt is a statement of a control's apply block or an action's body.
type Stmt interface{ isStmt() }

// Assign writes X to Dst.
type Assign struct {
	Dst Ref
	X   Expr
}

// If runs Then when Cond holds, else Else.
type If struct {
	Cond       Expr
	Then, Else []Stmt
}

// Apply applies a table: the action of the entry its keys match, or its
// default action.
type Apply struct{ Table *Table }

// Call runs an action directly with its arguments.
type Call struct {
	Action *Action
	Args   []Expr
}

// Hash is v1model's hash(Dst, Algo, Base, {Data}, Max): Dst = Base +
// h(Data) mod Max, where h hashes the fields packed most significant
// first, each in its own width (Max 0: Dst = Base + h, at Dst's width).
type Hash struct {
	Dst  Ref
	Algo HashAlgo
	Base uint64
	Data []Expr
	Max  uint64
}

// Random is v1model's random(Dst, Lo, Hi): a uniform value in [Lo, Hi].
type Random struct {
	Dst    Ref
	Lo, Hi uint64
}

// RMW is one stateful ALU access to a register at a packet: it reads
// cell Index (Old), writes New there when Cond holds (nil: always), and
// gives the value read to OldTo and the value the cell holds after to
// NewTo (either may be nil). A register takes at most one RMW per packet.
type RMW struct {
	Reg   *Register
	Index Expr // bit<32>
	New   Expr // over Old and the packet's values
	Cond  Expr // bool, or nil
	OldTo *Ref
	NewTo *Ref
}

// Count counts the packet (and its bytes) in cell Index of a counter.
type Count struct {
	Counter *Counter
	Index   Expr // bit<32>
}

// Digest sends the values to the controller as one digest message of
// Type (v1model digest(1, {...})).
type Digest struct {
	Type   *DigestType
	Values []Expr
}

// Clone sends a copy of the packet, as it leaves ingress, to the clone
// session (v1model clone(CloneType.I2E, Session)); the flowspace maps its
// sessions to the uplink or the CPU port.
//
// With E2E (in egress), the copy is the packet as it leaves egress,
// rewritten headers and all (v1model clone_preserving_field_list(
// CloneType.E2E, Session, 1)): its egress runs again, with instance_type
// InstanceCloneE2E, its ingress port and time the original's, and the
// metadata fields of Preserve (the field list, @field_list(1)) as the
// original left them, the others zero. A clone instance makes no clone
// of its own (the program tests instance_type). MAFIA's copies that go to
// a collector are made so: the values their tags write, computed for the
// original, travel in Preserve.
type Clone struct {
	Session  uint32
	E2E      bool
	Preserve []Ref
}

// SetValid makes a header valid (with its fields zero) or invalid.
type SetValid struct {
	Header string
	Valid  bool
}

// MarkToDrop drops the packet at the end of ingress (v1model
// mark_to_drop: egress_spec = DropPort).
type MarkToDrop struct{}

func (Assign) isStmt()     {}
func (If) isStmt()         {}
func (Apply) isStmt()      {}
func (Call) isStmt()       {}
func (Hash) isStmt()       {}
func (Random) isStmt()     {}
func (RMW) isStmt()        {}
func (Count) isStmt()      {}
func (Digest) isStmt()     {}
func (Clone) isStmt()      {}
func (SetValid) isStmt()   {}
func (MarkToDrop) isStmt() {}

// HashAlgo is a v1model HashAlgorithm.
type HashAlgo uint8

const (
	CRC32    HashAlgo = iota + 1 // IEEE 802.3 (zlib's crc32), as bmv2's crc32
	CRC16                        // CRC-16/ARC, as bmv2's crc16
	Identity                     // the data itself, truncated
)

var hashNames = [...]string{CRC32: "crc32", CRC16: "crc16", Identity: "identity"}

// String returns the algorithm's v1model name.
func (a HashAlgo) String() string {
	if int(a) < len(hashNames) && hashNames[a] != "" {
		return hashNames[a]
	}
	return fmt.Sprintf("HashAlgo(%d)", uint8(a))
}

// Field is a named field of a header, of metadata, a digest or an
// action's parameters. Var marks a header's varbit field (IPv4 options):
// it holds up to Bits bits that the parser skips by a length; its value is
// not readable.
type Field struct {
	Name string
	Bits int
	Var  bool
}

// HeaderType is a header's layout, fields first to last on the wire.
// Controller, when set, makes it the controller header of the packets
// the switch sends to (ControllerPacketIn) or receives from
// (ControllerPacketOut) the controller through its CPU port: P4's
// @controller_header("packet_in"), whose fields are the metadata of a
// P4Runtime PacketIn (PacketOut), in order. The program emits a packet_in
// header first on a packet to the CPU port, and parses a packet_out header
// first on a packet from it.
type HeaderType struct {
	Name       string
	Fields     []Field
	Controller string
}

// The controller headers' names (HeaderType.Controller).
const (
	ControllerPacketIn  = "packet_in"
	ControllerPacketOut = "packet_out"
)

// Bits returns the header's fixed length in bits (its varbit field not
// counted).
func (h *HeaderType) Bits() int {
	n := 0
	for _, f := range h.Fields {
		if !f.Var {
			n += f.Bits
		}
	}
	return n
}

// Field returns the field named name.
func (h *HeaderType) Field(name string) (Field, bool) {
	for _, f := range h.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

// Header is a header instance of the parsed packet, hdr.<Name>.
type Header struct {
	Name string
	Type *HeaderType
}

// ParserState is a state of the parser: it extracts its headers in order
// (VarBits, when set, is the length in bits of the varbit field of the
// last one), then goes to the first Case whose values match Select (each
// value under its mask), else to Default. "accept" ends parsing; "reject"
// ends it with an error (the packet still reaches ingress, as in v1model,
// with the headers extracted so far valid). A packet too short for a
// header stops parsing there (PacketTooShort): that header and the
// following stay invalid.
type ParserState struct {
	Name    string
	Extract []string
	VarBits Expr
	Select  []Expr
	Cases   []Case
	Default string
}

// Case is a transition of a parser state: Values (under Masks, all ones
// when Masks is nil) against the state's Select expressions.
type Case struct {
	Values []uint64
	Masks  []uint64
	Next   string
}

// Accept and Reject are the parser's final states.
const (
	Accept = "accept"
	Reject = "reject"
)

// Register is an array of Size cells of Width bits (1, 8, 16, 32 or 64)
// that the datapath keeps across packets. Field and Base say which values
// of the owning function's MBuf it holds: cell i is value Base+i of the
// field named Field, so the controller reads it into the MBuf as it is.
// Half, for a function with a window (Window), says which windows the
// register holds: HalfEven or HalfOdd; the controller reads a window from
// the registers and counters of its half.
type Register struct {
	Name  string
	Width int
	Size  int
	Owner string // the function's id
	Field string
	Base  int
	Half  Half
}

// Half is the windows a register or counter holds, for a function that
// double-buffers its state by window parity.
type Half uint8

const (
	HalfAll  Half = iota // no window: every packet's state
	HalfEven             // the windows of even number
	HalfOdd              // the windows of odd number
)

// CounterType is what a counter cell counts.
type CounterType uint8

const (
	Packets CounterType = iota + 1
	Bytes
	PacketsAndBytes
)

// Counter is an indexed counter (v1model counter): cell i counts packets,
// bytes or both. A counter is readable over P4Runtime on every target
// (bmv2's included, where registers are not), so state that is a count
// lives in one. FieldPackets and FieldBytes name the owner's MBuf fields
// its cells are read into (at Base+i), "" for none.
type Counter struct {
	Name         string
	Size         int
	Type         CounterType
	Owner        string
	FieldPackets string
	FieldBytes   string
	Base         int
	Half         Half
}

// MatchKind is how a table key matches.
type MatchKind uint8

const (
	Exact MatchKind = iota + 1
	Ternary
	LPM
	Range
)

var matchNames = [...]string{Exact: "exact", Ternary: "ternary", LPM: "lpm", Range: "range"}

// String returns the kind's P4 name.
func (k MatchKind) String() string {
	if int(k) < len(matchNames) && matchNames[k] != "" {
		return matchNames[k]
	}
	return fmt.Sprintf("MatchKind(%d)", uint8(k))
}

// TableKey is a key of a table: the value of X (a Ref, or a Valid as
// bit<1>) matched as Match says.
type TableKey struct {
	X     Expr
	Match MatchKind
}

// Action is a P4 action: its parameters (referred to in Body by Ref{Path:
// name}) and statements. An action's statements are the ones a table or
// Call may run: no If, no Apply.
type Action struct {
	Name   string
	Params []Field
	Body   []Stmt
}

// Table is a match-action table. Entries are installed by the controller
// over P4Runtime at start (and may change while the switch runs) unless
// Const, when they are part of the program. Default runs, with
// DefaultArgs, when no entry matches.
type Table struct {
	Name        string
	Keys        []TableKey
	Actions     []*Action
	Default     *Action
	DefaultArgs []uint64
	Size        int
	Const       bool
	Entries     []Entry
}

// Entry is a table entry: one Match per key, the action and its
// arguments. Among ternary or range entries that match, the one of
// highest Priority wins (P4Runtime's order); among LPM entries, the
// longest prefix.
type Entry struct {
	Match    []Match
	Priority int32
	Action   *Action
	Args     []uint64
}

// Match is how one key of an entry matches: Exact compares Value;
// Ternary Value under Mask; LPM the first PrefixLen bits of Value; Range
// Lo ≤ key ≤ Hi.
type Match struct {
	Value, Mask uint64
	PrefixLen   int
	Lo, Hi      uint64
}

// DigestType is the layout of a digest message.
type DigestType struct {
	Name   string
	Fields []Field
	Owner  string
}

// Program is what a P4 switch runs: v1model's parser, ingress, egress
// and deparser over the declarations. Every name is a P4 identifier,
// unique in its kind.
type Program struct {
	Name        string
	HeaderTypes []*HeaderType
	Headers     []*Header
	Parser      []*ParserState // the first is the start state
	Metadata    []Field        // meta.<name>
	Registers   []*Register
	Counters    []*Counter
	Actions     []*Action
	Tables      []*Table
	Digests     []*DigestType
	Ingress     []Stmt
	Egress      []Stmt
	// Deparse lists the headers emitted, in order, before the payload
	// (the bytes past what the parser extracted).
	Deparse []string
	// UpdateIPv4Checksum recomputes the IPv4 header checksum
	// (IPv4ChecksumField) over the standard headers' IPv4 chunks
	// (IPv4Chunks, then ipv4_opts when valid) of a packet whose IPv4
	// chunks are all valid, in the deparser (v1model update_checksum); a
	// program that carries data in the checksum field (MAFIA's tags)
	// leaves it unset.
	UpdateIPv4Checksum bool
}

// Header returns the header instance named name.
func (p *Program) Header(name string) *Header {
	for _, h := range p.Headers {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// Register returns the register named name.
func (p *Program) Register(name string) *Register {
	for _, r := range p.Registers {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// Table returns the table named name.
func (p *Program) Table(name string) *Table {
	for _, t := range p.Tables {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Standard metadata (v1model's standard_metadata_t) that programs read
// and write, with their widths.
var StdMeta = []Field{
	{Name: "ingress_port", Bits: 9},
	{Name: "egress_spec", Bits: 9},
	{Name: "egress_port", Bits: 9},
	{Name: "instance_type", Bits: 32},
	{Name: "packet_length", Bits: 32},
	{Name: "enq_timestamp", Bits: 32},
	{Name: "enq_qdepth", Bits: 19},
	{Name: "deq_timedelta", Bits: 32},
	{Name: "deq_qdepth", Bits: 19},
	{Name: "ingress_global_timestamp", Bits: 48},
	{Name: "egress_global_timestamp", Bits: 48},
	{Name: "mcast_grp", Bits: 16},
	{Name: "egress_rid", Bits: 16},
	{Name: "checksum_error", Bits: 1},
	{Name: "priority", Bits: 3},
}

// Std returns the standard metadata field name as a Ref.
func Std(name string) Ref {
	for _, f := range StdMeta {
		if f.Name == name {
			return Ref{Path: "standard_metadata." + name, Bits: f.Bits}
		}
	}
	panic("p4gen: no standard metadata field " + name)
}

// DropPort is the egress_spec of a dropped packet (bmv2's, 9 bits all
// ones).
const DropPort = 511

// Instance types of a packet in egress (bmv2's).
const (
	InstanceNormal   = 0
	InstanceCloneI2E = 1
	InstanceCloneE2E = 2
)

// Validate checks that the program is well formed: names unique and
// declared before use, every expression typed (operands of one width,
// conditions bool, constants within their width), registers of the
// widths a switch has, RMWs with a register at most once per path.
func (p *Program) Validate() error {
	v := validator{p: p, refs: map[string]int{}}
	return v.program()
}

type validator struct {
	p    *Program
	refs map[string]int // path → bits (header fields, metadata, standard metadata)
	// egress is set while the egress control's statements are checked.
	egress bool
}

func (v *validator) program() error {
	seen := map[string]bool{}
	uniq := func(kind, name string) error {
		k := kind + " " + name
		if name == "" || strings.ContainsAny(name, " .-") {
			return fmt.Errorf("%s %q is not a P4 identifier", kind, name)
		}
		if seen[k] {
			return fmt.Errorf("%s %s is declared twice", kind, name)
		}
		seen[k] = true
		return nil
	}
	types := map[string]*HeaderType{}
	for _, t := range v.p.HeaderTypes {
		if err := uniq("header type", t.Name); err != nil {
			return err
		}
		types[t.Name] = t
	}
	for _, h := range v.p.Headers {
		if err := uniq("header", h.Name); err != nil {
			return err
		}
		if h.Type == nil || types[h.Type.Name] != h.Type {
			return fmt.Errorf("header %s has an undeclared type", h.Name)
		}
		for _, f := range h.Type.Fields {
			if f.Bits < 1 || (!f.Var && f.Bits > 64) {
				return fmt.Errorf("header %s: field %s has %d bits", h.Name, f.Name, f.Bits)
			}
			if !f.Var {
				v.refs["hdr."+h.Name+"."+f.Name] = f.Bits
			}
		}
	}
	for _, f := range v.p.Metadata {
		if err := uniq("metadata", f.Name); err != nil {
			return err
		}
		if f.Bits < 1 || f.Bits > 64 {
			return fmt.Errorf("metadata %s has %d bits", f.Name, f.Bits)
		}
		v.refs["meta."+f.Name] = f.Bits
	}
	for _, f := range StdMeta {
		v.refs["standard_metadata."+f.Name] = f.Bits
	}
	for _, r := range v.p.Registers {
		if err := uniq("register", r.Name); err != nil {
			return err
		}
		switch r.Width {
		case 1, 8, 16, 32, 64:
		default:
			return fmt.Errorf("register %s is %d bits wide; a switch has registers of 1, 8, 16, 32 or 64 bits", r.Name, r.Width)
		}
		if r.Size < 1 {
			return fmt.Errorf("register %s has %d cells", r.Name, r.Size)
		}
	}
	for _, c := range v.p.Counters {
		if err := uniq("counter", c.Name); err != nil {
			return err
		}
		if c.Size < 1 || c.Type < Packets || c.Type > PacketsAndBytes {
			return fmt.Errorf("counter %s has %d cells or no type", c.Name, c.Size)
		}
	}
	for _, d := range v.p.Digests {
		if err := uniq("digest", d.Name); err != nil {
			return err
		}
	}
	states := map[string]bool{Accept: true, Reject: true}
	for _, s := range v.p.Parser {
		if err := uniq("parser state", s.Name); err != nil {
			return err
		}
		states[s.Name] = true
	}
	if len(v.p.Parser) == 0 {
		return fmt.Errorf("program %s has no parser state", v.p.Name)
	}
	for _, s := range v.p.Parser {
		for _, h := range s.Extract {
			if v.p.Header(h) == nil {
				return fmt.Errorf("parser state %s extracts undeclared header %s", s.Name, h)
			}
		}
		if s.VarBits != nil {
			if err := v.expr(s.VarBits, nil); err != nil {
				return fmt.Errorf("parser state %s: %v", s.Name, err)
			}
		}
		for _, e := range s.Select {
			if err := v.expr(e, nil); err != nil {
				return fmt.Errorf("parser state %s: %v", s.Name, err)
			}
		}
		for _, c := range s.Cases {
			if len(c.Values) != len(s.Select) || (c.Masks != nil && len(c.Masks) != len(s.Select)) {
				return fmt.Errorf("parser state %s: a case has %d values for %d select expressions", s.Name, len(c.Values), len(s.Select))
			}
			if !states[c.Next] {
				return fmt.Errorf("parser state %s goes to undeclared state %s", s.Name, c.Next)
			}
		}
		if !states[s.Default] {
			return fmt.Errorf("parser state %s goes to undeclared state %q", s.Name, s.Default)
		}
	}
	for _, a := range v.p.Actions {
		if err := uniq("action", a.Name); err != nil {
			return err
		}
		params := map[string]int{}
		for _, f := range a.Params {
			if f.Bits < 1 || f.Bits > 64 {
				return fmt.Errorf("action %s: parameter %s has %d bits", a.Name, f.Name, f.Bits)
			}
			params[f.Name] = f.Bits
		}
		if err := v.stmts(a.Body, params, true); err != nil {
			return fmt.Errorf("action %s: %v", a.Name, err)
		}
	}
	actions := map[*Action]bool{}
	for _, a := range v.p.Actions {
		actions[a] = true
	}
	for _, t := range v.p.Tables {
		if err := uniq("table", t.Name); err != nil {
			return err
		}
		for _, k := range t.Keys {
			if err := v.expr(k.X, nil); err != nil {
				return fmt.Errorf("table %s: %v", t.Name, err)
			}
			if k.Match < Exact || k.Match > Range {
				return fmt.Errorf("table %s: a key has no match kind", t.Name)
			}
		}
		for _, a := range append(append([]*Action(nil), t.Actions...), t.Default) {
			if a == nil || !actions[a] {
				return fmt.Errorf("table %s refers to an undeclared action", t.Name)
			}
		}
		if t.Size < 1 {
			return fmt.Errorf("table %s has size %d", t.Name, t.Size)
		}
		for i, e := range t.Entries {
			if len(e.Match) != len(t.Keys) {
				return fmt.Errorf("table %s: entry %d has %d matches for %d keys", t.Name, i, len(e.Match), len(t.Keys))
			}
			if len(e.Args) != len(e.Action.Params) {
				return fmt.Errorf("table %s: entry %d gives %d arguments to %s", t.Name, i, len(e.Args), e.Action.Name)
			}
		}
	}
	for i, body := range [][]Stmt{v.p.Ingress, v.p.Egress} {
		v.egress = i == 1
		if err := v.stmts(body, nil, false); err != nil {
			return err
		}
	}
	v.egress = false
	in, err := rmwOnce(v.p.Ingress, nil)
	if err != nil {
		return err
	}
	eg, err := rmwOnce(v.p.Egress, nil)
	if err != nil {
		return err
	}
	for r := range eg {
		if in[r] {
			return fmt.Errorf("register %s is accessed in ingress and in egress: a register belongs to one pipeline", r.Name)
		}
	}
	for _, h := range v.p.Deparse {
		if v.p.Header(h) == nil {
			return fmt.Errorf("deparser emits undeclared header %s", h)
		}
	}
	return nil
}

func (v *validator) bits(path string, params map[string]int) (int, bool) {
	if b, ok := params[path]; ok {
		return b, true
	}
	b, ok := v.refs[path]
	return b, ok
}

func (v *validator) stmts(ss []Stmt, params map[string]int, inAction bool) error {
	for _, s := range ss {
		if err := v.stmt(s, params, inAction); err != nil {
			return err
		}
	}
	return nil
}

func (v *validator) place(r Ref, params map[string]int) error {
	b, ok := v.bits(r.Path, params)
	switch {
	case !ok:
		return fmt.Errorf("%s is not declared", r.Path)
	case b != r.Bits:
		return fmt.Errorf("%s is bit<%d>, not bit<%d>", r.Path, b, r.Bits)
	}
	return nil
}

func (v *validator) want(e Expr, t Type, params map[string]int) error {
	if err := v.expr(e, params); err != nil {
		return err
	}
	if e.Type() != t {
		return fmt.Errorf("%s where %s is wanted", e.Type(), t)
	}
	return nil
}

func (v *validator) stmt(s Stmt, params map[string]int, inAction bool) error {
	switch s := s.(type) {
	case Assign:
		if err := v.place(s.Dst, params); err != nil {
			return err
		}
		return v.want(s.X, s.Dst.Type(), params)
	case If:
		if inAction {
			return fmt.Errorf("an action cannot branch (if on %v)", s.Cond)
		}
		if err := v.want(s.Cond, Bool, params); err != nil {
			return err
		}
		if err := v.stmts(s.Then, params, false); err != nil {
			return err
		}
		return v.stmts(s.Else, params, false)
	case Apply:
		if inAction {
			return fmt.Errorf("an action cannot apply table %s", s.Table.Name)
		}
		if v.p.Table(s.Table.Name) != s.Table {
			return fmt.Errorf("table %s is not declared", s.Table.Name)
		}
	case Call:
		if len(s.Args) != len(s.Action.Params) {
			return fmt.Errorf("%s takes %d arguments, not %d", s.Action.Name, len(s.Action.Params), len(s.Args))
		}
		for i, a := range s.Args {
			if err := v.want(a, Bit(s.Action.Params[i].Bits), params); err != nil {
				return fmt.Errorf("%s's argument %s: %v", s.Action.Name, s.Action.Params[i].Name, err)
			}
		}
	case Hash:
		if err := v.place(s.Dst, params); err != nil {
			return err
		}
		if s.Algo < CRC32 || s.Algo > Identity {
			return fmt.Errorf("hash into %s has no algorithm", s.Dst.Path)
		}
		total := 0
		for _, d := range s.Data {
			if err := v.expr(d, params); err != nil {
				return err
			}
			if d.Type().IsBool() {
				return fmt.Errorf("hash data is bool, not bits")
			}
			total += d.Type().Bits
		}
		if total%8 != 0 {
			return fmt.Errorf("hash into %s: its data has %d bits; pad it to whole bytes", s.Dst.Path, total)
		}
	case Random:
		if err := v.place(s.Dst, params); err != nil {
			return err
		}
		if s.Lo > s.Hi || s.Hi > s.Dst.Type().Mask() {
			return fmt.Errorf("random into %s: [%d, %d] does not fit", s.Dst.Path, s.Lo, s.Hi)
		}
	case RMW:
		if v.p.Register(s.Reg.Name) != s.Reg {
			return fmt.Errorf("register %s is not declared", s.Reg.Name)
		}
		if err := v.want(s.Index, Bit(32), params); err != nil {
			return fmt.Errorf("register %s's index: %v", s.Reg.Name, err)
		}
		if err := v.want(s.New, Bit(s.Reg.Width), params); err != nil {
			return fmt.Errorf("register %s's new value: %v", s.Reg.Name, err)
		}
		if s.Cond != nil {
			if err := v.want(s.Cond, Bool, params); err != nil {
				return fmt.Errorf("register %s's condition: %v", s.Reg.Name, err)
			}
		}
		for _, r := range []*Ref{s.OldTo, s.NewTo} {
			if r != nil {
				if err := v.place(*r, params); err != nil {
					return err
				}
				if r.Bits != s.Reg.Width {
					return fmt.Errorf("register %s is %d bits wide, %s %d", s.Reg.Name, s.Reg.Width, r.Path, r.Bits)
				}
			}
		}
	case Count:
		found := false
		for _, c := range v.p.Counters {
			found = found || c == s.Counter
		}
		if !found {
			return fmt.Errorf("counter %s is not declared", s.Counter.Name)
		}
		return v.want(s.Index, Bit(32), params)
	case Digest:
		if len(s.Values) != len(s.Type.Fields) {
			return fmt.Errorf("digest %s has %d fields, given %d values", s.Type.Name, len(s.Type.Fields), len(s.Values))
		}
		for i, x := range s.Values {
			if err := v.want(x, Bit(s.Type.Fields[i].Bits), params); err != nil {
				return fmt.Errorf("digest %s's %s: %v", s.Type.Name, s.Type.Fields[i].Name, err)
			}
		}
	case Clone:
		if s.E2E && !v.egress {
			return fmt.Errorf("clone to session %d: an egress-to-egress clone is made in egress", s.Session)
		}
		if !s.E2E && len(s.Preserve) > 0 {
			return fmt.Errorf("clone to session %d: only an egress-to-egress clone preserves metadata here", s.Session)
		}
		for _, r := range s.Preserve {
			if !strings.HasPrefix(r.Path, "meta.") {
				return fmt.Errorf("clone to session %d preserves %s, which is not metadata", s.Session, r.Path)
			}
			if err := v.place(r, params); err != nil {
				return err
			}
		}
	case MarkToDrop:
	case SetValid:
		if v.p.Header(s.Header) == nil {
			return fmt.Errorf("header %s is not declared", s.Header)
		}
	default:
		return fmt.Errorf("unknown statement %T", s)
	}
	return nil
}

func (v *validator) expr(e Expr, params map[string]int) error {
	switch e := e.(type) {
	case Const:
		if e.Bits < 0 || e.Bits > 64 || e.Value&^e.Type().Mask() != 0 {
			return fmt.Errorf("constant %d does not fit %s", e.Value, e.Type())
		}
	case Ref:
		return v.place(e, params)
	case Valid:
		if v.p.Header(e.Header) == nil {
			return fmt.Errorf("header %s is not declared", e.Header)
		}
	case Old:
		if e.Bits < 1 || e.Bits > 64 {
			return fmt.Errorf("a register value of %d bits", e.Bits)
		}
	case Unary:
		if err := v.expr(e.X, params); err != nil {
			return err
		}
		if (e.Op == Not) != e.X.Type().IsBool() {
			return fmt.Errorf("operator %d on %s", e.Op, e.X.Type())
		}
	case Binary:
		if err := v.expr(e.L, params); err != nil {
			return err
		}
		if err := v.expr(e.R, params); err != nil {
			return err
		}
		lt, rt := e.L.Type(), e.R.Type()
		switch {
		case e.Op == LAnd || e.Op == LOr:
			if !lt.IsBool() || !rt.IsBool() {
				return fmt.Errorf("%s of %s and %s", e.Op, lt, rt)
			}
		case e.Op == Shl || e.Op == Shr:
			if _, ok := e.R.(Const); !ok || lt.IsBool() {
				return fmt.Errorf("%s shifts by a constant", e.Op)
			}
		case lt != rt:
			return fmt.Errorf("%s of %s and %s: cast one", e.Op, lt, rt)
		case lt.IsBool() && e.Op != Eq && e.Op != Ne:
			return fmt.Errorf("%s of bools", e.Op)
		}
	case Cast:
		if e.Bits < 1 || e.Bits > 64 {
			return fmt.Errorf("cast to %d bits", e.Bits)
		}
		return v.expr(e.X, params)
	case Slice:
		if err := v.expr(e.X, params); err != nil {
			return err
		}
		if e.Lo < 0 || e.Hi < e.Lo || e.Hi >= e.X.Type().Bits {
			return fmt.Errorf("slice [%d:%d] of %s", e.Hi, e.Lo, e.X.Type())
		}
	case Mux:
		if err := v.want(e.Cond, Bool, params); err != nil {
			return err
		}
		if err := v.expr(e.Then, params); err != nil {
			return err
		}
		return v.want(e.Else, e.Then.Type(), params)
	default:
		return fmt.Errorf("unknown expression %T", e)
	}
	return nil
}

// rmwOnce returns the registers ss access after those of done, or an
// error naming one that a path through ss (a branch of an If, an action
// of a table) accesses twice: a stateful ALU reads and writes a register
// once per packet.
func rmwOnce(ss []Stmt, done map[*Register]bool) (map[*Register]bool, error) {
	cur := map[*Register]bool{}
	for r := range done {
		cur[r] = true
	}
	branch := func(alts ...[]Stmt) error {
		union := map[*Register]bool{}
		for _, alt := range alts {
			got, err := rmwOnce(alt, cur)
			if err != nil {
				return err
			}
			for r := range got {
				union[r] = true
			}
		}
		cur = union
		return nil
	}
	for _, s := range ss {
		switch s := s.(type) {
		case RMW:
			if cur[s.Reg] {
				return nil, fmt.Errorf("register %s is accessed twice by one packet: a stateful ALU reads and writes it once", s.Reg.Name)
			}
			cur[s.Reg] = true
		case If:
			if err := branch(s.Then, s.Else); err != nil {
				return nil, err
			}
		case Call:
			if err := branch(s.Action.Body); err != nil {
				return nil, err
			}
		case Apply:
			var alts [][]Stmt
			for _, a := range append(append([]*Action(nil), s.Table.Actions...), s.Table.Default) {
				alts = append(alts, a.Body)
			}
			if err := branch(alts...); err != nil {
				return nil, err
			}
		}
	}
	return cur, nil
}
