package p4gen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
)

// The device config of the PISA model: a Program as JSON, what a P4Runtime
// SetForwardingPipelineConfig carries in p4_device_config for it, as bmv2
// takes the JSON p4c writes for it. Declarations are listed once and
// referred to by name (a table's actions, an Apply's table, an RMW's
// register); expressions and statements are objects tagged by kind. The
// decoder is strict: an unknown field, a field that its kind does not
// have, a dangling name or another format version is an error, and the
// program must Validate.

// JSONFormat and JSONVersion name the format; a reader refuses any other.
const (
	JSONFormat  = "ffpf-pisa-program"
	JSONVersion = 1
)

type jProgram struct {
	Format             string         `json:"format"`
	Version            int            `json:"version"`
	Name               string         `json:"name"`
	HeaderTypes        []jHeaderType  `json:"header_types"`
	Headers            []jHeader      `json:"headers"`
	Parser             []jParserState `json:"parser"`
	Metadata           []jField       `json:"metadata,omitempty"`
	Registers          []jRegister    `json:"registers,omitempty"`
	Counters           []jCounter     `json:"counters,omitempty"`
	Actions            []jAction      `json:"actions,omitempty"`
	Tables             []jTable       `json:"tables,omitempty"`
	Digests            []jDigest      `json:"digests,omitempty"`
	Ingress            []*jStmt       `json:"ingress,omitempty"`
	Egress             []*jStmt       `json:"egress,omitempty"`
	Deparse            []string       `json:"deparse,omitempty"`
	UpdateIPv4Checksum bool           `json:"update_ipv4_checksum,omitempty"`
}

type jHeaderType struct {
	Name       string   `json:"name"`
	Fields     []jField `json:"fields"`
	Controller string   `json:"controller,omitempty"`
}

type jField struct {
	Name string `json:"name"`
	Bits int    `json:"bits"`
	Var  bool   `json:"var,omitempty"`
}

type jRegister struct {
	Name  string `json:"name"`
	Width int    `json:"width"`
	Size  int    `json:"size"`
	Owner string `json:"owner,omitempty"`
	Field string `json:"field,omitempty"`
	Base  int    `json:"base,omitempty"`
}

type jCounter struct {
	Name         string `json:"name"`
	Size         int    `json:"size"`
	Type         string `json:"type"`
	Owner        string `json:"owner,omitempty"`
	FieldPackets string `json:"field_packets,omitempty"`
	FieldBytes   string `json:"field_bytes,omitempty"`
	Base         int    `json:"base,omitempty"`
}

type jDigest struct {
	Name   string   `json:"name"`
	Fields []jField `json:"fields"`
	Owner  string   `json:"owner,omitempty"`
}

type jCase struct {
	Values []uint64 `json:"values"`
	Masks  []uint64 `json:"masks,omitempty"`
	Next   string   `json:"next"`
}

type jMatch struct {
	Value     uint64 `json:"value,omitempty"`
	Mask      uint64 `json:"mask,omitempty"`
	PrefixLen int    `json:"prefix_len,omitempty"`
	Lo        uint64 `json:"lo,omitempty"`
	Hi        uint64 `json:"hi,omitempty"`
}

type jRef struct {
	Path string `json:"path"`
	Bits int    `json:"bits"`
}

type jHeader struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

type jParserState struct {
	Name    string   `json:"name"`
	Extract []string `json:"extract,omitempty"`
	VarBits *jExpr   `json:"var_bits,omitempty"`
	Select  []*jExpr `json:"select,omitempty"`
	Cases   []jCase  `json:"cases,omitempty"`
	Default string   `json:"default"`
}

type jAction struct {
	Name   string   `json:"name"`
	Params []jField `json:"params,omitempty"`
	Body   []*jStmt `json:"body,omitempty"`
}

type jTable struct {
	Name        string   `json:"name"`
	Keys        []jKey   `json:"keys,omitempty"`
	Actions     []string `json:"actions"`
	Default     string   `json:"default"`
	DefaultArgs []uint64 `json:"default_args,omitempty"`
	Size        int      `json:"size"`
	Const       bool     `json:"const,omitempty"`
	Entries     []jEntry `json:"entries,omitempty"`
}

