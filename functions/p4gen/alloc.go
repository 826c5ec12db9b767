package p4gen

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Stage allocation: what a Tofino-like compiler does with a program
// before it runs, against the switch's Profile. The statements of each
// pipeline (ingress, egress) become units, the logical tables of a
// match-action stage: a table with its actions (and the registers and
// counters those touch), a register's read-modify-write (a stateful ALU
// running a register action), or a run of straight-line statements (one
// action of a keyless table, as p4c makes of them). A unit goes in the
// first stage that its dependencies allow and that has room for it:
//
//   - a unit reading a field (as a key, in a condition that guards it, or
//     in an action) that an earlier unit writes goes in a later stage
//     than that one (match and action dependencies);
//   - a unit writing a field an earlier unit writes goes later too; one
//     writing a field an earlier unit only reads may share its stage
//     (a stage reads its input before it writes);
//   - units on the two branches of one If never run for one packet: no
//     dependency joins them;
//   - a register lives in one stage: every access to it, on whichever
//     branch, is in that stage.
//
// Room is counted per stage in the Profile's units: SRAM blocks for
// registers, exact-match tables, counters and action data; TCAM blocks
// for ternary, LPM and range keys; stateful ALUs, one per register
// accessed (two for a register kept as a pair); logical tables. Nothing
// is split across stages. A unit that fits nowhere is refused with the
// reason in these terms, and the allocation stays as it was, so that
// placement can offer a switch one function after another.

// Allocator allocates the units of functions, offered one after
// another, to the stages of a switch pipeline.
type Allocator struct {
	prof   Profile
	gress  [2]*pipeline // ingress, egress
	ops    int          // stateful operations (RMW statements) placed
	owners []string
	ifs    int // Ifs seen, to name branches
	// floor is, for a register whose accesses on exclusive branches need
	// different stages, the stage the latest of them needs: the register
	// is put there from its first access on (Offer learns it).
	floor map[*Register]int
}

// pinError is a unit that needs a later stage than the one an earlier
// access on another branch put its register in.
type pinError struct {
	reg   *Register
	stage int
	msg   string
}

func (e *pinError) Error() string { return e.msg }

// branch is one step of a unit's way through the Ifs: the If and its side.
type branch struct{ ifID, side int }

// access is a unit's read or write of a field: where, and on which
// branches.
type access struct {
	stage int
	path  []branch
}

// exclusive reports whether units on paths a and b never both run: they
// part at one If, on its two sides.
func exclusive(a, b []branch) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return a[i].ifID == b[i].ifID
		}
	}
	return false
}

// pipeline is the allocation of one of ingress and egress.
type pipeline struct {
	name    string
	stages  []StageUse
	written map[string][]access // field → its writers
	read    map[string][]access // field → its readers
	regs    map[*Register]int
}

// StageUse is what one stage holds.
type StageUse struct {
	Stage  int      `json:"stage"`
	SRAM   int      `json:"sram_blocks"`
	TCAM   int      `json:"tcam_blocks"`
	ALUs   int      `json:"stateful_alus"`
	Tables int      `json:"tables"`
	Units  []string `json:"units"`
	owners []string
}

// unit is one logical table to place.
type unit struct {
	what                     string // for messages: "register cms_2_row0 of 65536×32 b"
	owner                    string
	reads, writes            map[string]bool
	path                     []branch
	regs                     []*Register
	sram, tcam, alus, tables int
	ops                      int
	need                     string // the unit's needs, for messages
}

// NewAllocator returns an empty allocation on a switch with profile p.
func NewAllocator(p Profile) (*Allocator, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	a := &Allocator{prof: p}
	for i, n := range []string{"ingress", "egress"} {
		a.gress[i] = &pipeline{name: n, stages: make([]StageUse, p.Stages),
			written: map[string][]access{}, read: map[string][]access{}, regs: map[*Register]int{}}
		for s := range a.gress[i].stages {
			a.gress[i].stages[s].Stage = s
		}
	}
	return a, nil
}

// Allocate allocates a whole program, each unit named by its own
// declarations.
func Allocate(prog *Program, p Profile) (*Allocator, error) {
	a, err := NewAllocator(p)
	if err != nil {
		return nil, err
	}
	if err := a.Offer(prog, "", prog.Ingress, prog.Egress); err != nil {
		return nil, err
	}
	return a, nil
}

