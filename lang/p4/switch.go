package p4

import (
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
)

// Switch runs a checked program on packets with v1model's semantics as
// p4gen.Switch, the reference, defines them: the parser, ingress, the
// ingress-to-egress clones, egress per departing packet, the compute
// checksum control and the deparser. It keeps the registers, counters and
// installed table entries across packets, by their control-plane names
// ("ffpf_ingress.cms_2_row0"). Like the reference it is written to be
// read, not to be fast: a differential test runs it beside the IR.
type Switch struct {
	C        *Checked
	Regs     map[string][]uint64
	Counts   map[string][]CounterCell
	Entries  map[string][]TableEntry // installed in tables without const entries
	Sessions map[uint32]uint16       // clone session → egress port
	// Random gives v1model random's values: a uniform integer in
	// [lo, hi]. NewSwitch sets a PCG seeded with 1, as p4gen.NewSwitch.
	Random func(lo, hi uint64) uint64

	consts map[*TableDecl][]TableEntry
}

// CounterCell is one cell of a counter.
type CounterCell struct{ Packets, Bytes uint64 }

// TableEntry is a table entry: one KeyMatch per key, read as the key's match
// kind says; among ternary or range entries that match, the highest
// Priority wins, among LPM ones the longest prefix (p4gen's rule).
type TableEntry struct {
	Keys     []KeyMatch
	Priority int32
	Action   string
	Args     []uint64
}

// KeyMatch is how one key of an entry matches: exact compares Value,
// ternary Value under Mask, lpm the first PrefixLen bits of Value, range
// Lo ≤ key ≤ Hi.
type KeyMatch struct {
	Value, Mask uint64
	PrefixLen   int
	Lo, Hi      uint64
}

// Arrival is a packet entering the switch: its bytes, port,
// ingress_global_timestamp and the depth of the queue it joins.
type Arrival struct {
	Data   []byte
	Port   uint16
	Time   uint64
	QDepth uint32
}

// Departure is a packet leaving the switch (Instance 0 normal, 1 an
// ingress-to-egress clone).
type Departure struct {
	Port     uint16
	Data     []byte
	Instance uint32
}

// DigestMsg is a digest sent to the controller: its struct type's name
// and field values.
type DigestMsg struct {
	Type   string
	Values []uint64
}

// Result is what one packet did.
type Result struct {
	Out         []Departure
	Digests     []DigestMsg
	ParserError string
}

// dropPort is egress_spec of a dropped packet (bmv2's).
const dropPort = 511

// NewSwitch returns a switch running c with zeroed state.
func NewSwitch(c *Checked) (*Switch, error) {
	if c.Parser == nil || c.Ingress == nil || c.Egress == nil || c.Deparse == nil {
		return nil, errors.New("the program has no V1Switch main to run")
	}
	sw := &Switch{C: c, Regs: map[string][]uint64{}, Counts: map[string][]CounterCell{}, Entries: map[string][]TableEntry{},
		Sessions: map[uint32]uint16{}, consts: map[*TableDecl][]TableEntry{}}
	for q, sym := range c.Objects {
		switch sym.Kind {
		case SymInstance:
			switch sym.Type.Name {
			case "register":
				sw.Regs[q] = make([]uint64, sym.Type.Size)
			case "counter":
				sw.Counts[q] = make([]CounterCell, sym.Type.Size)
			}
		case SymTable:
			t := sym.Decl.(*TableDecl)
			if t.Entries != nil {
				sw.consts[t] = sw.constEntries(t)
			}
		}
	}
	pcg := rand.New(rand.NewPCG(1, 0))
	sw.Random = func(lo, hi uint64) uint64 {
		if hi-lo == ^uint64(0) {
			return pcg.Uint64()
		}
		return lo + pcg.Uint64N(hi-lo+1)
	}
	return sw, nil
}