type jKey struct {
	X     *jExpr `json:"x"`
	Match string `json:"match"`
}

type jEntry struct {
	Match    []jMatch `json:"match"`
	Priority int32    `json:"priority,omitempty"`
	Action   string   `json:"action"`
	Args     []uint64 `json:"args,omitempty"`
}

// jExpr is every expression kind in one struct; K says which, and only
// its fields may be set.
type jExpr struct {
	K      string `json:"k"`
	Value  uint64 `json:"value,omitempty"`
	Bits   int    `json:"bits,omitempty"`
	Path   string `json:"path,omitempty"`
	Header string `json:"header,omitempty"`
	Op     string `json:"op,omitempty"`
	X      *jExpr `json:"x,omitempty"`
	L      *jExpr `json:"l,omitempty"`
	R      *jExpr `json:"r,omitempty"`
	Cond   *jExpr `json:"cond,omitempty"`
	Then   *jExpr `json:"then,omitempty"`
	Else   *jExpr `json:"else,omitempty"`
	Hi     int    `json:"hi,omitempty"`
	Lo     int    `json:"lo,omitempty"`
}

// jStmt is every statement kind in one struct, as jExpr.
type jStmt struct {
	S        string   `json:"s"`
	Dst      *jRef    `json:"dst,omitempty"`
	X        *jExpr   `json:"x,omitempty"`
	Cond     *jExpr   `json:"cond,omitempty"`
	Then     []*jStmt `json:"then,omitempty"`
	Else     []*jStmt `json:"else,omitempty"`
	Table    string   `json:"table,omitempty"`
	Action   string   `json:"action,omitempty"`
	Args     []*jExpr `json:"args,omitempty"`
	Algo     string   `json:"algo,omitempty"`
	Base     uint64   `json:"base,omitempty"`
	Data     []*jExpr `json:"data,omitempty"`
	Max      uint64   `json:"max,omitempty"`
	Lo       uint64   `json:"lo,omitempty"`
	Hi       uint64   `json:"hi,omitempty"`
	Reg      string   `json:"register,omitempty"`
	Index    *jExpr   `json:"index,omitempty"`
	New      *jExpr   `json:"new,omitempty"`
	OldTo    *jRef    `json:"old_to,omitempty"`
	NewTo    *jRef    `json:"new_to,omitempty"`
	Counter  string   `json:"counter,omitempty"`
	Digest   string   `json:"digest,omitempty"`
	Values   []*jExpr `json:"values,omitempty"`
	Session  uint32   `json:"session,omitempty"`
	E2E      bool     `json:"e2e,omitempty"`
	Preserve []*jRef  `json:"preserve,omitempty"`
	Header   string   `json:"header,omitempty"`
	Valid    bool     `json:"valid,omitempty"`
}