// Offer allocates the statements of one function, appended to the
// program's ingress and egress, after what was offered before. owner
// names the function in messages ("after hll_3"); prog holds the
// declarations the statements use. On a refusal the error says which
// resource is short where, and the allocation is unchanged.
//
// A register accessed on exclusive branches is put, from its first
// access, in the stage the latest of its accesses needs: when one needs a
// later stage than an earlier one took, the offer starts again with the
// register there, as a compiler places a register where all its accesses
// can be.
func (a *Allocator) Offer(prog *Program, owner string, ingress, egress []Stmt) error {
	floor := map[*Register]int{}
	for {
		trial := a.clone()
		trial.floor = floor
		err := trial.offer(prog, owner, ingress, egress)
		if pe, ok := err.(*pinError); ok && floor[pe.reg] < pe.stage {
			floor[pe.reg] = pe.stage
			continue
		}
		if err != nil {
			return err
		}
		trial.floor = nil
		*a = *trial
		return nil
	}
}

func (a *Allocator) offer(prog *Program, owner string, ingress, egress []Stmt) error {
	for i, body := range [][]Stmt{ingress, egress} {
		units, err := a.units(prog, owner, body)
		if err != nil {
			return err
		}
		for _, u := range units {
			if err := a.place(a.gress[i], u); err != nil {
				return err
			}
		}
	}
	if owner != "" {
		a.owners = append(a.owners, owner)
	}
	return nil
}

func (a *Allocator) clone() *Allocator {
	b := &Allocator{prof: a.prof, ops: a.ops, owners: slices.Clone(a.owners), ifs: a.ifs}
	deep := func(m map[string][]access) map[string][]access {
		out := make(map[string][]access, len(m))
		for k, v := range m {
			out[k] = slices.Clone(v)
		}
		return out
	}
	for i, g := range a.gress {
		h := &pipeline{name: g.name, stages: make([]StageUse, len(g.stages)),
			written: deep(g.written), read: deep(g.read), regs: maps.Clone(g.regs)}
		for s, st := range g.stages {
			st.Units, st.owners = slices.Clone(st.Units), slices.Clone(st.owners)
			h.stages[s] = st
		}
		b.gress[i] = h
	}
	return b
}

// place puts u in the first stage its dependencies allow that has room.
func (a *Allocator) place(g *pipeline, u *unit) error {
	first, after := 0, ""
	dep := func(s int, why string) {
		if s > first {
			first, after = s, why
		}
	}
	last := func(as []access) (int, bool) {
		s, ok := -1, false
		for _, x := range as {
			if !exclusive(x.path, u.path) && x.stage > s {
				s, ok = x.stage, true
			}
		}
		return s, ok
	}
	for _, f := range sortedKeys(u.reads) {
		if s, ok := last(g.written[f]); ok {
			dep(s+1, fmt.Sprintf("it reads %s, written in stage %d", f, s))
		}
	}
	for _, f := range sortedKeys(u.writes) {
		if s, ok := last(g.written[f]); ok {
			dep(s+1, fmt.Sprintf("it writes %s, written in stage %d", f, s))
		}
		if s, ok := last(g.read[f]); ok {
			dep(s, fmt.Sprintf("it writes %s, read in stage %d", f, s))
		}
	}
	// A register already placed pins the unit to its stage.
	pinned := -1
	var pinner *Register
	var fresh []*Register
	for _, r := range u.regs {
		if s, ok := g.regs[r]; ok {
			if pinned >= 0 && s != pinned {
				return fmt.Errorf("%s accesses registers in stages %d and %d; a logical table is in one stage", u.what, pinned, s)
			}
			pinned, pinner = s, r
		} else {
			fresh = append(fresh, r)
			if f, ok := a.floor[r]; ok {
				dep(f, fmt.Sprintf("register %s is accessed in stage %d on another branch", r.Name, f))
			}
		}
	}
	if pinned >= 0 {
		if first > pinned {
			msg := fmt.Sprintf("%s must be in stage %d, where register %s is, but %s", u.what, pinned, pinner.Name, after)
			if first >= len(g.stages) {
				return fmt.Errorf("%s", msg)
			}
			return &pinError{reg: pinner, stage: first, msg: msg}
		}
		// The register's ALU and memory are there already.
		for _, r := range u.regs {
			if slices.Contains(fresh, r) {
				continue
			}
			alus, _ := a.prof.RegisterWidth(r.Width)
			u.alus -= alus
			u.sram -= a.blocks(r.Size, r.Width)
		}
		first = pinned
	}
	if first >= len(g.stages) {
		return fmt.Errorf("%s would need stage %d of the %s pipeline (%s); the switch has %d stages", u.what, first, g.name, after, len(g.stages))
	}
	if msg := a.tooBig(u); msg != "" {
		return fmt.Errorf("%s needs %s; a stage has %s", u.what, u.need, msg)
	}
	end := len(g.stages) - 1
	if pinned >= 0 {
		end = pinned
	}
	for s := first; s <= end; s++ {
		if a.short(&g.stages[s], u) == "" {
			a.put(g, s, u)
			return nil
		}
	}
	st := &g.stages[first]
	msg := fmt.Sprintf("%s needs %s; stage %d has %s left", u.what, u.need, first, a.short(st, u))
	if len(st.owners) > 0 {
		msg += " after " + strings.Join(st.owners, ", ")
	}
	switch {
	case end == first+1:
		msg += fmt.Sprintf(", and stage %d has no room either", end)
	case end > first+1:
		msg += fmt.Sprintf(", and stages %d to %d have no room either", first+1, end)
	}
	if after != "" {
		msg += " (it cannot be earlier than stage " + fmt.Sprint(first) + ": " + after + ")"
	}
	return fmt.Errorf("%s", msg)
}

