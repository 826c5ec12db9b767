package p4gen

import (
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
)

// Switch is the reference semantics of a Program: the state it keeps
// across packets (register cells, counter cells, installed table entries)
// and Process, which runs one packet through parser, ingress, egress and
// deparser as v1model defines them. It is written to be read, not to be
// fast (the PISA model is the fast one), and a test holds the model, and
// an interpreter of the printed P4 text, to it.
type Switch struct {
	Prog     *Program
	Regs     map[*Register][]uint64
	Counts   map[*Counter][]CounterCell
	Entries  map[*Table][]Entry // installed; a Const table's are its own
	Sessions map[uint32]uint16  // clone session → egress port
	// Random gives v1model random's values: a uniform integer in
	// [lo, hi]. Nil: a PCG seeded with 1, so that runs repeat.
	Random func(lo, hi uint64) uint64

	headers map[string]*Header
	paths   map[string][]string // a header's fields as "hdr.h.f", in order
}

// header returns the header instance named name and its fields' paths.
func (s *Switch) header(name string) (*Header, []string) {
	if s.headers == nil {
		s.headers, s.paths = map[string]*Header{}, map[string][]string{}
		for _, h := range s.Prog.Headers {
			s.headers[h.Name] = h
			for _, f := range h.Type.Fields {
				s.paths[h.Name] = append(s.paths[h.Name], "hdr."+h.Name+"."+f.Name)
			}
		}
	}
	return s.headers[name], s.paths[name]
}

// CounterCell is one cell of a counter.
type CounterCell struct{ Packets, Bytes uint64 }

// NewSwitch returns a switch running p with zeroed state; p must be
// valid (Validate).
func NewSwitch(p *Program) *Switch {
	s := &Switch{Prog: p, Regs: map[*Register][]uint64{}, Counts: map[*Counter][]CounterCell{},
		Entries: map[*Table][]Entry{}, Sessions: map[uint32]uint16{}}
	for _, r := range p.Registers {
		s.Regs[r] = make([]uint64, r.Size)
	}
	for _, c := range p.Counters {
		s.Counts[c] = make([]CounterCell, c.Size)
	}
	for _, t := range p.Tables {
		if t.Const {
			s.Entries[t] = t.Entries
		}
	}
	pcg := rand.New(rand.NewPCG(1, 0))
	s.Random = func(lo, hi uint64) uint64 {
		if hi-lo == ^uint64(0) {
			return pcg.Uint64()
		}
		return lo + pcg.Uint64N(hi-lo+1)
	}
	return s
}

// Arrival is a packet as it enters the switch.
type Arrival struct {
	Data []byte
	Port uint16
	// Time is ingress_global_timestamp, in the switch's clock unit.
	Time uint64
	// QDepth is the depth of the egress queue the packet joins
	// (enq_qdepth and deq_qdepth in egress), in packets.
	QDepth uint32
}

// Departure is a packet leaving the switch.
type Departure struct {
	Port     uint16
	Data     []byte
	Instance uint32 // InstanceNormal, or InstanceCloneI2E
}

// DigestMsg is a digest the datapath sent to the controller.
type DigestMsg struct {
	Type   *DigestType
	Values []uint64
}

// Result is what one packet did: the packets that left (the packet
// itself unless dropped, then its clones) and the digests it sent.
// ParserError names the parser's error ("" for none: NoError).
type Result struct {
	Out         []Departure
	Digests     []DigestMsg
	ParserError string
}

// ErrPacketTooShort is the parser error of a packet shorter than a header
// it extracts.
var ErrPacketTooShort = errors.New("PacketTooShort")

// env is one packet's values as a control sees them.
type env struct {
	vals    map[string]uint64 // hdr.h.f, meta.f, standard_metadata.f
	valid   map[string]bool
	varData map[string][]byte // a header's varbit field, as extracted
	payload []byte
	params  []map[string]uint64 // the running actions' arguments
	old     *uint64             // the RMW cell being written
	// rmws counts register accesses at this packet, to enforce one.
	rmws   map[*Register]bool
	clones []uint32
	e2e    []Clone // egress-to-egress clones asked for
	dig    []DigestMsg
}

func newEnv() *env {
	return &env{vals: make(map[string]uint64, 256), valid: make(map[string]bool, 64), varData: map[string][]byte{}, rmws: map[*Register]bool{}}
}