// MarshalJSON writes p as the model's device config.
func (p *Program) MarshalJSON() ([]byte, error) {
	j := jProgram{Format: JSONFormat, Version: JSONVersion, Name: p.Name, Metadata: encFields(p.Metadata),
		Deparse: p.Deparse, UpdateIPv4Checksum: p.UpdateIPv4Checksum}
	for _, t := range p.HeaderTypes {
		j.HeaderTypes = append(j.HeaderTypes, jHeaderType{t.Name, encFields(t.Fields), t.Controller})
	}
	for _, r := range p.Registers {
		j.Registers = append(j.Registers, jRegister{r.Name, r.Width, r.Size, r.Owner, r.Field, r.Base})
	}
	for _, c := range p.Counters {
		t, ok := counterTypes[c.Type]
		if !ok {
			return nil, fmt.Errorf("counter %s has no type", c.Name)
		}
		j.Counters = append(j.Counters, jCounter{c.Name, c.Size, t, c.Owner, c.FieldPackets, c.FieldBytes, c.Base})
	}
	for _, d := range p.Digests {
		j.Digests = append(j.Digests, jDigest{d.Name, encFields(d.Fields), d.Owner})
	}
	for _, h := range p.Headers {
		if h.Type == nil {
			return nil, fmt.Errorf("header %s has no type", h.Name)
		}
		j.Headers = append(j.Headers, jHeader{h.Name, h.Type.Name})
	}
	var err error
	for _, s := range p.Parser {
		js := jParserState{Name: s.Name, Extract: s.Extract, Default: s.Default}
		for _, c := range s.Cases {
			js.Cases = append(js.Cases, jCase{c.Values, c.Masks, c.Next})
		}
		if s.VarBits != nil {
			if js.VarBits, err = encExpr(s.VarBits); err != nil {
				return nil, err
			}
		}
		if js.Select, err = encExprs(s.Select); err != nil {
			return nil, err
		}
		j.Parser = append(j.Parser, js)
	}
	for _, a := range p.Actions {
		body, err := encStmts(a.Body)
		if err != nil {
			return nil, fmt.Errorf("action %s: %v", a.Name, err)
		}
		j.Actions = append(j.Actions, jAction{a.Name, encFields(a.Params), body})
	}
	for _, t := range p.Tables {
		jt := jTable{Name: t.Name, DefaultArgs: t.DefaultArgs, Size: t.Size, Const: t.Const}
		if t.Default == nil {
			return nil, fmt.Errorf("table %s has no default action", t.Name)
		}
		jt.Default = t.Default.Name
		for _, a := range t.Actions {
			jt.Actions = append(jt.Actions, a.Name)
		}
		for _, k := range t.Keys {
			x, err := encExpr(k.X)
			if err != nil {
				return nil, fmt.Errorf("table %s: %v", t.Name, err)
			}
			jt.Keys = append(jt.Keys, jKey{x, k.Match.String()})
		}
		for _, e := range t.Entries {
			if e.Action == nil {
				return nil, fmt.Errorf("table %s: an entry has no action", t.Name)
			}
			je := jEntry{Priority: e.Priority, Action: e.Action.Name, Args: e.Args}
			for _, m := range e.Match {
				je.Match = append(je.Match, jMatch(m))
			}
			jt.Entries = append(jt.Entries, je)
		}
		j.Tables = append(j.Tables, jt)
	}
	if j.Ingress, err = encStmts(p.Ingress); err != nil {
		return nil, fmt.Errorf("ingress: %v", err)
	}
	if j.Egress, err = encStmts(p.Egress); err != nil {
		return nil, fmt.Errorf("egress: %v", err)
	}
	return json.Marshal(j)
}