// constEntries turns a table's entries into Entry values: the first
// entry has the highest priority.
func (sw *Switch) constEntries(t *TableDecl) []TableEntry {
	var out []TableEntry
	for i, e := range t.Entries.List {
		en := TableEntry{Priority: int32(len(t.Entries.List) - i), Action: e.Action}
		for j, k := range e.Keys {
			kt := sw.C.Types[t.Keys[j].X]
			w := kt.Width
			if kt.Kind == KBool {
				w = 1
			}
			full := kt.Mask()
			var m KeyMatch
			switch k := k.(type) {
			case *DontCare, *DefaultExpr:
				m = KeyMatch{Hi: full}
			case *MaskExpr:
				m.Value, m.Mask = sw.C.Consts[k.Value], sw.C.Consts[k.Mask]
				m.PrefixLen, _ = prefixLen(m.Mask, w)
			case *RangeExpr:
				m.Lo, m.Hi = sw.C.Consts[k.Lo], sw.C.Consts[k.Hi]
			default:
				v := sw.C.Consts[k]
				m = KeyMatch{Value: v, Mask: full, PrefixLen: w, Lo: v, Hi: v}
			}
			en.Keys = append(en.Keys, m)
		}
		for _, a := range e.Args {
			en.Args = append(en.Args, sw.C.Consts[a])
		}
		out = append(out, en)
	}
	return out
}

// env is one packet's values as the blocks see them: header fields,
// metadata and standard metadata by path ("hdr.ipv4.ttl", "meta.x",
// "std.egress_spec"), local variables and action parameters by symbol.
type env struct {
	vals    map[string]uint64
	valid   map[string]bool
	varData map[string][]byte
	locals  map[*Symbol]uint64
	data    []byte
	bit     int // the parser's offset in data, in bits
	payload []byte
	clones  []uint32
	e2e     []e2eClone // egress-to-egress clones asked for
	dig     []DigestMsg
	role    string
}

// e2eClone is an egress-to-egress clone: its session and the field list
// it preserves (-1: none).
type e2eClone struct {
	session uint32
	list    int64
}

func newEnv() *env {
	return &env{vals: map[string]uint64{}, valid: map[string]bool{}, varData: map[string][]byte{}, locals: map[*Symbol]uint64{}}
}

// errParser ends parsing with a parser error (PacketTooShort, ...).
type errParser struct{ name string }

func (e errParser) Error() string { return e.name }

// Process runs one packet through the switch.
func (sw *Switch) Process(a Arrival) (Result, error) {
	var res Result
	e := newEnv()
	if err := sw.parse(e, a); err != nil {
		var pe errParser
		if !errors.As(err, &pe) {
			return res, err
		}
		res.ParserError = pe.name
	}
	if err := sw.control(e, sw.C.Ingress, "ingress"); err != nil {
		return res, err
	}
	res.Digests = e.dig
	// As bmv2: the packet is dropped when egress_spec is the drop port at
	// the end of ingress (mark_to_drop sets it; an action after it may set
	// a port again).
	spec := e.vals["std.egress_spec"]
	type out struct {
		e        *env
		port     uint64
		instance uint32
	}
	var outs []out
	if spec != dropPort {
		outs = append(outs, out{e, spec, 0})
	}
	for _, sess := range e.clones {
		port, ok := sw.Sessions[sess]
		if !ok {
			continue
		}
		c := newEnv()
		if err := sw.parse(c, a); err != nil {
			var pe errParser
			if !errors.As(err, &pe) {
				return res, err
			}
		}
		outs = append(outs, out{c, uint64(port), 1})
	}
	for i := 0; i < len(outs); i++ {
		o := outs[i]
		o.e.e2e = nil
		o.e.vals["std.egress_port"] = o.port
		o.e.vals["std.egress_spec"] = o.port
		o.e.vals["std.instance_type"] = uint64(o.instance)
		o.e.vals["std.enq_qdepth"] = uint64(a.QDepth)
		o.e.vals["std.deq_qdepth"] = uint64(a.QDepth)
		o.e.vals["std.egress_global_timestamp"] = a.Time & (1<<48 - 1)
		n := len(o.e.dig)
		if err := sw.control(o.e, sw.C.Egress, "egress"); err != nil {
			return res, err
		}
		res.Digests = append(res.Digests, o.e.dig[n:]...)
		if o.e.vals["std.egress_spec"] == dropPort {
			continue // dropped in egress, as bmv2 does
		}
		if sw.C.Compute != nil {
			if err := sw.control(o.e, sw.C.Compute, "compute"); err != nil {
				return res, err
			}
		}
		data, err := sw.deparse(o.e)
		if err != nil {
			return res, err
		}
		res.Out = append(res.Out, Departure{Port: uint16(o.port), Data: data, Instance: o.instance})
		if o.instance != 0 {
			continue // a clone makes no clone of its own
		}
		// Egress-to-egress clones: the packet as it left, its egress run
		// again with the metadata of the field list.
		for _, c := range o.e.e2e {
			port, ok := sw.Sessions[c.session]
			if !ok {
				continue
			}
			ce := newEnv()
			if err := sw.parse(ce, Arrival{Data: data, Port: a.Port, Time: a.Time}); err != nil {
				var pe errParser
				if !errors.As(err, &pe) {
					return res, err
				}
			}
			for _, f := range sw.fieldList(c.list) {
				ce.vals["meta."+f] = o.e.vals["meta."+f]
			}
			outs = append(outs, out{ce, uint64(port), 2})
		}
	}
	return res, nil
}

