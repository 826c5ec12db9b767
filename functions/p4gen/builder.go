package p4gen

import (
	"fmt"
	"strings"
)

// Function is one function's P4 code: the value a class's Code hook
// returns for functions.TargetP4.
type Function interface {
	// Lower declares the function's registers, counters, tables, actions,
	// digests and metadata in b.Prog (through b, so that their names carry
	// the function's prefix) and appends its ingress statements to b.Body.
	Lower(b *Builder) error
}

// Builder is what one function is lowered into. The flowspace makes one
// per function placed on the switch, in topological order, and chains
// them: it runs a function's Body only for the packets that reach it (In)
// and lets those for which Pass holds on to its dependents.
type Builder struct {
	Prog *Program
	// ID is the function's id ("cms#2"); Prefix is a P4 identifier unique
	// to it ("cms_2"), which every name it declares starts with.
	ID, Prefix string
	// In holds for the packets that reach the function: its inputs passed
	// them. A lowering may read it (a counter of the packets a function
	// saw) but need not test it: Body runs under it.
	In Expr
	// Body receives the function's statements.
	Body []Stmt
	// Pass, set by a filter, is the condition under which a packet that
	// reached the function passes it; nil passes every packet.
	Pass Expr
	// Time is the packet's time on the switch's clock, in TimeUnit
	// nanoseconds (ingress_global_timestamp, µs on bmv2).
	Time     Ref
	TimeUnit int64
	// StateOf returns what the function labelled label exported (named
	// state, read where it is written: DESIGN.md §11, rule 4), when it is
	// lowered on this switch before this one.
	StateOf func(label string) (map[string]Expr, bool)

	// Window, set by a function with a window, is how the controller
	// reads its windows (see Window).
	Window *Window

	// The switch's own values a lowering may read (MAFIA's switch.id,
	// pkt.output_port, pkt.in_queue_length), when the program that
	// assembles the functions has them: its id, the port forwarding chose
	// for the packet (nil: it is chosen after the functions, as a filter
	// switch chooses its uplink) and the depth of the egress queue the
	// packet joins (nil in ingress, where v1model does not know it).
	SwitchID Expr
	OutPort  Expr
	QDepth   Expr

	exports map[string]Expr
}

// Name returns a P4 identifier of the function's: Prefix_name.
func (b *Builder) Name(name string) string { return b.Prefix + "_" + name }

// Add appends statements to the function's Body.
func (b *Builder) Add(ss ...Stmt) { b.Body = append(b.Body, ss...) }

// Meta declares metadata field meta.<Prefix>_<name> of bits bits and
// returns it.
func (b *Builder) Meta(name string, bits int) Ref {
	n := b.Name(name)
	b.Prog.Metadata = append(b.Prog.Metadata, Field{Name: n, Bits: bits})
	return Ref{Path: "meta." + n, Bits: bits}
}

// Register declares a register of size cells of width bits whose cell i
// is value base+i of the function's MBuf field field.
func (b *Builder) Register(name string, width, size int, field string, base int) *Register {
	r := &Register{Name: b.Name(name), Width: width, Size: size, Owner: b.ID, Field: field, Base: base}
	b.Prog.Registers = append(b.Prog.Registers, r)
	return r
}

// Counter declares a counter of size cells counting t, read into the
// function's MBuf fields packets and bytes ("" for none) at base+i.
func (b *Builder) Counter(name string, size int, t CounterType, packets, bytes string, base int) *Counter {
	c := &Counter{Name: b.Name(name), Size: size, Type: t, Owner: b.ID, FieldPackets: packets, FieldBytes: bytes, Base: base}
	b.Prog.Counters = append(b.Prog.Counters, c)
	return c
}

// Action declares an action with parameters params and body.
func (b *Builder) Action(name string, params []Field, body ...Stmt) *Action {
	a := &Action{Name: b.Name(name), Params: params, Body: body}
	b.Prog.Actions = append(b.Prog.Actions, a)
	return a
}

// Table declares t, its name prefixed; its actions must be the
// function's (Action).
func (b *Builder) Table(t *Table) *Table {
	t.Name = b.Name(t.Name)
	b.Prog.Tables = append(b.Prog.Tables, t)
	return t
}

// Digest declares a digest type of the function's.
func (b *Builder) Digest(name string, fields []Field) *DigestType {
	d := &DigestType{Name: b.Name(name), Fields: fields, Owner: b.ID}
	b.Prog.Digests = append(b.Prog.Digests, d)
	return d
}

// Export makes x, a value the function computed for the packet (a
// sketch's estimate for its key), readable by name by later functions
// of its request on this switch (StateOf).
func (b *Builder) Export(name string, x Expr) {
	if b.exports == nil {
		b.exports = map[string]Expr{}
	}
	b.exports[name] = x
}

// Exports returns what the function exported.
func (b *Builder) Exports() map[string]Expr { return b.exports }

// Ident turns a function id ("cms#2", "bpf#10") into a P4 identifier
// prefix ("cms_2"): what is not a letter, digit or underscore becomes an
// underscore, and a leading digit gets one.
func Ident(id string) string {
	var sb strings.Builder
	for i, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '_', r >= '0' && r <= '9' && i > 0:
			sb.WriteRune(r)
		case r >= '0' && r <= '9':
			sb.WriteString("_")
			sb.WriteRune(r)
		default:
			sb.WriteByte('_')
		}
	}
	return sb.String()
}

// Unsupported is the error a lowering returns for a function the switch
// cannot run, with the reason in the switch's terms; placement shows it.
func Unsupported(format string, args ...any) error {
	return fmt.Errorf(format, args...)
}