// EncodeJSON returns p's device config, indented.
func EncodeJSON(p *Program) ([]byte, error) {
	b, err := p.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", " "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// DecodeJSON reads a device config written by EncodeJSON into a valid
// Program.
func DecodeJSON(data []byte) (*Program, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	var j jProgram
	if err := d.Decode(&j); err != nil {
		return nil, fmt.Errorf("device config: %v", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, fmt.Errorf("device config: data after the program")
	}
	if j.Format != JSONFormat {
		return nil, fmt.Errorf("device config: format %q, not %q", j.Format, JSONFormat)
	}
	if j.Version != JSONVersion {
		return nil, fmt.Errorf("device config: version %d of %s; this model reads version %d", j.Version, JSONFormat, JSONVersion)
	}
	p, err := j.program()
	if err != nil {
		return nil, fmt.Errorf("device config: %v", err)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("device config: %v", err)
	}
	return p, nil
}

func (j *jProgram) program() (*Program, error) {
	dc := decoder{
		types: map[string]*HeaderType{}, actions: map[string]*Action{}, tables: map[string]*Table{},
		regs: map[string]*Register{}, counters: map[string]*Counter{}, digests: map[string]*DigestType{},
	}
	p := &Program{Name: j.Name, Metadata: decFields(j.Metadata), Deparse: j.Deparse, UpdateIPv4Checksum: j.UpdateIPv4Checksum}
	for _, t := range j.HeaderTypes {
		if dc.types[t.Name] != nil {
			return nil, fmt.Errorf("header type %s is declared twice", t.Name)
		}
		switch t.Controller {
		case "", ControllerPacketIn, ControllerPacketOut:
		default:
			return nil, fmt.Errorf("header type %s: controller header %q is neither %s nor %s", t.Name, t.Controller, ControllerPacketIn, ControllerPacketOut)
		}
		ht := &HeaderType{Name: t.Name, Fields: decFields(t.Fields), Controller: t.Controller}
		dc.types[t.Name] = ht
		p.HeaderTypes = append(p.HeaderTypes, ht)
	}
	for _, h := range j.Headers {
		t := dc.types[h.Type]
		if t == nil {
			return nil, fmt.Errorf("header %s: no header type %q", h.Name, h.Type)
		}
		p.Headers = append(p.Headers, &Header{Name: h.Name, Type: t})
	}
	for _, r := range j.Registers {
		reg := &Register{Name: r.Name, Width: r.Width, Size: r.Size, Owner: r.Owner, Field: r.Field, Base: r.Base}
		dc.regs[r.Name] = reg
		p.Registers = append(p.Registers, reg)
	}
	for _, c := range j.Counters {
		ctr := &Counter{Name: c.Name, Size: c.Size, Owner: c.Owner, FieldPackets: c.FieldPackets, FieldBytes: c.FieldBytes, Base: c.Base}
		for t, n := range counterTypes {
			if n == c.Type {
				ctr.Type = t
			}
		}
		if ctr.Type == 0 {
			return nil, fmt.Errorf("counter %s: type %q is not packets, bytes or packets_and_bytes", c.Name, c.Type)
		}
		dc.counters[c.Name] = ctr
		p.Counters = append(p.Counters, ctr)
	}
	for _, d := range j.Digests {
		dt := &DigestType{Name: d.Name, Fields: decFields(d.Fields), Owner: d.Owner}
		dc.digests[d.Name] = dt
		p.Digests = append(p.Digests, dt)
	}
	var err error
	for _, s := range j.Parser {
		ps := &ParserState{Name: s.Name, Extract: s.Extract, Default: s.Default}
		for _, c := range s.Cases {
			ps.Cases = append(ps.Cases, Case{Values: c.Values, Masks: c.Masks, Next: c.Next})
		}
		if s.VarBits != nil {
			if ps.VarBits, err = dc.expr(s.VarBits); err != nil {
				return nil, fmt.Errorf("parser state %s: %v", s.Name, err)
			}
		}
		if ps.Select, err = dc.exprs(s.Select); err != nil {
			return nil, fmt.Errorf("parser state %s: %v", s.Name, err)
		}
		p.Parser = append(p.Parser, ps)
	}
	// Actions are declared first and filled after, so that a body may
	// call an action declared after it (Validate judges the order).
	for _, a := range j.Actions {
		if dc.actions[a.Name] != nil {
			return nil, fmt.Errorf("action %s is declared twice", a.Name)
		}
		act := &Action{Name: a.Name, Params: decFields(a.Params)}
		dc.actions[a.Name] = act
		p.Actions = append(p.Actions, act)
	}
	for _, t := range j.Tables {
		if dc.tables[t.Name] != nil {
			return nil, fmt.Errorf("table %s is declared twice", t.Name)
		}
		tb := &Table{Name: t.Name, DefaultArgs: t.DefaultArgs, Size: t.Size, Const: t.Const}
		if tb.Default, err = dc.action(t.Default); err != nil {
			return nil, fmt.Errorf("table %s: %v", t.Name, err)
		}
		for _, n := range t.Actions {
			a, err := dc.action(n)
			if err != nil {
				return nil, fmt.Errorf("table %s: %v", t.Name, err)
			}
			tb.Actions = append(tb.Actions, a)
		}
		for _, k := range t.Keys {
			if k.X == nil {
				return nil, fmt.Errorf("table %s: a key has no expression", t.Name)
			}
			x, err := dc.expr(k.X)
			if err != nil {
				return nil, fmt.Errorf("table %s: %v", t.Name, err)
			}
			m, ok := matchKinds[k.Match]
			if !ok {
				return nil, fmt.Errorf("table %s: match kind %q is not exact, ternary, lpm or range", t.Name, k.Match)
			}
			tb.Keys = append(tb.Keys, TableKey{X: x, Match: m})
		}
		for _, e := range t.Entries {
			a, err := dc.action(e.Action)
			if err != nil {
				return nil, fmt.Errorf("table %s: %v", t.Name, err)
			}
			en := Entry{Priority: e.Priority, Action: a, Args: e.Args}
			for _, m := range e.Match {
				en.Match = append(en.Match, Match(m))
			}
			tb.Entries = append(tb.Entries, en)
		}
		dc.tables[t.Name] = tb
		p.Tables = append(p.Tables, tb)
	}
	for i, a := range j.Actions {
		if p.Actions[i].Body, err = dc.stmts(a.Body); err != nil {
			return nil, fmt.Errorf("action %s: %v", a.Name, err)
		}
	}
	if p.Ingress, err = dc.stmts(j.Ingress); err != nil {
		return nil, fmt.Errorf("ingress: %v", err)
	}
	if p.Egress, err = dc.stmts(j.Egress); err != nil {
		return nil, fmt.Errorf("egress: %v", err)
	}
	return p, nil
}

var counterTypes = map[CounterType]string{Packets: "packets", Bytes: "bytes", PacketsAndBytes: "packets_and_bytes"}

func encFields(fs []Field) []jField {
	var out []jField
	for _, f := range fs {
		out = append(out, jField(f))
	}
	return out
}

func decFields(fs []jField) []Field {
	var out []Field
	for _, f := range fs {
		out = append(out, Field(f))
	}
	return out
}

func encRef(r *Ref) *jRef {
	if r == nil {
		return nil
	}
	j := jRef(*r)
	return &j
}

func decRef(j *jRef) *Ref {
	if j == nil {
		return nil
	}
	r := Ref(*j)
	return &r
}

var matchKinds = map[string]MatchKind{"exact": Exact, "ternary": Ternary, "lpm": LPM, "range": Range}

var unOps = map[UnOp]string{Not: "!", Inv: "~"}

var hashAlgos = map[string]HashAlgo{"crc32": CRC32, "crc16": CRC16, "identity": Identity}

func encExprs(xs []Expr) ([]*jExpr, error) {
	var out []*jExpr
	for _, x := range xs {
		j, err := encExpr(x)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

func encExpr(x Expr) (*jExpr, error) {
	sub := func(x Expr) (*jExpr, error) {
		if x == nil {
			return nil, fmt.Errorf("an expression is missing")
		}
		return encExpr(x)
	}
	var err error
	switch x := x.(type) {
	case Const:
		return &jExpr{K: "const", Value: x.Value, Bits: x.Bits}, nil
	case Ref:
		return &jExpr{K: "ref", Path: x.Path, Bits: x.Bits}, nil
	case Valid:
		return &jExpr{K: "valid", Header: x.Header}, nil
	case Old:
		return &jExpr{K: "old", Bits: x.Bits}, nil
	case Unary:
		op, ok := unOps[x.Op]
		if !ok {
			return nil, fmt.Errorf("unary operator %d", x.Op)
		}
		j := &jExpr{K: "unary", Op: op}
		j.X, err = sub(x.X)
		return j, err
	case Binary:
		if x.Op < Add || x.Op > LOr {
			return nil, fmt.Errorf("binary operator %d", x.Op)
		}
		j := &jExpr{K: "binary", Op: x.Op.String()}
		if j.L, err = sub(x.L); err != nil {
			return nil, err
		}
		j.R, err = sub(x.R)
		return j, err
	case Cast:
		j := &jExpr{K: "cast", Bits: x.Bits}
		j.X, err = sub(x.X)
		return j, err
	case Slice:
		j := &jExpr{K: "slice", Hi: x.Hi, Lo: x.Lo}
		j.X, err = sub(x.X)
		return j, err
	case Mux:
		j := &jExpr{K: "mux"}
		if j.Cond, err = sub(x.Cond); err != nil {
			return nil, err
		}
		if j.Then, err = sub(x.Then); err != nil {
			return nil, err
		}
		j.Else, err = sub(x.Else)
		return j, err
	}
	return nil, fmt.Errorf("unknown expression %T", x)
}

func encStmts(ss []Stmt) ([]*jStmt, error) {
	var out []*jStmt
	for _, s := range ss {
		j, err := encStmt(s)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

func encStmt(s Stmt) (*jStmt, error) {
	var err error
	switch s := s.(type) {
	case Assign:
		j := &jStmt{S: "assign", Dst: encRef(&s.Dst)}
		j.X, err = encExpr(s.X)
		return j, err
	case If:
		j := &jStmt{S: "if"}
		if j.Cond, err = encExpr(s.Cond); err != nil {
			return nil, err
		}
		if j.Then, err = encStmts(s.Then); err != nil {
			return nil, err
		}
		j.Else, err = encStmts(s.Else)
		return j, err
	case Apply:
		return &jStmt{S: "apply", Table: s.Table.Name}, nil
	case Call:
		j := &jStmt{S: "call", Action: s.Action.Name}
		j.Args, err = encExprs(s.Args)
		return j, err
	case Hash:
		j := &jStmt{S: "hash", Dst: encRef(&s.Dst), Algo: s.Algo.String(), Base: s.Base, Max: s.Max}
		j.Data, err = encExprs(s.Data)
		return j, err
	case Random:
		return &jStmt{S: "random", Dst: encRef(&s.Dst), Lo: s.Lo, Hi: s.Hi}, nil
	case RMW:
		j := &jStmt{S: "rmw", Reg: s.Reg.Name, OldTo: encRef(s.OldTo), NewTo: encRef(s.NewTo)}
		if j.Index, err = encExpr(s.Index); err != nil {
			return nil, err
		}
		if j.New, err = encExpr(s.New); err != nil {
			return nil, err
		}
		if s.Cond != nil {
			j.Cond, err = encExpr(s.Cond)
		}
		return j, err
	case Count:
		j := &jStmt{S: "count", Counter: s.Counter.Name}
		j.Index, err = encExpr(s.Index)
		return j, err
	case Digest:
		j := &jStmt{S: "digest", Digest: s.Type.Name}
		j.Values, err = encExprs(s.Values)
		return j, err
	case Clone:
		j := &jStmt{S: "clone", Session: s.Session, E2E: s.E2E}
		for i := range s.Preserve {
			j.Preserve = append(j.Preserve, encRef(&s.Preserve[i]))
		}
		return j, nil
	case SetValid:
		return &jStmt{S: "set_valid", Header: s.Header, Valid: s.Valid}, nil
	case MarkToDrop:
		return &jStmt{S: "mark_to_drop"}, nil
	}
	return nil, fmt.Errorf("unknown statement %T", s)
}

// decoder resolves names to the declarations read so far.
type decoder struct {
	types    map[string]*HeaderType
	actions  map[string]*Action
	tables   map[string]*Table
	regs     map[string]*Register
	counters map[string]*Counter
	digests  map[string]*DigestType
}

func (dc *decoder) action(name string) (*Action, error) {
	if a := dc.actions[name]; a != nil {
		return a, nil
	}
	return nil, fmt.Errorf("no action %q", name)
}

func (dc *decoder) exprs(js []*jExpr) ([]Expr, error) {
	var out []Expr
	for _, j := range js {
		x, err := dc.expr(j)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

// only fails when j (a *jExpr or *jStmt) sets a field its kind does not
// have: allowed names those it has, by their JSON names.
func only(what string, j any, allowed ...string) error {
	v := reflect.ValueOf(j).Elem()
	t := v.Type()
	for i := range t.NumField() {
		if v.Field(i).IsZero() {
			continue
		}
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if !slices.Contains(allowed, name) {
			return fmt.Errorf("%s has no field %q", what, name)
		}
	}
	return nil
}

func (dc *decoder) expr(j *jExpr) (Expr, error) {
	if j == nil {
		return nil, fmt.Errorf("an expression is null")
	}
	sub := func(j *jExpr, name string) (Expr, error) {
		if j == nil {
			return nil, fmt.Errorf("a %s expression has no %s", j.K, name)
		}
		return dc.expr(j)
	}
	var err error
	switch j.K {
	case "const":
		if err := only("a const", j, "k", "value", "bits"); err != nil {
			return nil, err
		}
		return Const{Value: j.Value, Bits: j.Bits}, nil
	case "ref":
		if err := only("a ref", j, "k", "path", "bits"); err != nil {
			return nil, err
		}
		return Ref{Path: j.Path, Bits: j.Bits}, nil
	case "valid":
		if err := only("a valid", j, "k", "header"); err != nil {
			return nil, err
		}
		return Valid{Header: j.Header}, nil
	case "old":
		if err := only("an old", j, "k", "bits"); err != nil {
			return nil, err
		}
		return Old{Bits: j.Bits}, nil
	case "unary":
		if err := only("a unary", j, "k", "op", "x"); err != nil {
			return nil, err
		}
		u := Unary{}
		for op, s := range unOps {
			if s == j.Op {
				u.Op = op
			}
		}
		if u.Op == 0 {
			return nil, fmt.Errorf("unary operator %q", j.Op)
		}
		if j.X == nil {
			return nil, fmt.Errorf("a unary expression has no operand")
		}
		u.X, err = dc.expr(j.X)
		return u, err
	case "binary":
		if err := only("a binary", j, "k", "op", "l", "r"); err != nil {
			return nil, err
		}
		b := Binary{}
		for op := Add; op <= LOr; op++ {
			if op.String() == j.Op {
				b.Op = op
			}
		}
		if b.Op == 0 {
			return nil, fmt.Errorf("binary operator %q", j.Op)
		}
		if j.L == nil || j.R == nil {
			return nil, fmt.Errorf("a binary expression lacks an operand")
		}
		if b.L, err = dc.expr(j.L); err != nil {
			return nil, err
		}
		b.R, err = dc.expr(j.R)
		return b, err
	case "cast":
		if err := only("a cast", j, "k", "bits", "x"); err != nil {
			return nil, err
		}
		if j.X == nil {
			return nil, fmt.Errorf("a cast has no operand")
		}
		x, err := dc.expr(j.X)
		return Cast{Bits: j.Bits, X: x}, err
	case "slice":
		if err := only("a slice", j, "k", "hi", "lo", "x"); err != nil {
			return nil, err
		}
		if j.X == nil {
			return nil, fmt.Errorf("a slice has no operand")
		}
		x, err := dc.expr(j.X)
		return Slice{X: x, Hi: j.Hi, Lo: j.Lo}, err
	case "mux":
		if err := only("a mux", j, "k", "cond", "then", "else"); err != nil {
			return nil, err
		}
		if j.Cond == nil || j.Then == nil || j.Else == nil {
			return nil, fmt.Errorf("a mux lacks an operand")
		}
		m := Mux{}
		if m.Cond, err = sub(j.Cond, "cond"); err != nil {
			return nil, err
		}
		if m.Then, err = sub(j.Then, "then"); err != nil {
			return nil, err
		}
		m.Else, err = sub(j.Else, "else")
		return m, err
	}
	return nil, fmt.Errorf("expression kind %q", j.K)
}

func (dc *decoder) stmts(js []*jStmt) ([]Stmt, error) {
	var out []Stmt
	for _, j := range js {
		s, err := dc.stmt(j)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (dc *decoder) stmt(j *jStmt) (Stmt, error) {
	if j == nil {
		return nil, fmt.Errorf("a statement is null")
	}
	need := func(x *jExpr, what string) (Expr, error) {
		if x == nil {
			return nil, fmt.Errorf("%s statement has no %s", j.S, what)
		}
		return dc.expr(x)
	}
	var err error
	switch j.S {
	case "assign":
		if err := only("an assign", j, "s", "dst", "x"); err != nil {
			return nil, err
		}
		if j.Dst == nil {
			return nil, fmt.Errorf("an assign has no destination")
		}
		x, err := need(j.X, "value")
		return Assign{Dst: *decRef(j.Dst), X: x}, err
	case "if":
		if err := only("an if", j, "s", "cond", "then", "else"); err != nil {
			return nil, err
		}
		s := If{}
		if s.Cond, err = need(j.Cond, "condition"); err != nil {
			return nil, err
		}
		if s.Then, err = dc.stmts(j.Then); err != nil {
			return nil, err
		}
		s.Else, err = dc.stmts(j.Else)
		return s, err
	case "apply":
		if err := only("an apply", j, "s", "table"); err != nil {
			return nil, err
		}
		t := dc.tables[j.Table]
		if t == nil {
			return nil, fmt.Errorf("apply of no table %q", j.Table)
		}
		return Apply{Table: t}, nil
	case "call":
		if err := only("a call", j, "s", "action", "args"); err != nil {
			return nil, err
		}
		a, err := dc.action(j.Action)
		if err != nil {
			return nil, err
		}
		args, err := dc.exprs(j.Args)
		return Call{Action: a, Args: args}, err
	case "hash":
		if err := only("a hash", j, "s", "dst", "algo", "base", "data", "max"); err != nil {
			return nil, err
		}
		algo, ok := hashAlgos[j.Algo]
		if !ok || j.Dst == nil {
			return nil, fmt.Errorf("a hash needs a destination and crc32, crc16 or identity, not %q", j.Algo)
		}
		data, err := dc.exprs(j.Data)
		return Hash{Dst: *decRef(j.Dst), Algo: algo, Base: j.Base, Data: data, Max: j.Max}, err
	case "random":
		if err := only("a random", j, "s", "dst", "lo", "hi"); err != nil {
			return nil, err
		}
		if j.Dst == nil {
			return nil, fmt.Errorf("a random has no destination")
		}
		return Random{Dst: *decRef(j.Dst), Lo: j.Lo, Hi: j.Hi}, nil
	case "rmw":
		if err := only("an rmw", j, "s", "register", "index", "new", "cond", "old_to", "new_to"); err != nil {
			return nil, err
		}
		r := dc.regs[j.Reg]
		if r == nil {
			return nil, fmt.Errorf("rmw of no register %q", j.Reg)
		}
		s := RMW{Reg: r, OldTo: decRef(j.OldTo), NewTo: decRef(j.NewTo)}
		if s.Index, err = need(j.Index, "index"); err != nil {
			return nil, err
		}
		if s.New, err = need(j.New, "new value"); err != nil {
			return nil, err
		}
		if j.Cond != nil {
			s.Cond, err = dc.expr(j.Cond)
		}
		return s, err
	case "count":
		if err := only("a count", j, "s", "counter", "index"); err != nil {
			return nil, err
		}
		c := dc.counters[j.Counter]
		if c == nil {
			return nil, fmt.Errorf("count in no counter %q", j.Counter)
		}
		i, err := need(j.Index, "index")
		return Count{Counter: c, Index: i}, err
	case "digest":
		if err := only("a digest", j, "s", "digest", "values"); err != nil {
			return nil, err
		}
		d := dc.digests[j.Digest]
		if d == nil {
			return nil, fmt.Errorf("digest of no type %q", j.Digest)
		}
		vals, err := dc.exprs(j.Values)
		return Digest{Type: d, Values: vals}, err
	case "clone":
		if err := only("a clone", j, "s", "session", "e2e", "preserve"); err != nil {
			return nil, err
		}
		c := Clone{Session: j.Session, E2E: j.E2E}
		for _, r := range j.Preserve {
			if r == nil {
				return nil, errors.New("a clone preserves no field")
			}
			c.Preserve = append(c.Preserve, *decRef(r))
		}
		return c, nil
	case "set_valid":
		if err := only("a set_valid", j, "s", "header", "valid"); err != nil {
			return nil, err
		}
		return SetValid{Header: j.Header, Valid: j.Valid}, nil
	case "mark_to_drop":
		if err := only("a mark_to_drop", j, "s"); err != nil {
			return nil, err
		}
		return MarkToDrop{}, nil
	}
	return nil, fmt.Errorf("statement kind %q", j.S)
}