// fieldList returns the metadata fields annotated @field_list(list).
func (sw *Switch) fieldList(list int64) []string {
	if list < 0 || sw.C.Meta == nil {
		return nil
	}
	sd, ok := sw.C.Meta.Decl.(*StructDecl)
	if !ok {
		return nil
	}
	var out []string
	for _, f := range sd.Fields {
		for _, a := range f.Annos {
			if a.Name != "field_list" || len(a.Args) != 1 {
				continue
			}
			if l, ok := a.Args[0].(*IntLit); ok && int64(l.Value) == list {
				out = append(out, f.Name)
			}
		}
	}
	return out
}

func (sw *Switch) control(e *env, d *ControlDecl, role string) error {
	e.role = role
	return sw.stmt(e, d.Apply)
}

// parse runs the parser over a's bytes; the standard metadata of ingress
// is set whatever happens.
func (sw *Switch) parse(e *env, a Arrival) error {
	e.vals["std.ingress_port"] = uint64(a.Port)
	e.vals["std.packet_length"] = uint64(len(a.Data))
	e.vals["std.ingress_global_timestamp"] = a.Time & (1<<48 - 1)
	e.data, e.bit, e.role = a.Data, 0, "parser"
	states := map[string]*State{}
	for _, s := range sw.C.Parser.States {
		states[s.Name] = s
	}
	st := states["start"]
	for steps := 0; ; steps++ {
		if steps > 10000 {
			return errors.New("the parser went through 10000 states: it loops")
		}
		for _, x := range st.Stmts {
			if err := sw.stmt(e, x); err != nil {
				var pe errParser
				if errors.As(err, &pe) {
					e.payload = e.data[e.bit/8:]
				}
				return err
			}
		}
		next := st.Trans.Next
		if st.Trans.Select != nil {
			keys := make([]uint64, len(st.Trans.Select))
			for i, x := range st.Trans.Select {
				v, err := sw.eval(e, x)
				if err != nil {
					return err
				}
				keys[i] = v
			}
			next = ""
			for _, c := range st.Trans.Cases {
				if sw.keysetsMatch(c.Keys, keys) {
					next = c.Next
					break
				}
			}
			if next == "" {
				e.payload = e.data[e.bit/8:]
				return errParser{"NoMatch"}
			}
		}
		switch next {
		case "accept":
			e.payload = e.data[e.bit/8:]
			return nil
		case "reject":
			e.payload = e.data[e.bit/8:]
			return errParser{"reject"}
		}
		st = states[next]
	}
}

func (sw *Switch) keysetsMatch(ks []Expr, keys []uint64) bool {
	if len(ks) == 1 && len(keys) > 1 {
		switch ks[0].(type) {
		case *DefaultExpr, *DontCare:
			return true
		}
	}
	for i, k := range ks {
		v := keys[i]
		switch k := k.(type) {
		case *DefaultExpr, *DontCare:
		case *MaskExpr:
			m := sw.C.Consts[k.Mask]
			if v&m != sw.C.Consts[k.Value]&m {
				return false
			}
		case *RangeExpr:
			if v < sw.C.Consts[k.Lo] || v > sw.C.Consts[k.Hi] {
				return false
			}
		default:
			if v != sw.C.Consts[k]&sw.mask(k) {
				return false
			}
		}
	}
	return true
}

// extract takes a header from the packet at the parser's offset.
func (sw *Switch) extract(e *env, ce *CallExpr) error {
	h, err := sw.place(e, ce.Args[0])
	if err != nil {
		return err
	}
	t := sw.C.Types[ce.Args[0]]
	fixed := 0
	for _, f := range t.Fields {
		if f.Type.Kind != KVarbit {
			fixed += f.Type.Width
		}
	}
	varBits := 0
	if len(ce.Args) == 2 {
		v, err := sw.eval(e, ce.Args[1])
		if err != nil {
			return err
		}
		varBits = int(min(v, 1<<20))
	}
	if e.bit+fixed+varBits > 8*len(e.data) {
		return errParser{"PacketTooShort"}
	}
	off := e.bit
	for _, f := range t.Fields {
		if f.Type.Kind == KVarbit {
			if varBits > f.Type.Width {
				return errParser{"HeaderTooShort"}
			}
			e.varData[h] = e.data[off/8 : (off+varBits)/8]
			off += varBits
			continue
		}
		e.vals[h+"."+f.Name] = getBits(e.data, off, f.Type.Width)
		off += f.Type.Width
	}
	e.bit = off
	e.valid[h] = true
	return nil
}