// Process runs one packet through the switch.
func (s *Switch) Process(a Arrival) (Result, error) {
	e := newEnv()
	var res Result
	// Standard metadata is set before the parser runs: it may select on
	// ingress_port (a packet_out header on packets from the CPU port).
	arrive(e, a)
	if err := s.parse(e, a.Data); err != nil {
		res.ParserError = err.Error()
	}
	if err := s.stmts(e, s.Prog.Ingress); err != nil {
		return res, err
	}
	res.Digests = e.dig
	// As v1model on bmv2: a packet is dropped when egress_spec is the
	// drop port at the end of ingress (mark_to_drop sets it; an action
	// after it may set a port again).
	spec := e.vals["standard_metadata.egress_spec"]
	type out struct {
		e        *env
		port     uint64
		instance uint32
	}
	var outs []out
	if spec != DropPort {
		outs = append(outs, out{e, spec, InstanceNormal})
	}
	for _, sess := range e.clones {
		port, ok := s.Sessions[sess]
		if !ok {
			continue // no such session: the clone goes nowhere, as in bmv2
		}
		// An ingress-to-egress clone is the packet as it entered ingress,
		// with fresh metadata (v1model).
		c := newEnv()
		arrive(c, a)
		_ = s.parse(c, a.Data)
		outs = append(outs, out{c, uint64(port), InstanceCloneI2E})
	}
	for i := 0; i < len(outs); i++ {
		o := outs[i]
		o.e.vals["standard_metadata.egress_port"] = o.port
		o.e.vals["standard_metadata.egress_spec"] = o.port
		o.e.vals["standard_metadata.instance_type"] = uint64(o.instance)
		o.e.vals["standard_metadata.enq_qdepth"] = uint64(a.QDepth)
		o.e.vals["standard_metadata.deq_qdepth"] = uint64(a.QDepth)
		o.e.vals["standard_metadata.egress_global_timestamp"] = a.Time & Bit(48).Mask()
		o.e.rmws = map[*Register]bool{} // egress is a pipeline of its own, per instance
		o.e.e2e = nil
		n := len(o.e.dig)
		if err := s.stmts(o.e, s.Prog.Egress); err != nil {
			return res, err
		}
		res.Digests = append(res.Digests, o.e.dig[n:]...)
		if o.e.vals["standard_metadata.egress_spec"] == DropPort {
			continue // dropped in egress (mark_to_drop), as bmv2 does
		}
		data := s.deparse(o.e)
		res.Out = append(res.Out, Departure{Port: uint16(o.port), Data: data, Instance: o.instance})
		if o.instance != InstanceNormal {
			continue // a clone makes no clone of its own
		}
		// Egress-to-egress clones: the packet as it left, its egress run
		// again with the preserved metadata.
		for _, c := range o.e.e2e {
			port, ok := s.Sessions[c.Session]
			if !ok {
				continue
			}
			ce := newEnv()
			arrive(ce, Arrival{Data: data, Port: a.Port, Time: a.Time})
			_ = s.parse(ce, data)
			for _, r := range c.Preserve {
				ce.vals[r.Path] = o.e.vals[r.Path]
			}
			outs = append(outs, out{ce, uint64(port), InstanceCloneE2E})
		}
	}
	return res, nil
}

// arrive sets the standard metadata a packet enters with.
func arrive(e *env, a Arrival) {
	e.vals["standard_metadata.ingress_port"] = uint64(a.Port)
	e.vals["standard_metadata.packet_length"] = uint64(len(a.Data))
	e.vals["standard_metadata.ingress_global_timestamp"] = a.Time & Bit(48).Mask()
}

// parse runs the parser over data into e.
func (s *Switch) parse(e *env, data []byte) error {
	bit := 0 // offset in bits
	st := s.Prog.Parser[0]
	for {
		for i, h := range st.Extract {
			hdr, paths := s.header(h)
			fixed := hdr.Type.Bits()
			varBits := 0
			if i == len(st.Extract)-1 && st.VarBits != nil {
				v, err := s.eval(e, st.VarBits)
				if err != nil {
					return err
				}
				varBits = int(v)
			}
			if bit+fixed+varBits > 8*len(data) {
				e.payload = data[bit/8:]
				return ErrPacketTooShort
			}
			off := bit
			for j, f := range hdr.Type.Fields {
				if f.Var {
					if varBits > f.Bits {
						return fmt.Errorf("header %s: varbit field %s of %d bits takes at most %d", h, f.Name, varBits, f.Bits)
					}
					e.varData[h] = data[off/8 : (off+varBits)/8]
					off += varBits
					continue
				}
				e.vals[paths[j]] = getBits(data, off, f.Bits)
				off += f.Bits
			}
			bit = off
			e.valid[h] = true
		}
		next := st.Default
		if len(st.Select) > 0 {
			keys := make([]uint64, len(st.Select))
			for i, x := range st.Select {
				v, err := s.eval(e, x)
				if err != nil {
					return err
				}
				keys[i] = v
			}
			for _, c := range st.Cases {
				hit := true
				for i, v := range c.Values {
					m := st.Select[i].Type().Mask()
					if c.Masks != nil {
						m = c.Masks[i]
					}
					hit = hit && keys[i]&m == v&m
				}
				if hit {
					next = c.Next
					break
				}
			}
		}
		switch next {
		case Accept:
			e.payload = data[bit/8:]
			return nil
		case Reject:
			e.payload = data[bit/8:]
			return errors.New("reject")
		}
		for _, ps := range s.Prog.Parser {
			if ps.Name == next {
				st = ps
			}
		}
	}
}