// short returns what st lacks for u ("4 SRAM blocks"), "" when u fits.
func (a *Allocator) short(st *StageUse, u *unit) string {
	p := &a.prof
	switch {
	case st.SRAM+u.sram > p.SRAMBlocks:
		return plural(p.SRAMBlocks-st.SRAM, "SRAM block")
	case st.TCAM+u.tcam > p.TCAMBlocks:
		return plural(p.TCAMBlocks-st.TCAM, "TCAM block")
	case st.ALUs+u.alus > p.ALUs:
		return plural(p.ALUs-st.ALUs, "stateful ALU")
	case st.Tables+u.tables > p.Tables:
		return plural(p.Tables-st.Tables, "logical table")
	}
	return ""
}

// tooBig returns what a whole stage has when u needs more than that.
func (a *Allocator) tooBig(u *unit) string {
	return a.short(&StageUse{}, u)
}

func (a *Allocator) put(g *pipeline, s int, u *unit) {
	st := &g.stages[s]
	st.SRAM += u.sram
	st.TCAM += u.tcam
	st.ALUs += u.alus
	st.Tables += u.tables
	st.Units = append(st.Units, u.what)
	owner := u.owner
	if owner == "" {
		owner = u.what
	}
	if !slices.Contains(st.owners, owner) {
		st.owners = append(st.owners, owner)
	}
	for f := range u.writes {
		g.written[f] = append(g.written[f], access{s, u.path})
	}
	for f := range u.reads {
		g.read[f] = append(g.read[f], access{s, u.path})
	}
	for _, r := range u.regs {
		g.regs[r] = s
	}
	a.ops += u.ops
}

// blocks is the SRAM blocks that n cells of w bits take, packed into the
// words of a block.
func (a *Allocator) blocks(n, w int) int {
	p := &a.prof
	if n <= 0 || w <= 0 {
		return 0
	}
	var words int
	if w <= p.SRAMWidth {
		per := p.SRAMWidth / w
		words = (n + per - 1) / per
	} else {
		words = n * ((w + p.SRAMWidth - 1) / p.SRAMWidth)
	}
	return (words + p.SRAMDepth - 1) / p.SRAMDepth
}

// units turns statements into the units to place, in order.
func (a *Allocator) units(prog *Program, owner string, body []Stmt) ([]*unit, error) {
	b := &unitBuilder{a: a, prog: prog, owner: owner}
	if err := b.walk(body, nil); err != nil {
		return nil, err
	}
	b.flush()
	// Accesses to one register on exclusive branches are units of their
	// own, pinned to the register's stage by place.
	return b.out, nil
}