// deparse emits the headers the deparser emits that are valid, then the
// payload.
func (sw *Switch) deparse(e *env) ([]byte, error) {
	var out []byte
	for _, s := range sw.C.Deparse.Apply.Stmts {
		cs, ok := s.(*CallStmt)
		if !ok || len(cs.Call.Args) != 1 {
			return nil, fmt.Errorf("%s: the deparser only emits", s.Position())
		}
		h, err := sw.place(e, cs.Call.Args[0])
		if err != nil {
			return nil, err
		}
		if e.valid[h] {
			out = append(out, sw.emit(e, h, sw.C.Types[cs.Call.Args[0]])...)
		}
	}
	return append(out, e.payload...), nil
}

func (sw *Switch) emit(e *env, h string, t *Type) []byte {
	n := 0
	for _, f := range t.Fields {
		if f.Type.Kind == KVarbit {
			n += 8 * len(e.varData[h])
		} else {
			n += f.Type.Width
		}
	}
	b := make([]byte, (n+7)/8)
	off := 0
	for _, f := range t.Fields {
		if f.Type.Kind == KVarbit {
			copy(b[off/8:], e.varData[h])
			off += 8 * len(e.varData[h])
			continue
		}
		putBits(b, off, f.Type.Width, e.vals[h+"."+f.Name])
		off += f.Type.Width
	}
	return b
}

func getBits(b []byte, off, n int) uint64 {
	var v uint64
	for i := 0; i < n; i++ {
		p := off + i
		v = v<<1 | uint64(b[p/8]>>(7-p%8)&1)
	}
	return v
}

func putBits(b []byte, off, n int, v uint64) {
	for i := 0; i < n; i++ {
		p := off + i
		bit := byte(v>>(n-1-i)) & 1
		b[p/8] = b[p/8]&^(1<<(7-p%8)) | bit<<(7-p%8)
	}
}

// mask returns the values of x's type.
func (sw *Switch) mask(x Expr) uint64 {
	if t := sw.C.Types[x]; t != nil {
		return t.Mask()
	}
	return ^uint64(0)
}

// place returns the path of a header, field or metadata ("hdr.ipv4",
// "hdr.ipv4.ttl", "meta.x", "std.egress_spec").
func (sw *Switch) place(e *env, x Expr) (string, error) {
	switch x := x.(type) {
	case *Name:
		sym := sw.C.Syms[x]
		if sym == nil || sym.Role == "" {
			return "", fmt.Errorf("%s: %s is not a header, metadata or standard metadata", x.At, x.Name)
		}
		return sym.Role, nil
	case *Member:
		p, err := sw.place(e, x.X)
		if err != nil {
			return "", err
		}
		return p + "." + x.Name, nil
	}
	return "", fmt.Errorf("%s: %s is not a place", x.Position(), ExprString(x))
}

// local returns the symbol of a name that is a local variable or an
// action's parameter, or nil.
func (sw *Switch) local(x Expr) *Symbol {
	if n, ok := x.(*Name); ok {
		if sym := sw.C.Syms[n]; sym != nil && sym.Role == "" && (sym.Kind == SymVar || sym.Kind == SymParam) {
			return sym
		}
	}
	return nil
}

// store writes v to the place x (a slice writes its bits only).
func (sw *Switch) store(e *env, x Expr, v uint64) error {
	if s, ok := x.(*SliceExpr); ok {
		old, err := sw.eval(e, s.X)
		if err != nil {
			return err
		}
		hi, lo := sw.C.Consts[s.Hi], sw.C.Consts[s.Lo]
		m := (^uint64(0) >> (63 - (hi - lo))) << lo
		return sw.store(e, s.X, old&^m|v<<lo&m)
	}
	v &= sw.mask(x)
	if sym := sw.local(x); sym != nil {
		e.locals[sym] = v
		return nil
	}
	p, err := sw.place(e, x)
	if err != nil {
		return err
	}
	e.vals[p] = v
	return nil
}

