// Package p4info writes the P4Info of a program a p4 flowspace runs
// (functions/p4gen's Program, as its printer printed it): the P4Runtime
// names and ids of its tables, actions, counters, registers, digests and
// controller headers, as p4c writes them for v1model.
//
// The sharp edge: it is the one package of the IR that needs P4Runtime's
// generated protobuf types, whose initialisation every process that links
// them pays at start-up; p4gen, which every class's lowering imports,
// does not import it.
package p4info

import (
	"fmt"
	"github.com/ffpf-go/ffpf/functions/p4gen"
	"slices"
	"sort"
	"strings"

	p4v1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	"google.golang.org/protobuf/encoding/prototext"
)

// Of returns the P4Info of a printed program as p4c writes it for
// v1model: tables, actions, counters and registers under their fully
// qualified names ("ffpf_ingress.cms_2_row0"), digests under their
// struct type's name, each alias the shortest suffix of dotted
// components that no other name shares, and IDs as p4c computes them:
// the resource type's prefix in the top byte and the low 24 bits of the
// Jenkins one-at-a-time hash of the name below, probing upwards past an
// ID already taken, names of one type taken in sorted order.
func Of(p *p4gen.Program, pr *p4gen.Printed) *p4v1.P4Info {
	info := &p4v1.P4Info{PkgInfo: &p4v1.PkgInfo{Arch: "v1model"}}
	ids := newIDs()
	// The controls an action is declared in.
	actionNames := func(a *p4gen.Action) []string {
		if pr.Shared[a] {
			return []string{p4gen.IngressName + "." + a.Name, p4gen.EgressName + "." + a.Name}
		}
		return []string{pr.Name(a)}
	}
	for _, a := range p.Actions {
		for _, n := range actionNames(a) {
			ids.add(p4v1.P4Ids_ACTION, n)
		}
	}
	for _, t := range p.Tables {
		ids.add(p4v1.P4Ids_TABLE, pr.Name(t))
	}
	for _, c := range p.Counters {
		ids.add(p4v1.P4Ids_COUNTER, pr.Name(c))
	}
	for _, r := range p.Registers {
		ids.add(p4v1.P4Ids_REGISTER, pr.Name(r))
	}
	for _, d := range p.Digests {
		ids.add(p4v1.P4Ids_DIGEST, d.Name)
	}
	for _, h := range p.HeaderTypes {
		if h.Controller != "" {
			ids.add(p4v1.P4Ids_CONTROLLER_HEADER, h.Controller)
		}
	}
	ids.compute()
	pre := func(kind p4v1.P4Ids_Prefix, name string) *p4v1.Preamble {
		return &p4v1.Preamble{Id: ids.id[kind][name], Name: name, Alias: ids.alias(name)}
	}
	bitSpec := func(w int) *p4v1.P4DataTypeSpec {
		return &p4v1.P4DataTypeSpec{TypeSpec: &p4v1.P4DataTypeSpec_Bitstring{Bitstring: &p4v1.P4BitstringLikeTypeSpec{
			TypeSpec: &p4v1.P4BitstringLikeTypeSpec_Bit{Bit: &p4v1.P4BitTypeSpec{Bitwidth: int32(w)}}}}}
	}
	for _, a := range p.Actions {
		for _, n := range actionNames(a) {
			act := &p4v1.Action{Preamble: pre(p4v1.P4Ids_ACTION, n)}
			for i, f := range a.Params {
				act.Params = append(act.Params, &p4v1.Action_Param{Id: uint32(i + 1), Name: f.Name, Bitwidth: int32(f.Bits)})
			}
			info.Actions = append(info.Actions, act)
		}
	}
	for _, t := range p.Tables {
		ctl := pr.Control[t]
		tb := &p4v1.Table{Preamble: pre(p4v1.P4Ids_TABLE, pr.Name(t)), Size: int64(t.Size), IsConstTable: t.Const}
		for i, k := range t.Keys {
			mf := &p4v1.MatchField{Id: uint32(i + 1), Name: KeyName(k), Bitwidth: int32(max(k.X.Type().Bits, 1))}
			mf.Match = &p4v1.MatchField_MatchType_{MatchType: map[p4gen.MatchKind]p4v1.MatchField_MatchType{
				p4gen.Exact: p4v1.MatchField_EXACT, p4gen.Ternary: p4v1.MatchField_TERNARY, p4gen.LPM: p4v1.MatchField_LPM, p4gen.Range: p4v1.MatchField_RANGE}[k.Match]}
			tb.MatchFields = append(tb.MatchFields, mf)
		}
		for _, a := range t.Actions {
			tb.ActionRefs = append(tb.ActionRefs, &p4v1.ActionRef{Id: ids.id[p4v1.P4Ids_ACTION][ctl+"."+a.Name]})
		}
		if !slices.Contains(t.Actions, t.Default) {
			tb.ActionRefs = append(tb.ActionRefs, &p4v1.ActionRef{Id: ids.id[p4v1.P4Ids_ACTION][ctl+"."+t.Default.Name],
				Scope: p4v1.ActionRef_DEFAULT_ONLY, Annotations: []string{"@defaultonly"}})
		}
		info.Tables = append(info.Tables, tb)
	}
	for _, c := range p.Counters {
		unit := map[p4gen.CounterType]p4v1.CounterSpec_Unit{p4gen.Packets: p4v1.CounterSpec_PACKETS, p4gen.Bytes: p4v1.CounterSpec_BYTES,
			p4gen.PacketsAndBytes: p4v1.CounterSpec_BOTH}[c.Type]
		info.Counters = append(info.Counters, &p4v1.Counter{Preamble: pre(p4v1.P4Ids_COUNTER, pr.Name(c)),
			Spec: &p4v1.CounterSpec{Unit: unit}, Size: int64(c.Size)})
	}
	for _, r := range p.Registers {
		info.Registers = append(info.Registers, &p4v1.Register{Preamble: pre(p4v1.P4Ids_REGISTER, pr.Name(r)),
			TypeSpec: bitSpec(r.Width), Size: int32(r.Size)})
	}
	for _, d := range p.Digests {
		info.Digests = append(info.Digests, &p4v1.Digest{Preamble: pre(p4v1.P4Ids_DIGEST, d.Name),
			TypeSpec: &p4v1.P4DataTypeSpec{TypeSpec: &p4v1.P4DataTypeSpec_Struct{Struct: &p4v1.P4NamedType{Name: d.Name}}}})
		if info.TypeInfo == nil {
			info.TypeInfo = &p4v1.P4TypeInfo{Structs: map[string]*p4v1.P4StructTypeSpec{}}
		}
		st := &p4v1.P4StructTypeSpec{}
		for _, f := range d.Fields {
			st.Members = append(st.Members, &p4v1.P4StructTypeSpec_Member{Name: f.Name, TypeSpec: bitSpec(f.Bits)})
		}
		info.TypeInfo.Structs[d.Name] = st
	}
	// A controller header (@controller_header("packet_in")): its fields
	// are the metadata of a PacketIn (PacketOut), ids from 1 in order.
	for _, h := range p.HeaderTypes {
		if h.Controller == "" {
			continue
		}
		m := &p4v1.ControllerPacketMetadata{Preamble: pre(p4v1.P4Ids_CONTROLLER_HEADER, h.Controller)}
		for i, f := range h.Fields {
			m.Metadata = append(m.Metadata, &p4v1.ControllerPacketMetadata_Metadata{Id: uint32(i + 1), Name: f.Name, Bitwidth: int32(f.Bits)})
		}
		info.ControllerPacketMetadata = append(info.ControllerPacketMetadata, m)
	}
	return info
}