type unitBuilder struct {
	a     *Allocator
	prog  *Program
	owner string
	out   []*unit
	run   *unit    // straight-line statements being gathered
	path  []branch // the Ifs the statements are under
}

func (b *unitBuilder) newUnit(what string, cond map[string]bool) *unit {
	u := &unit{what: what, owner: b.owner, reads: maps.Clone(cond), writes: map[string]bool{}, tables: 1, path: slices.Clone(b.path)}
	if u.reads == nil {
		u.reads = map[string]bool{}
	}
	return u
}

func (b *unitBuilder) flush() {
	if b.run != nil {
		b.finish(b.run)
		b.out = append(b.out, b.run)
		b.run = nil
	}
}

// finish fills in the unit's needs for messages.
func (b *unitBuilder) finish(u *unit) {
	var parts []string
	if u.sram > 0 {
		parts = append(parts, plural(u.sram, "SRAM block"))
	}
	if u.tcam > 0 {
		parts = append(parts, plural(u.tcam, "TCAM block"))
	}
	if u.alus > 0 {
		parts = append(parts, plural(u.alus, "stateful ALU"))
	}
	parts = append(parts, plural(u.tables, "logical table"))
	u.need = strings.Join(parts, ", ")
}

func (b *unitBuilder) walk(ss []Stmt, cond map[string]bool) error {
	for _, s := range ss {
		switch s := s.(type) {
		case If:
			b.flush()
			inner := maps.Clone(cond)
			if inner == nil {
				inner = map[string]bool{}
			}
			reads(s.Cond, inner)
			b.a.ifs++
			id := b.a.ifs
			for side, ss := range [][]Stmt{s.Then, s.Else} {
				b.path = append(b.path, branch{id, side})
				if err := b.walk(ss, inner); err != nil {
					return err
				}
				b.flush()
				b.path = b.path[:len(b.path)-1]
			}
		case Apply:
			b.flush()
			u, err := b.table(s.Table, cond)
			if err != nil {
				return err
			}
			b.out = append(b.out, u)
		case RMW:
			b.flush()
			u := b.newUnit(fmt.Sprintf("register %s of %d×%d b", s.Reg.Name, s.Reg.Size, s.Reg.Width), cond)
			if err := b.stmt(u, s); err != nil {
				return err
			}
			b.finish(u)
			b.out = append(b.out, u)
		default:
			u := b.newUnit("", cond)
			if err := b.stmt(u, s); err != nil {
				return err
			}
			// A run is flushed at every If, so all its statements run
			// under one condition; it ends where a statement depends on it.
			if b.run != nil && (overlaps(u.reads, b.run.writes) || overlaps(u.writes, b.run.writes)) {
				b.flush()
			}
			if b.run == nil {
				b.run = b.newUnit("", cond)
				b.run.what = "the statements " + describe(s)
				if b.owner != "" {
					b.run.what = b.owner + "'s statements " + describe(s)
				}
			}
			merge(b.run, u)
		}
	}
	return nil
}

func describe(s Stmt) string {
	switch s := s.(type) {
	case Assign:
		return "from the assignment to " + s.Dst.Path
	case Hash:
		return "from the hash into " + s.Dst.Path
	case Random:
		return "from the random into " + s.Dst.Path
	case Count:
		return "from the count in " + s.Counter.Name
	case Call:
		return "from the call of " + s.Action.Name
	case Digest:
		return "from the digest " + s.Type.Name
	}
	return fmt.Sprintf("from a %T", s)
}

func merge(dst, src *unit) {
	maps.Copy(dst.reads, src.reads)
	maps.Copy(dst.writes, src.writes)
	dst.sram += src.sram
	dst.tcam += src.tcam
	dst.alus += src.alus
	dst.ops += src.ops
	for _, r := range src.regs {
		if !slices.Contains(dst.regs, r) {
			dst.regs = append(dst.regs, r)
		}
	}
}