// deparse emits the valid headers of Deparse, then the payload.
func (s *Switch) deparse(e *env) []byte {
	if s.Prog.UpdateIPv4Checksum && e.valid[IPv4Chunks[len(IPv4Chunks)-1]] {
		sum := IPv4ChecksumField
		e.vals[sum.Path] = 0
		var hdr []byte
		for _, h := range append(IPv4Chunks, "ipv4_opts") {
			if e.valid[h] {
				hdr = append(hdr, s.emit(e, h)...)
			}
		}
		e.vals[sum.Path] = uint64(Checksum16(hdr))
	}
	var out []byte
	for _, h := range s.Prog.Deparse {
		if e.valid[h] {
			out = append(out, s.emit(e, h)...)
		}
	}
	return append(out, e.payload...)
}

func (s *Switch) emit(e *env, h string) []byte {
	hdr, paths := s.header(h)
	t := hdr.Type
	n := t.Bits() + 8*len(e.varData[h])
	b := make([]byte, n/8)
	off := 0
	for j, f := range t.Fields {
		if f.Var {
			copy(b[off/8:], e.varData[h])
			off += 8 * len(e.varData[h])
			continue
		}
		putBits(b, off, f.Bits, e.vals[paths[j]])
		off += f.Bits
	}
	return b
}