// KeyName is the name of a table key in the P4Info, as p4c names it: the
// key's expression ("hdr.ipv4.dst_addr"), "hdr.tcp.$valid$" for
// hdr.tcp.isValid().
func KeyName(k p4gen.TableKey) string {
	switch x := k.X.(type) {
	case p4gen.Ref:
		return x.Path
	case p4gen.Valid:
		return "hdr." + x.Header + ".$valid$"
	}
	return fmt.Sprint(k.X)
}

// Text prints a P4Info as protobuf text (p4info.txtpb).
func Text(info *p4v1.P4Info) ([]byte, error) {
	return prototext.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(info)
}

// ids assigns P4Runtime IDs as p4c's P4RuntimeSymbolTable does.
type ids struct {
	names    map[p4v1.P4Ids_Prefix][]string
	id       map[p4v1.P4Ids_Prefix]map[string]uint32
	suffixes map[string]int // every dotted suffix of every name → how many names end with it
}

func newIDs() *ids {
	return &ids{names: map[p4v1.P4Ids_Prefix][]string{}, id: map[p4v1.P4Ids_Prefix]map[string]uint32{}, suffixes: map[string]int{}}
}

func (s *ids) add(kind p4v1.P4Ids_Prefix, name string) {
	if slices.Contains(s.names[kind], name) {
		return
	}
	s.names[kind] = append(s.names[kind], name)
	if !s.known(name) {
		parts := strings.Split(name, ".")
		for i := range parts {
			s.suffixes[strings.Join(parts[i:], ".")]++
		}
	}
}

// known reports whether name was added under any kind (the suffix set
// counts a name once).
func (s *ids) known(name string) bool {
	n := 0
	for _, ns := range s.names {
		if slices.Contains(ns, name) {
			n++
		}
	}
	return n > 1
}

// compute assigns the IDs: kinds in prefix order, names of a kind sorted,
// each the prefix and the name's hash, probing past taken IDs.
func (s *ids) compute() {
	taken := map[uint32]bool{}
	kinds := make([]p4v1.P4Ids_Prefix, 0, len(s.names))
	for k := range s.names {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		names := slices.Clone(s.names[k])
		sort.Strings(names)
		s.id[k] = map[string]uint32{}
		for _, n := range names {
			h := JenkinsHash(n)
			for v := h; ; v++ {
				id := uint32(k)<<24 | v&0xffffff
				if !taken[id] {
					taken[id] = true
					s.id[k][n] = id
					break
				}
			}
		}
	}
}

// alias is the shortest suffix of name's dotted components that no other
// name has.
func (s *ids) alias(name string) string {
	parts := strings.Split(name, ".")
	for i := len(parts) - 1; i > 0; i-- {
		if suf := strings.Join(parts[i:], "."); s.suffixes[suf] < 2 {
			return suf
		}
	}
	return name
}

// JenkinsHash is Bob Jenkins' one-at-a-time hash, which p4c applies to a
// name to make its P4Runtime ID.
func JenkinsHash(s string) uint32 {
	var h uint32
	for i := 0; i < len(s); i++ {
		h += uint32(s[i])
		h += h << 10
		h ^= h >> 6
	}
	h += h << 3
	h ^= h >> 11
	h += h << 15
	return h
}