func (sw *Switch) stmt(e *env, s Stmt) error {
	switch s := s.(type) {
	case *Block:
		for _, x := range s.Stmts {
			if err := sw.stmt(e, x); err != nil {
				return err
			}
		}
	case *VarDecl:
		var v uint64
		if s.Init != nil {
			var err error
			if v, err = sw.eval(e, s.Init); err != nil {
				return err
			}
		}
		sym := sw.C.Defs[s]
		e.locals[sym] = v & sym.Type.Mask()
	case *AssignStmt:
		v, err := sw.eval(e, s.X)
		if err != nil {
			return err
		}
		return sw.store(e, s.Dst, v)
	case *IfStmt:
		c, err := sw.eval(e, s.Cond)
		if err != nil {
			return err
		}
		if c != 0 {
			return sw.stmt(e, s.Then)
		}
		if s.Else != nil {
			return sw.stmt(e, s.Else)
		}
	case *CallStmt:
		return sw.call(e, s.Call)
	}
	return nil
}

func (sw *Switch) evalAll(e *env, xs []Expr) ([]uint64, error) {
	vs := make([]uint64, len(xs))
	for i, x := range xs {
		v, err := sw.eval(e, x)
		if err != nil {
			return nil, err
		}
		vs[i] = v
	}
	return vs, nil
}

func (sw *Switch) call(e *env, ce *CallExpr) error {
	at := ce.Position()
	switch f := ce.Fun.(type) {
	case *Name:
		sym := sw.C.Syms[f]
		if sym.Kind == SymAction {
			args, err := sw.evalAll(e, ce.Args)
			if err != nil {
				return err
			}
			return sw.runAction(e, sym, args)
		}
		return sw.extern(e, ce, f.Name)
	case *Member:
		xt := sw.C.Types[f.X]
		switch {
		case xt.Kind == KHeader:
			h, err := sw.place(e, f.X)
			if err != nil {
				return err
			}
			switch f.Name {
			case "setValid":
				e.valid[h] = true
				for _, fl := range xt.Fields {
					e.vals[h+"."+fl.Name] = 0
				}
			case "setInvalid":
				e.valid[h] = false
			}
			return nil
		case xt == packetInT:
			return sw.extract(e, ce)
		case xt == packetOutT:
			return fmt.Errorf("%s: emit outside the deparser", at)
		case xt.Kind == KExtern:
			sym := sw.C.Syms[f.X.(*Name)]
			return sw.externMethod(e, ce, sym, f.Name)
		case xt.Kind == KTable:
			return sw.apply(e, sw.C.Syms[f.X.(*Name)])
		}
	}
	return fmt.Errorf("%s: cannot run %s", at, ExprString(ce))
}

func (sw *Switch) runAction(e *env, sym *Symbol, args []uint64) error {
	a := sym.Decl.(*ActionDecl)
	for i, p := range a.Params {
		ps := sw.C.Defs[p]
		e.locals[ps] = args[i] & ps.Type.Mask()
	}
	return sw.stmt(e, a.Body)
}

func (sw *Switch) externMethod(e *env, ce *CallExpr, sym *Symbol, m string) error {
	at := ce.Position()
	switch m {
	case "read", "write":
		cells := sw.Regs[sym.Qualified]
		ix := ce.Args[1]
		if m == "write" {
			ix = ce.Args[0]
		}
		i, err := sw.eval(e, ix)
		if err != nil {
			return err
		}
		if i >= uint64(len(cells)) {
			return fmt.Errorf("%s: register %s: index %d past its %d cells", at, sym.Qualified, i, len(cells))
		}
		if m == "read" {
			return sw.store(e, ce.Args[0], cells[i])
		}
		v, err := sw.eval(e, ce.Args[1])
		if err != nil {
			return err
		}
		cells[i] = v & sym.Type.Elem.Mask()
		return nil
	case "count":
		cells := sw.Counts[sym.Qualified]
		i, err := sw.eval(e, ce.Args[0])
		if err != nil {
			return err
		}
		if i >= uint64(len(cells)) {
			return fmt.Errorf("%s: counter %s: index %d past its %d cells", at, sym.Qualified, i, len(cells))
		}
		cells[i].Packets++
		cells[i].Bytes += e.vals["std.packet_length"]
		return nil
	}
	return fmt.Errorf("%s: %s has no method %s", at, sym.Name, m)
}