// stmt adds what s reads, writes and takes to u (an action's statement,
// or a register access).
func (b *unitBuilder) stmt(u *unit, s Stmt) error {
	w := func(r Ref) {
		if strings.Contains(r.Path, ".") {
			u.writes[r.Path] = true
		}
	}
	switch s := s.(type) {
	case Assign:
		reads(s.X, u.reads)
		w(s.Dst)
	case Hash:
		for _, x := range s.Data {
			reads(x, u.reads)
		}
		w(s.Dst)
	case Random:
		w(s.Dst)
	case RMW:
		alus, ok := b.a.prof.RegisterWidth(s.Reg.Width)
		if !ok {
			return fmt.Errorf("register %s is %d bits wide; this switch has registers of %s bits", s.Reg.Name, s.Reg.Width, widths(b.a.prof))
		}
		reads(s.Index, u.reads)
		reads(s.New, u.reads)
		if s.Cond != nil {
			reads(s.Cond, u.reads)
		}
		for _, r := range []*Ref{s.OldTo, s.NewTo} {
			if r != nil {
				w(*r)
			}
		}
		if !slices.Contains(u.regs, s.Reg) {
			u.regs = append(u.regs, s.Reg)
			u.alus += alus
			u.sram += b.a.blocks(s.Reg.Size, s.Reg.Width)
		}
		u.ops++
	case Count:
		reads(s.Index, u.reads)
		u.reads["standard_metadata.packet_length"] = true
		bits := 64
		if s.Counter.Type == PacketsAndBytes {
			bits = 128
		}
		u.sram += b.a.blocks(s.Counter.Size, bits)
	case Digest:
		for _, x := range s.Values {
			reads(x, u.reads)
		}
	case Call:
		for _, x := range s.Args {
			reads(x, u.reads)
		}
		for _, t := range s.Action.Body {
			if err := b.stmt(u, t); err != nil {
				return err
			}
		}
	case SetValid:
		u.writes["valid:"+s.Header] = true
		if h := b.prog.Header(s.Header); h != nil {
			for _, f := range h.Type.Fields {
				u.writes["hdr."+s.Header+"."+f.Name] = true
			}
		}
	case MarkToDrop:
		u.writes["standard_metadata.egress_spec"] = true
	case Clone:
	default:
		return fmt.Errorf("cannot allocate a %T in an action", s)
	}
	return nil
}

// table makes the unit of a table's apply: its key's memory, its action
// data, and what its actions touch.
func (b *unitBuilder) table(t *Table, cond map[string]bool) (*unit, error) {
	u := b.newUnit("", cond)
	keyBits, ternary := 0, false
	for _, k := range t.Keys {
		reads(k.X, u.reads)
		bits := k.X.Type().Bits
		if bits == 0 {
			bits = 1
		}
		keyBits += bits
		ternary = ternary || k.Match != Exact
	}
	paramBits := 0
	for _, act := range append(slices.Clone(t.Actions), t.Default) {
		n := 0
		for _, f := range act.Params {
			n += f.Bits
		}
		paramBits = max(paramBits, n)
		for _, s := range act.Body {
			if err := b.stmt(u, s); err != nil {
				return nil, fmt.Errorf("table %s: %v", t.Name, err)
			}
		}
	}
	idBits := 0
	for 1<<idBits < len(t.Actions) {
		idBits++
	}
	kind := "exact"
	switch {
	case len(t.Keys) == 0:
		kind = "keyless"
	case ternary:
		kind = "ternary"
		p := &b.a.prof
		u.tcam += ((keyBits + p.TCAMWidth - 1) / p.TCAMWidth) * ((t.Size + p.TCAMDepth - 1) / p.TCAMDepth)
		u.sram += b.a.blocks(t.Size, paramBits+idBits)
	default:
		u.sram += b.a.blocks(t.Size, keyBits+paramBits+idBits)
	}
	u.what = fmt.Sprintf("table %s (%d entries, %d-bit %s key)", t.Name, t.Size, keyBits, kind)
	if kind == "keyless" {
		u.what = "table " + t.Name
	}
	b.finish(u)
	return u, nil
}

// reads adds the fields x reads to m: header fields, metadata, standard
// metadata, and "valid:h" for a header's validity; an action's
// parameters and a register's old value are not fields.
func reads(x Expr, m map[string]bool) {
	switch x := x.(type) {
	case Ref:
		if strings.Contains(x.Path, ".") {
			m[x.Path] = true
		}
	case Valid:
		m["valid:"+x.Header] = true
	case Unary:
		reads(x.X, m)
	case Binary:
		reads(x.L, m)
		reads(x.R, m)
	case Cast:
		reads(x.X, m)
	case Slice:
		reads(x.X, m)
	case Mux:
		reads(x.Cond, m)
		reads(x.Then, m)
		reads(x.Else, m)
	}
}