// Checksum16 is the Internet checksum (RFC 1071) of b, as v1model's
// csum16.
func Checksum16(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// getBits reads n bits (≤ 64) at bit offset off of b, most significant
// first.
func getBits(b []byte, off, n int) uint64 {
	var v uint64
	for i := 0; i < n; i++ {
		p := off + i
		v = v<<1 | uint64(b[p/8]>>(7-p%8)&1)
	}
	return v
}

// putBits writes the low n bits of v at bit offset off of b.
func putBits(b []byte, off, n int, v uint64) {
	for i := 0; i < n; i++ {
		p := off + i
		bit := byte(v>>(n-1-i)) & 1
		b[p/8] = b[p/8]&^(1<<(7-p%8)) | bit<<(7-p%8)
	}
}

func (s *Switch) stmts(e *env, ss []Stmt) error {
	for _, st := range ss {
		if err := s.stmt(e, st); err != nil {
			return err
		}
	}
	return nil
}

func (s *Switch) stmt(e *env, st Stmt) error {
	switch st := st.(type) {
	case Assign:
		v, err := s.eval(e, st.X)
		if err != nil {
			return err
		}
		s.set(e, st.Dst, v)
	case If:
		c, err := s.eval(e, st.Cond)
		if err != nil {
			return err
		}
		if c != 0 {
			return s.stmts(e, st.Then)
		}
		return s.stmts(e, st.Else)
	case Apply:
		a, args, err := s.lookup(e, st.Table)
		if err != nil {
			return err
		}
		return s.call(e, a, args)
	case Call:
		args := make([]uint64, len(st.Args))
		for i, x := range st.Args {
			v, err := s.eval(e, x)
			if err != nil {
				return err
			}
			args[i] = v
		}
		return s.call(e, st.Action, args)
	case Hash:
		data := make([]uint64, len(st.Data))
		widths := make([]int, len(st.Data))
		for i, x := range st.Data {
			v, err := s.eval(e, x)
			if err != nil {
				return err
			}
			data[i], widths[i] = v, x.Type().Bits
		}
		h, err := HashValue(st.Algo, data, widths)
		if err != nil {
			return err
		}
		if st.Max > 0 {
			h %= st.Max
		}
		s.set(e, st.Dst, st.Base+h)
	case Random:
		s.set(e, st.Dst, s.Random(st.Lo, st.Hi))
	case RMW:
		if e.rmws[st.Reg] {
			return fmt.Errorf("register %s is accessed twice by one packet", st.Reg.Name)
		}
		e.rmws[st.Reg] = true
		i, err := s.eval(e, st.Index)
		if err != nil {
			return err
		}
		cells := s.Regs[st.Reg]
		if i >= uint64(len(cells)) {
			// bmv2 ignores an access past the end; a lowering must not make one.
			return fmt.Errorf("register %s: index %d past its %d cells", st.Reg.Name, i, len(cells))
		}
		old := cells[i]
		e.old = &old
		nv := old
		write := true
		if st.Cond != nil {
			c, err := s.eval(e, st.Cond)
			if err != nil {
				return err
			}
			write = c != 0
		}
		if write {
			if nv, err = s.eval(e, st.New); err != nil {
				return err
			}
		}
		e.old = nil
		cells[i] = nv & Bit(st.Reg.Width).Mask()
		if st.OldTo != nil {
			s.set(e, *st.OldTo, old)
		}
		if st.NewTo != nil {
			s.set(e, *st.NewTo, cells[i])
		}
	case Count:
		i, err := s.eval(e, st.Index)
		if err != nil {
			return err
		}
		cells := s.Counts[st.Counter]
		if i >= uint64(len(cells)) {
			return fmt.Errorf("counter %s: index %d past its %d cells", st.Counter.Name, i, len(cells))
		}
		cells[i].Packets++
		cells[i].Bytes += e.vals["standard_metadata.packet_length"]
	case Digest:
		vals := make([]uint64, len(st.Values))
		for i, x := range st.Values {
			v, err := s.eval(e, x)
			if err != nil {
				return err
			}
			vals[i] = v
		}
		e.dig = append(e.dig, DigestMsg{Type: st.Type, Values: vals})
	case Clone:
		if st.E2E {
			e.e2e = append(e.e2e, st)
		} else {
			e.clones = append(e.clones, st.Session)
		}
	case SetValid:
		e.valid[st.Header] = st.Valid
		if st.Valid {
			for _, f := range s.Prog.Header(st.Header).Type.Fields {
				e.vals["hdr."+st.Header+"."+f.Name] = 0
			}
		}
	case MarkToDrop:
		e.vals["standard_metadata.egress_spec"] = DropPort
	default:
		return fmt.Errorf("unknown statement %T", st)
	}
	return nil
}

func (s *Switch) call(e *env, a *Action, args []uint64) error {
	p := map[string]uint64{}
	for i, f := range a.Params {
		p[f.Name] = args[i] & Bit(f.Bits).Mask()
	}
	e.params = append(e.params, p)
	defer func() { e.params = e.params[:len(e.params)-1] }()
	return s.stmts(e, a.Body)
}

// lookup returns the action (and its arguments) a table runs for e.
func (s *Switch) lookup(e *env, t *Table) (*Action, []uint64, error) {
	keys := make([]uint64, len(t.Keys))
	for i, k := range t.Keys {
		v, err := s.eval(e, k.X)
		if err != nil {
			return nil, nil, err
		}
		keys[i] = v
	}
	var best *Entry
	bestLen := -1
	lpm := hasLPM(t)
	for i := range s.Entries[t] {
		en := &s.Entries[t][i]
		hit, plen := true, 0
		for j, k := range t.Keys {
			if !hit {
				break
			}
			m := en.Match[j]
			w := k.X.Type()
			switch k.Match {
			case Exact:
				hit = hit && keys[j] == m.Value
			case Ternary:
				hit = hit && keys[j]&m.Mask == m.Value&m.Mask
			case LPM:
				mask := w.Mask()
				if m.PrefixLen < w.Bits {
					mask = w.Mask() &^ (Bit(w.Bits - m.PrefixLen).Mask())
					if m.PrefixLen == 0 {
						mask = 0
					}
				}
				hit = hit && keys[j]&mask == m.Value&mask
				plen += m.PrefixLen
			case Range:
				hit = hit && m.Lo <= keys[j] && keys[j] <= m.Hi
			}
		}
		if !hit {
			continue
		}
		switch {
		case best == nil:
			best, bestLen = en, plen
		case lpm && plen > bestLen:
			best, bestLen = en, plen
		case !lpm && en.Priority > best.Priority:
			best = en
		}
	}
	if best == nil {
		return t.Default, t.DefaultArgs, nil
	}
	return best.Action, best.Args, nil
}

func hasLPM(t *Table) bool {
	for _, k := range t.Keys {
		if k.Match == LPM {
			return true
		}
	}
	return false
}

func (s *Switch) set(e *env, r Ref, v uint64) {
	v &= r.Type().Mask()
	if n := len(e.params); n > 0 {
		if _, ok := e.params[n-1][r.Path]; ok {
			e.params[n-1][r.Path] = v
			return
		}
	}
	e.vals[r.Path] = v
}

func (s *Switch) eval(e *env, x Expr) (uint64, error) {
	switch x := x.(type) {
	case Const:
		return x.Value, nil
	case Ref:
		if n := len(e.params); n > 0 {
			if v, ok := e.params[n-1][x.Path]; ok {
				return v, nil
			}
		}
		return e.vals[x.Path] & x.Type().Mask(), nil
	case Valid:
		if e.valid[x.Header] {
			return 1, nil
		}
		return 0, nil
	case Old:
		if e.old == nil {
			return 0, errors.New("a register's old value read outside its RMW")
		}
		return *e.old, nil
	case Unary:
		v, err := s.eval(e, x.X)
		if err != nil {
			return 0, err
		}
		if x.Op == Not {
			return v ^ 1, nil
		}
		return ^v & x.Type().Mask(), nil
	case Binary:
		l, err := s.eval(e, x.L)
		if err != nil {
			return 0, err
		}
		if x.Op == LAnd && l == 0 {
			return 0, nil
		}
		if x.Op == LOr && l == 1 {
			return 1, nil
		}
		r, err := s.eval(e, x.R)
		if err != nil {
			return 0, err
		}
		m := x.L.Type().Mask()
		b := func(c bool) uint64 {
			if c {
				return 1
			}
			return 0
		}
		switch x.Op {
		case Add:
			return (l + r) & m, nil
		case Sub:
			return (l - r) & m, nil
		case SatAdd:
			if s := l + r; s < l || s > m {
				return m, nil
			} else {
				return s, nil
			}
		case And:
			return l & r, nil
		case Or:
			return l | r, nil
		case Xor:
			return l ^ r, nil
		case Shl:
			if r >= 64 {
				return 0, nil
			}
			return (l << r) & m, nil
		case Shr:
			if r >= 64 {
				return 0, nil
			}
			return l >> r, nil
		case Eq:
			return b(l == r), nil
		case Ne:
			return b(l != r), nil
		case Lt:
			return b(l < r), nil
		case Le:
			return b(l <= r), nil
		case Gt:
			return b(l > r), nil
		case Ge:
			return b(l >= r), nil
		case LAnd, LOr:
			return r, nil
		}
		return 0, fmt.Errorf("unknown operator %v", x.Op)
	case Cast:
		v, err := s.eval(e, x.X)
		if err != nil {
			return 0, err
		}
		return v & x.Type().Mask(), nil
	case Slice:
		v, err := s.eval(e, x.X)
		if err != nil {
			return 0, err
		}
		return v >> uint(x.Lo) & x.Type().Mask(), nil
	case Mux:
		c, err := s.eval(e, x.Cond)
		if err != nil {
			return 0, err
		}
		if c != 0 {
			return s.eval(e, x.Then)
		}
		return s.eval(e, x.Else)
	}
	return 0, fmt.Errorf("unknown expression %T", x)
}

// HashValue is v1model's hash of data (each value in its width, packed
// most significant bit first into bytes; the widths must add up to whole
// bytes) by algo: CRC32 is IEEE 802.3's (zlib's), CRC16 is CRC-16/ARC
// (reflected polynomial 0x8005, initial 0), as bmv2 computes them;
// Identity is the packed bits themselves (their low 64).
func HashValue(algo HashAlgo, data []uint64, widths []int) (uint64, error) {
	total := 0
	for _, w := range widths {
		total += w
	}
	if total%8 != 0 {
		return 0, fmt.Errorf("hash data of %d bits: pad it to whole bytes", total)
	}
	buf := make([]byte, total/8)
	off := 0
	for i, v := range data {
		putBits(buf, off, widths[i], v)
		off += widths[i]
	}
	switch algo {
	case CRC32:
		return uint64(crc32.ChecksumIEEE(buf)), nil
	case CRC16:
		return uint64(CRC16ARC(buf)), nil
	case Identity:
		var v uint64
		for _, c := range buf {
			v = v<<8 | uint64(c)
		}
		return v, nil
	}
	return 0, fmt.Errorf("unknown hash algorithm %v", algo)
}

// CRC16ARC is CRC-16/ARC of b (poly 0x8005 reflected, init 0, no final
// xor): check value 0xBB3D for "123456789".
func CRC16ARC(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0xA001
			} else {
				crc >>= 1
			}
		}
	}
	return crc
}