// packBits packs values of the given widths most significant bit first.
func packBits(vals []uint64, widths []int) []byte {
	total := 0
	for _, w := range widths {
		total += w
	}
	buf := make([]byte, (total+7)/8)
	off := 0
	for i, v := range vals {
		putBits(buf, off, widths[i], v)
		off += widths[i]
	}
	return buf
}

// listBits evaluates a list's values and their widths.
func (sw *Switch) listBits(e *env, x Expr) ([]byte, int, error) {
	l := x.(*ListExpr)
	vals, err := sw.evalAll(e, l.Elems)
	if err != nil {
		return nil, 0, err
	}
	widths := make([]int, len(l.Elems))
	total := 0
	for i, el := range l.Elems {
		widths[i] = sw.C.Types[el].Width
		total += widths[i]
	}
	return packBits(vals, widths), total, nil
}

// checksumBytes packs the fields of a checksum's list as bmv2 does: the
// fields of headers that are not valid left out, a varbit field as the
// bytes extracted into it.
func (sw *Switch) checksumBytes(e *env, l *ListExpr) ([]byte, error) {
	var buf []byte
	off := 0
	for _, el := range l.Elems {
		t := sw.C.Types[el]
		if m, ok := el.(*Member); ok && sw.C.Types[m.X] != nil && sw.C.Types[m.X].Kind == KHeader {
			h, err := sw.place(e, m.X)
			if err != nil {
				return nil, err
			}
			if !e.valid[h] {
				continue
			}
			if t.Kind == KVarbit {
				if off%8 != 0 {
					return nil, fmt.Errorf("%s: a varbit field off a byte boundary in a checksum", el.Position())
				}
				buf = append(buf, e.varData[h]...)
				off += 8 * len(e.varData[h])
				continue
			}
		}
		v, err := sw.eval(e, el)
		if err != nil {
			return nil, err
		}
		for len(buf)*8 < off+t.Width {
			buf = append(buf, 0)
		}
		putBits(buf, off, t.Width, v)
		off += t.Width
	}
	return buf, nil
}

func (sw *Switch) extern(e *env, ce *CallExpr, name string) error {
	at := ce.Position()
	switch name {
	case "hash":
		data, n, err := sw.listBits(e, ce.Args[3])
		if err != nil {
			return err
		}
		if n%8 != 0 {
			return fmt.Errorf("%s: hash data of %d bits: bmv2 and p4gen hash whole bytes", at, n)
		}
		algo := hashAlgorithmT.Members[sw.C.Consts[ce.Args[1]]]
		h, err := HashBytes(algo, data)
		if err != nil {
			return fmt.Errorf("%s: %v", at, err)
		}
		vs, err := sw.evalAll(e, []Expr{ce.Args[2], ce.Args[4]})
		if err != nil {
			return err
		}
		base, max := vs[0], vs[1]
		v := base
		if max > 0 {
			v = base + h%max
		}
		return sw.store(e, ce.Args[0], v)
	case "random":
		vs, err := sw.evalAll(e, ce.Args[1:])
		if err != nil {
			return err
		}
		return sw.store(e, ce.Args[0], sw.Random(vs[0], vs[1]))
	case "digest":
		l, ok := ce.Args[1].(*ListExpr)
		if !ok || len(ce.TypeArgs) != 1 {
			return fmt.Errorf("%s: the interpreter sends digests of a list with its struct type", at)
		}
		vals, err := sw.evalAll(e, l.Elems)
		if err != nil {
			return err
		}
		for i, el := range l.Elems {
			vals[i] &= sw.mask(el)
		}
		e.dig = append(e.dig, DigestMsg{Type: ce.TypeArgs[0].Name, Values: vals})
	case "clone", "clone_preserving_field_list":
		s, err := sw.eval(e, ce.Args[1])
		if err != nil {
			return err
		}
		if cloneTypeT.Members[sw.C.Consts[ce.Args[0]]] == "E2E" {
			list := int64(-1)
			if len(ce.Args) == 3 {
				l, err := sw.eval(e, ce.Args[2])
				if err != nil {
					return err
				}
				list = int64(l)
			}
			e.e2e = append(e.e2e, e2eClone{uint32(s), list})
			return nil
		}
		if len(ce.Args) == 3 {
			return fmt.Errorf("%s: the interpreter preserves fields in egress-to-egress clones only", at)
		}
		e.clones = append(e.clones, uint32(s))
	case "mark_to_drop":
		e.vals["std.egress_spec"] = dropPort
	case "update_checksum", "verify_checksum":
		c, err := sw.eval(e, ce.Args[0])
		if err != nil || c == 0 {
			return err
		}
		data, err := sw.checksumBytes(e, ce.Args[1].(*ListExpr))
		if err != nil {
			return err
		}
		algo := hashAlgorithmT.Members[sw.C.Consts[ce.Args[3]]]
		h, err := HashBytes(algo, data)
		if err != nil {
			return fmt.Errorf("%s: %v", at, err)
		}
		if name == "update_checksum" {
			return sw.store(e, ce.Args[2], h)
		}
		got, err := sw.eval(e, ce.Args[2])
		if err != nil {
			return err
		}
		if got != h&sw.mask(ce.Args[2]) {
			e.vals["std.checksum_error"] = 1
		}
	default:
		return fmt.Errorf("%s: the interpreter cannot run %s", at, name)
	}
	return nil
}