func overlaps(a, b map[string]bool) bool {
	for k := range a {
		if b[k] {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]bool) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func widths(p Profile) string {
	var ws []string
	for _, w := range p.Registers {
		ws = append(ws, fmt.Sprint(w))
	}
	if p.PairedWidth != 0 {
		ws = append(ws, fmt.Sprintf("%d (as a pair)", p.PairedWidth))
	}
	return strings.Join(ws, ", ")
}

// StageOf returns the stage of the ingress (or egress) pipeline that
// holds register r, if it is allocated.
func (a *Allocator) StageOf(r *Register) (gress string, stage int, ok bool) {
	for _, g := range a.gress {
		if s, ok := g.regs[r]; ok {
			return g.name, s, true
		}
	}
	return "", 0, false
}

// Report is the resources an allocation takes, in the shape of MAFIA's
// Table IV: pipeline depth (the stages used), width (the most logical
// tables in one stage) and stateful operations (register accesses), with
// what each stage holds.
type Report struct {
	Profile     Profile    `json:"profile"`
	Depth       int        `json:"depth"`        // ingress stages used
	EgressDepth int        `json:"egress_depth"` // egress stages used
	Width       int        `json:"width"`        // most logical tables in one stage
	Stateful    int        `json:"stateful_ops"` // register accesses (RMW statements)
	ALUs        int        `json:"stateful_alus"`
	SRAM        int        `json:"sram_blocks"`
	TCAM        int        `json:"tcam_blocks"`
	Tables      int        `json:"tables"`
	Ingress     []StageUse `json:"ingress"`
	Egress      []StageUse `json:"egress"`
	Functions   []string   `json:"functions,omitempty"` // in the order offered
}

// Report returns what the allocation takes.
func (a *Allocator) Report() Report {
	r := Report{Profile: a.prof, Stateful: a.ops, Functions: slices.Clone(a.owners)}
	for i, g := range a.gress {
		used := 0
		for _, st := range g.stages {
			if st.Tables > 0 {
				used = st.Stage + 1
			}
			r.Width = max(r.Width, st.Tables)
			r.ALUs += st.ALUs
			r.SRAM += st.SRAM
			r.TCAM += st.TCAM
			r.Tables += st.Tables
		}
		stages := slices.Clone(g.stages[:used])
		for j := range stages {
			stages[j].Units = slices.Clone(stages[j].Units)
		}
		if i == 0 {
			r.Depth, r.Ingress = used, stages
		} else {
			r.EgressDepth, r.Egress = used, stages
		}
	}
	return r
}

// String prints the report as a table, a line per stage used.
func (r Report) String() string {
	var sb strings.Builder
	p := r.Profile
	fmt.Fprintf(&sb, "pipeline depth %d of %d stages (egress %d), width %d logical tables, %d stateful operations on %d stateful ALUs\n",
		r.Depth, p.Stages, r.EgressDepth, r.Width, r.Stateful, r.ALUs)
	fmt.Fprintf(&sb, "%-8s %5s %11s %11s %9s %8s  %s\n", "stage", "", "SRAM", "TCAM", "ALUs", "tables", "units")
	for i, stages := range [][]StageUse{r.Ingress, r.Egress} {
		for _, st := range stages {
			fmt.Fprintf(&sb, "%-8s %5d %5d of %3d %5d of %3d %3d of %2d %3d of %2d  %s\n", []string{"ingress", "egress"}[i], st.Stage,
				st.SRAM, p.SRAMBlocks, st.TCAM, p.TCAMBlocks, st.ALUs, p.ALUs, st.Tables, p.Tables, strings.Join(st.Units, "; "))
		}
	}
	fmt.Fprintf(&sb, "total: %d SRAM blocks of %d×%d b, %d TCAM blocks of %d×%d b, %d logical tables\n",
		r.SRAM, p.SRAMDepth, p.SRAMWidth, r.TCAM, p.TCAMDepth, p.TCAMWidth, r.Tables)
	return sb.String()
}
