package p4

import "strconv"

// Kind is the kind of a Type.
type Kind uint8

const (
	KBit       Kind = iota + 1 // bit<Width>
	KVarbit                    // varbit<Width>
	KBool                      // bool
	KInt                       // an unsized integer (a literal)
	KHeader                    // a header type (Decl *HeaderDecl)
	KStruct                    // a struct type (Decl *StructDecl; nil for standard_metadata_t)
	KEnum                      // CounterType, HashAlgorithm, CloneType, error
	KExtern                    // register (Elem, Size), counter (Size), packet_in, packet_out
	KTable                     // a table (Decl *TableDecl)
	KAction                    // an action (Decl *ActionDecl)
	KList                      // "{...}" (Elems)
	KBlock                     // a parser or control declaration (Decl)
	KString                    // a string literal
	KMatchKind                 // exact, ternary, ...
)

// Type is the type of an expression or a declaration.
type Type struct {
	Kind  Kind
	Width int
	Name  string // of a named type, enum or extern
	Decl  Node
	// Fields of a header or struct, in order.
	Fields []*Field
	// Elem is a register's cell type; Size a register's or counter's cells.
	Elem  *Type
	Size  uint64
	Elems []*Type
	// Members of an enum.
	Members []string
}

// Field is a field of a header or struct type.
type Field struct {
	Name string
	Type *Type
}

// Field returns the field named n.
func (t *Type) Field(n string) *Field {
	for _, f := range t.Fields {
		if f.Name == n {
			return f
		}
	}
	return nil
}

// String names the type as P4 writes it.
func (t *Type) String() string {
	if t == nil {
		return "?"
	}
	switch t.Kind {
	case KBit:
		return "bit<" + strconv.Itoa(t.Width) + ">"
	case KVarbit:
		return "varbit<" + strconv.Itoa(t.Width) + ">"
	case KBool:
		return "bool"
	case KInt:
		return "int"
	case KList:
		return "a list"
	case KTable:
		return "table " + t.Name
	case KAction:
		return "action " + t.Name
	case KString:
		return "string"
	case KMatchKind:
		return "match_kind"
	}
	return t.Name
}

// Mask returns the values a bit<W> (or bool) holds: its low W bits.
func (t *Type) Mask() uint64 {
	switch {
	case t.Kind == KBool:
		return 1
	case t.Width >= 64 || t.Kind != KBit:
		return ^uint64(0)
	}
	return 1<<uint(t.Width) - 1
}

func bitT(w int) *Type { return &Type{Kind: KBit, Width: w} }

var (
	boolT   = &Type{Kind: KBool}
	intT    = &Type{Kind: KInt}
	stringT = &Type{Kind: KString}
)

func same(a, b *Type) bool {
	if a == nil || b == nil || a.Kind != b.Kind {
		return false
	}
	switch a.Kind {
	case KBit, KVarbit:
		return a.Width == b.Width
	case KHeader, KStruct, KEnum, KExtern:
		return a.Name == b.Name
	}
	return true
}

// v1model's declarations that the subset uses, built in rather than read
// from v1model.p4.
var (
	stdMetaT = &Type{Kind: KStruct, Name: "standard_metadata_t", Fields: []*Field{
		{"ingress_port", bitT(9)}, {"egress_spec", bitT(9)}, {"egress_port", bitT(9)},
		{"instance_type", bitT(32)}, {"packet_length", bitT(32)},
		{"enq_timestamp", bitT(32)}, {"enq_qdepth", bitT(19)}, {"deq_timedelta", bitT(32)}, {"deq_qdepth", bitT(19)},
		{"ingress_global_timestamp", bitT(48)}, {"egress_global_timestamp", bitT(48)},
		{"mcast_grp", bitT(16)}, {"egress_rid", bitT(16)}, {"checksum_error", bitT(1)},
		{"parser_error", errorT}, {"priority", bitT(3)},
	}}
	errorT = &Type{Kind: KEnum, Name: "error", Members: []string{"NoError", "PacketTooShort", "NoMatch",
		"StackOutOfBounds", "HeaderTooShort", "ParserTimeout", "ParserInvalidArgument"}}
	counterTypeT   = &Type{Kind: KEnum, Name: "CounterType", Members: []string{"packets", "bytes", "packets_and_bytes"}}
	hashAlgorithmT = &Type{Kind: KEnum, Name: "HashAlgorithm", Members: []string{"crc32", "crc32_custom", "crc16",
		"crc16_custom", "random", "identity", "csum16", "xor16"}}
	cloneTypeT = &Type{Kind: KEnum, Name: "CloneType", Members: []string{"I2E", "E2E"}}
	packetInT  = &Type{Kind: KExtern, Name: "packet_in"}
	packetOutT = &Type{Kind: KExtern, Name: "packet_out"}
	matchKinds = []string{"exact", "ternary", "lpm", "range", "optional", "selector"}
	// externFuncs are v1model's extern functions.
	externFuncs = []string{"hash", "random", "digest", "clone", "clone_preserving_field_list", "mark_to_drop", "update_checksum", "verify_checksum"}
)