// HashBytes is v1model's hash algo over data as bmv2 computes it: crc32
// is IEEE 802.3's, crc16 CRC-16/ARC, identity the data's low 64 bits,
// csum16 the Internet checksum, xor16 the XOR of its 16-bit words.
func HashBytes(algo string, data []byte) (uint64, error) {
	switch algo {
	case "crc32":
		return uint64(crc32.ChecksumIEEE(data)), nil
	case "crc16":
		var crc uint16
		for _, c := range data {
			crc ^= uint16(c)
			for range 8 {
				if crc&1 != 0 {
					crc = crc>>1 ^ 0xA001
				} else {
					crc >>= 1
				}
			}
		}
		return uint64(crc), nil
	case "identity":
		var v uint64
		for _, c := range data {
			v = v<<8 | uint64(c)
		}
		return v, nil
	case "csum16":
		var sum uint32
		for i := 0; i+1 < len(data); i += 2 {
			sum += uint32(data[i])<<8 | uint32(data[i+1])
		}
		if len(data)%2 == 1 {
			sum += uint32(data[len(data)-1]) << 8
		}
		for sum>>16 != 0 {
			sum = sum&0xffff + sum>>16
		}
		return uint64(^uint16(sum)), nil
	case "xor16":
		var x uint16
		for i := 0; i < len(data); i += 2 {
			w := uint16(data[i]) << 8
			if i+1 < len(data) {
				w |= uint16(data[i+1])
			}
			x ^= w
		}
		return uint64(x), nil
	}
	return 0, fmt.Errorf("hash algorithm %s is not one the interpreter computes", algo)
}

// apply looks a table up and runs the action it gives.
func (sw *Switch) apply(e *env, sym *Symbol) error {
	t := sym.Decl.(*TableDecl)
	keys := make([]uint64, len(t.Keys))
	for i, k := range t.Keys {
		v, err := sw.eval(e, k.X)
		if err != nil {
			return err
		}
		keys[i] = v
	}
	entries := sw.Entries[sym.Qualified]
	if t.Entries != nil {
		entries = sw.consts[t]
	}
	hasLPM := false
	for _, k := range t.Keys {
		hasLPM = hasLPM || k.Match == "lpm"
	}
	var best *TableEntry
	bestLen := -1
	for i := range entries {
		en := &entries[i]
		hit, plen := true, 0
		for j, k := range t.Keys {
			m := en.Keys[j]
			kt := sw.C.Types[k.X]
			switch k.Match {
			case "exact":
				hit = hit && keys[j] == m.Value
			case "ternary", "optional":
				hit = hit && keys[j]&m.Mask == m.Value&m.Mask
			case "lpm":
				w := kt.Width
				if kt.Kind == KBool {
					w = 1
				}
				var mask uint64
				if m.PrefixLen > 0 {
					mask = kt.Mask() &^ (kt.Mask() >> uint(min(m.PrefixLen, w)))
				}
				hit = hit && keys[j]&mask == m.Value&mask
				plen += m.PrefixLen
			case "range":
				hit = hit && m.Lo <= keys[j] && keys[j] <= m.Hi
			}
		}
		if !hit {
			continue
		}
		switch {
		case best == nil:
			best, bestLen = en, plen
		case hasLPM && plen > bestLen:
			best, bestLen = en, plen
		case !hasLPM && en.Priority > best.Priority:
			best = en
		}
	}
	name, args := "", []uint64(nil)
	switch {
	case best != nil:
		name, args = best.Action, best.Args
	case t.Default != nil:
		var err error
		name = t.Default.Name
		if args, err = sw.evalAll(e, t.Default.Args); err != nil {
			return err
		}
	default:
		return nil // NoAction
	}
	act := sw.C.Objects[sym.Control.Name+"."+name]
	if act == nil || act.Kind != SymAction {
		return fmt.Errorf("table %s: no action %s", sym.Qualified, name)
	}
	if len(args) != len(act.Decl.(*ActionDecl).Params) {
		return fmt.Errorf("table %s: action %s takes %d arguments, the entry gives %d", sym.Qualified, name, len(act.Decl.(*ActionDecl).Params), len(args))
	}
	return sw.runAction(e, act, args)
}

func (sw *Switch) eval(e *env, x Expr) (uint64, error) {
	if v, ok := sw.C.Consts[x]; ok {
		return v & sw.mask(x), nil
	}
	switch x := x.(type) {
	case *Name:
		if sym := sw.local(x); sym != nil {
			return e.locals[sym], nil
		}
	case *Member:
		p, err := sw.place(e, x)
		if err != nil {
			return 0, err
		}
		return e.vals[p] & sw.mask(x), nil
	case *CallExpr:
		if m, ok := x.Fun.(*Member); ok && m.Name == "isValid" {
			h, err := sw.place(e, m.X)
			if err != nil {
				return 0, err
			}
			if e.valid[h] {
				return 1, nil
			}
			return 0, nil
		}
	case *UnaryExpr:
		v, err := sw.eval(e, x.X)
		if err != nil {
			return 0, err
		}
		switch x.Op {
		case "!":
			return v ^ 1, nil
		case "~":
			return ^v & sw.mask(x), nil
		case "-":
			return -v & sw.mask(x), nil
		}
	case *CastExpr:
		v, err := sw.eval(e, x.X)
		if err != nil {
			return 0, err
		}
		return v & sw.mask(x), nil
	case *SliceExpr:
		v, err := sw.eval(e, x.X)
		if err != nil {
			return 0, err
		}
		return v >> sw.C.Consts[x.Lo] & sw.mask(x), nil
	case *CondExpr:
		c, err := sw.eval(e, x.Cond)
		if err != nil {
			return 0, err
		}
		if c != 0 {
			return sw.eval(e, x.Then)
		}
		return sw.eval(e, x.Else)
	case *BinaryExpr:
		return sw.binary(e, x)
	}
	return 0, fmt.Errorf("%s: cannot evaluate %s", x.Position(), ExprString(x))
}

func (sw *Switch) binary(e *env, x *BinaryExpr) (uint64, error) {
	l, err := sw.eval(e, x.L)
	if err != nil {
		return 0, err
	}
	switch {
	case x.Op == "&&" && l == 0:
		return 0, nil
	case x.Op == "||" && l == 1:
		return 1, nil
	}
	r, err := sw.eval(e, x.R)
	if err != nil {
		return 0, err
	}
	m := sw.mask(x)
	b := func(c bool) uint64 {
		if c {
			return 1
		}
		return 0
	}
	switch x.Op {
	case "&&", "||":
		return r, nil
	case "==":
		return b(l == r), nil
	case "!=":
		return b(l != r), nil
	case "<":
		return b(l < r), nil
	case ">":
		return b(l > r), nil
	case "<=":
		return b(l <= r), nil
	case ">=":
		return b(l >= r), nil
	case "+":
		return (l + r) & m, nil
	case "-":
		return (l - r) & m, nil
	case "*":
		return l * r & m, nil
	case "/", "%":
		if r == 0 {
			return 0, fmt.Errorf("%s: division by zero", x.At)
		}
		if x.Op == "/" {
			return l / r, nil
		}
		return l % r, nil
	case "|+|":
		if s := l + r; s < l || s > m {
			return m, nil
		} else {
			return s, nil
		}
	case "|-|":
		if r > l {
			return 0, nil
		}
		return l - r, nil
	case "&":
		return l & r, nil
	case "|":
		return l | r, nil
	case "^":
		return l ^ r, nil
	case "<<":
		if r >= 64 {
			return 0, nil
		}
		return l << r & m, nil
	case ">>":
		if r >= 64 {
			return 0, nil
		}
		return l >> r, nil
	case "++":
		return (l<<uint(sw.C.Types[x.R].Width) | r) & m, nil
	}
	return 0, fmt.Errorf("%s: operator %s", x.At, x.Op)
}
