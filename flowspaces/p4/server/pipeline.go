package server

import (
	"fmt"
	"strings"

	p4cfg "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4 "github.com/p4lang/p4runtime/go/p4/v1"

	"github.com/ffpf-go/ffpf/flowspaces/p4/pisa"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// pipeline is a forwarding pipeline config made ready: the program from
// the device config, the model that runs it, and the P4Info's entities
// by id, each mapped by name to the program's object.
type pipeline struct {
	cfgP4Info []byte // the P4Info as received (for Get)
	p4info    *p4cfg.P4Info
	devConfig []byte
	cookie    uint64
	hasCookie bool

	prog     *p4gen.Program
	model    *pisa.Model
	tables   map[uint32]*tableInfo
	actions  map[uint32]*actionInfo
	regs     map[uint32]*regInfo
	ctrs     map[uint32]*ctrInfo
	digests  map[uint32]*digestInfo
	digestOf map[*p4gen.DigestType]*digestInfo
	pktIn    []metaInfo // PacketIn metadata, in the header's order
	pktOut   []metaInfo

	// The control plane's view of each table: entries as written (for
	// reads), and whether the default action was changed.
	entries map[*tableInfo][]*stored
	// The digests enabled (DigestEntry), by id: the digester's lock
	// guards it.
	dcfg map[uint32]*p4.DigestEntry_Config
}

type tableInfo struct {
	id           uint32
	name         string
	t            *p4gen.Table
	fields       []fieldInfo // in key order
	byID         map[uint32]int
	actions      map[uint32]*actionInfo
	scope        map[uint32]p4cfg.ActionRef_Scope
	size         int
	prio         bool // a ternary or range key: entries need a priority
	isConst      bool
	constDefault bool
	defaultSet   bool // the default entry was modified
}

type fieldInfo struct {
	id   uint32
	bits int
	kind p4gen.MatchKind
}

type actionInfo struct {
	id     uint32
	name   string
	a      *p4gen.Action
	params []fieldInfo // id and bits per parameter, in order
}

type regInfo struct {
	id uint32
	r  *p4gen.Register
}

type ctrInfo struct {
	id uint32
	c  *p4gen.Counter
}

type digestInfo struct {
	id uint32
	d  *p4gen.DigestType
}

type metaInfo struct {
	id   uint32
	bits int
}

// stored is a table entry as the controller wrote it, and as the model
// runs it.
type stored struct {
	key    string // canonical match and priority
	entry  p4gen.Entry
	cookie uint64
	meta   []byte
}

// control blocks: a P4Info name is the IR's name qualified by the
// control that declares it, as p4c writes it.
var controls = []string{"ffpf_ingress.", "ffpf_egress."}

// named reports whether P4Info name p names the IR object called ir.
func named(p, ir string) bool {
	if p == ir {
		return true
	}
	for _, c := range controls {
		if p == c+ir {
			return true
		}
	}
	return false
}

func bitwidthOf(ts *p4cfg.P4DataTypeSpec) (int, bool) {
	if b := ts.GetBitstring().GetBit(); b != nil {
		return int(b.GetBitwidth()), true
	}
	return 0, false
}

// newPipeline checks a config and builds what serving it takes: the
// device config must be a program the model runs and fits the switch,
// and the P4Info must describe exactly its tables, actions, registers,
// counters, digests and controller headers. Errors are the reasons a
// client reads (INVALID_ARGUMENT).
func newPipeline(info *p4cfg.P4Info, devConfig []byte, prof p4gen.Profile) (*pipeline, error) {
	if info == nil {
		return nil, fmt.Errorf("the config has no P4Info")
	}
	if len(devConfig) == 0 {
		return nil, fmt.Errorf("the config has no p4_device_config (the program as %s JSON)", p4gen.JSONFormat)
	}
	prog, err := p4gen.DecodeJSON(devConfig)
	if err != nil {
		return nil, err
	}
	model, err := pisa.Load(prog, prof)
	if err != nil {
		return nil, err
	}
	pl := &pipeline{p4info: info, devConfig: devConfig, prog: prog, model: model,
		tables: map[uint32]*tableInfo{}, actions: map[uint32]*actionInfo{}, regs: map[uint32]*regInfo{},
		ctrs: map[uint32]*ctrInfo{}, digests: map[uint32]*digestInfo{}, digestOf: map[*p4gen.DigestType]*digestInfo{},
		entries: map[*tableInfo][]*stored{}, dcfg: map[uint32]*p4.DigestEntry_Config{}}
	ids := map[uint32]string{}
	claim := func(id uint32, name string) error {
		if id == 0 {
			return fmt.Errorf("P4Info entity %s has id 0", name)
		}
		if other, ok := ids[id]; ok {
			return fmt.Errorf("P4Info entities %s and %s share id %#x", other, name, id)
		}
		ids[id] = name
		return nil
	}
	byAction := map[*p4gen.Action]bool{}
	for _, a := range info.GetActions() {
		name := a.GetPreamble().GetName()
		if err := claim(a.GetPreamble().GetId(), name); err != nil {
			return nil, err
		}
		var ir *p4gen.Action
		for _, x := range prog.Actions {
			if named(name, x.Name) {
				ir = x
			}
		}
		if ir == nil {
			return nil, fmt.Errorf("P4Info action %s is not in the program", name)
		}
		if len(a.GetParams()) != len(ir.Params) {
			return nil, fmt.Errorf("P4Info action %s has %d parameters, the program's %d", name, len(a.GetParams()), len(ir.Params))
		}
		ai := &actionInfo{id: a.GetPreamble().GetId(), name: name, a: ir}
		for i, p := range a.GetParams() {
			if int(p.GetBitwidth()) != ir.Params[i].Bits || p.GetName() != ir.Params[i].Name {
				return nil, fmt.Errorf("P4Info action %s: parameter %s of %d bits is the program's %s of %d bits",
					name, p.GetName(), p.GetBitwidth(), ir.Params[i].Name, ir.Params[i].Bits)
			}
			ai.params = append(ai.params, fieldInfo{id: p.GetId(), bits: int(p.GetBitwidth())})
		}
		pl.actions[ai.id] = ai
		byAction[ir] = true
	}
	seen := map[any]bool{}
	for _, t := range info.GetTables() {
		name := t.GetPreamble().GetName()
		if err := claim(t.GetPreamble().GetId(), name); err != nil {
			return nil, err
		}
		var ir *p4gen.Table
		for _, x := range prog.Tables {
			if named(name, x.Name) {
				ir = x
			}
		}
		if ir == nil {
			return nil, fmt.Errorf("P4Info table %s is not in the program", name)
		}
		seen[ir] = true
		ti := &tableInfo{id: t.GetPreamble().GetId(), name: name, t: ir, byID: map[uint32]int{},
			actions: map[uint32]*actionInfo{}, scope: map[uint32]p4cfg.ActionRef_Scope{}, size: int(t.GetSize()),
			isConst: t.GetIsConstTable() || ir.Const, constDefault: t.GetConstDefaultActionId() != 0}
		if len(t.GetMatchFields()) != len(ir.Keys) {
			return nil, fmt.Errorf("P4Info table %s has %d match fields, the program's %d keys", name, len(t.GetMatchFields()), len(ir.Keys))
		}
		for i, f := range t.GetMatchFields() {
			k := ir.Keys[i]
			bits := max(k.X.Type().Bits, 1)
			kinds := map[p4cfg.MatchField_MatchType]p4gen.MatchKind{p4cfg.MatchField_EXACT: p4gen.Exact,
				p4cfg.MatchField_TERNARY: p4gen.Ternary, p4cfg.MatchField_LPM: p4gen.LPM, p4cfg.MatchField_RANGE: p4gen.Range}
			if int(f.GetBitwidth()) != bits || kinds[f.GetMatchType()] != k.Match {
				return nil, fmt.Errorf("P4Info table %s: match field %s is %d bits %v, the program's key %d is %d bits %v",
					name, f.GetName(), f.GetBitwidth(), f.GetMatchType(), i, bits, k.Match)
			}
			if _, dup := ti.byID[f.GetId()]; dup || f.GetId() == 0 {
				return nil, fmt.Errorf("P4Info table %s: match field id %d is 0 or given twice", name, f.GetId())
			}
			ti.byID[f.GetId()] = i
			ti.fields = append(ti.fields, fieldInfo{id: f.GetId(), bits: bits, kind: k.Match})
			ti.prio = ti.prio || k.Match == p4gen.Ternary || k.Match == p4gen.Range
		}
		for _, ref := range t.GetActionRefs() {
			ai := pl.actions[ref.GetId()]
			if ai == nil {
				return nil, fmt.Errorf("P4Info table %s refers to action id %#x, not in the P4Info", name, ref.GetId())
			}
			ok := ai.a == ir.Default
			for _, a := range ir.Actions {
				ok = ok || a == ai.a
			}
			if !ok {
				return nil, fmt.Errorf("P4Info table %s refers to action %s, not one of the program's table's", name, ai.name)
			}
			ti.actions[ai.id] = ai
			ti.scope[ai.id] = ref.GetScope()
		}
		for _, a := range ir.Actions {
			found := false
			for _, ai := range ti.actions {
				found = found || ai.a == a
			}
			if !found {
				return nil, fmt.Errorf("P4Info table %s lacks the program's action %s", name, a.Name)
			}
		}
		if ti.size <= 0 {
			ti.size = ir.Size
		}
		pl.tables[ti.id] = ti
	}
	for _, r := range info.GetRegisters() {
		name := r.GetPreamble().GetName()
		if err := claim(r.GetPreamble().GetId(), name); err != nil {
			return nil, err
		}
		var ir *p4gen.Register
		for _, x := range prog.Registers {
			if named(name, x.Name) {
				ir = x
			}
		}
		if ir == nil {
			return nil, fmt.Errorf("P4Info register %s is not in the program", name)
		}
		w, ok := bitwidthOf(r.GetTypeSpec())
		if int(r.GetSize()) != ir.Size || !ok || w != ir.Width {
			return nil, fmt.Errorf("P4Info register %s has %d cells of %d bits, the program's %d of %d", name, r.GetSize(), w, ir.Size, ir.Width)
		}
		seen[ir] = true
		pl.regs[r.GetPreamble().GetId()] = &regInfo{id: r.GetPreamble().GetId(), r: ir}
	}
	for _, c := range info.GetCounters() {
		name := c.GetPreamble().GetName()
		if err := claim(c.GetPreamble().GetId(), name); err != nil {
			return nil, err
		}
		var ir *p4gen.Counter
		for _, x := range prog.Counters {
			if named(name, x.Name) {
				ir = x
			}
		}
		if ir == nil {
			return nil, fmt.Errorf("P4Info counter %s is not in the program", name)
		}
		units := map[p4gen.CounterType]p4cfg.CounterSpec_Unit{p4gen.Packets: p4cfg.CounterSpec_PACKETS,
			p4gen.Bytes: p4cfg.CounterSpec_BYTES, p4gen.PacketsAndBytes: p4cfg.CounterSpec_BOTH}
		if int(c.GetSize()) != ir.Size || c.GetSpec().GetUnit() != units[ir.Type] {
			return nil, fmt.Errorf("P4Info counter %s has %d cells of %v, the program's %d of %v", name, c.GetSize(), c.GetSpec().GetUnit(), ir.Size, units[ir.Type])
		}
		seen[ir] = true
		pl.ctrs[c.GetPreamble().GetId()] = &ctrInfo{id: c.GetPreamble().GetId(), c: ir}
	}
	for _, d := range info.GetDigests() {
		name := d.GetPreamble().GetName()
		if err := claim(d.GetPreamble().GetId(), name); err != nil {
			return nil, err
		}
		var ir *p4gen.DigestType
		for _, x := range prog.Digests {
			if name == x.Name || name == x.Name+"_t" || strings.TrimSuffix(x.Name, "_t") == name {
				ir = x
			}
		}
		if ir == nil {
			return nil, fmt.Errorf("P4Info digest %s is not in the program", name)
		}
		if st := d.GetTypeSpec().GetStruct(); st != nil {
			if spec, ok := info.GetTypeInfo().GetStructs()[st.GetName()]; ok {
				if len(spec.GetMembers()) != len(ir.Fields) {
					return nil, fmt.Errorf("P4Info digest %s has %d fields, the program's %d", name, len(spec.GetMembers()), len(ir.Fields))
				}
				for i, m := range spec.GetMembers() {
					if w, ok := bitwidthOf(m.GetTypeSpec()); !ok || w != ir.Fields[i].Bits {
						return nil, fmt.Errorf("P4Info digest %s: field %s is not bit<%d>", name, m.GetName(), ir.Fields[i].Bits)
					}
				}
			}
		}
		seen[ir] = true
		di := &digestInfo{id: d.GetPreamble().GetId(), d: ir}
		pl.digests[di.id] = di
		pl.digestOf[ir] = di
	}
	for _, t := range prog.Tables {
		if !seen[t] {
			return nil, fmt.Errorf("the P4Info lacks the program's table %s", t.Name)
		}
	}
	for _, r := range prog.Registers {
		if !seen[r] {
			return nil, fmt.Errorf("the P4Info lacks the program's register %s", r.Name)
		}
	}
	for _, c := range prog.Counters {
		if !seen[c] {
			return nil, fmt.Errorf("the P4Info lacks the program's counter %s", c.Name)
		}
	}
	for _, d := range prog.Digests {
		if !seen[d] {
			return nil, fmt.Errorf("the P4Info lacks the program's digest %s", d.Name)
		}
	}
	for _, cpm := range info.GetControllerPacketMetadata() {
		name := cpm.GetPreamble().GetName()
		if err := claim(cpm.GetPreamble().GetId(), name); err != nil {
			return nil, err
		}
		var ht *p4gen.HeaderType
		for _, h := range prog.HeaderTypes {
			if h.Controller == name {
				ht = h
			}
		}
		if ht == nil || (name != p4gen.ControllerPacketIn && name != p4gen.ControllerPacketOut) {
			return nil, fmt.Errorf("P4Info controller packet metadata %s is no controller header of the program", name)
		}
		if len(cpm.GetMetadata()) != len(ht.Fields) {
			return nil, fmt.Errorf("P4Info %s has %d metadata, the program's header %s %d fields", name, len(cpm.GetMetadata()), ht.Name, len(ht.Fields))
		}
		var ms []metaInfo
		total := 0
		for i, md := range cpm.GetMetadata() {
			if int(md.GetBitwidth()) != ht.Fields[i].Bits {
				return nil, fmt.Errorf("P4Info %s: metadata %s is %d bits, the program's %d", name, md.GetName(), md.GetBitwidth(), ht.Fields[i].Bits)
			}
			ms = append(ms, metaInfo{id: md.GetId(), bits: int(md.GetBitwidth())})
			total += int(md.GetBitwidth())
		}
		if total%8 != 0 {
			return nil, fmt.Errorf("P4Info %s: its metadata take %d bits, not whole bytes", name, total)
		}
		if name == p4gen.ControllerPacketIn {
			pl.pktIn = ms
		} else {
			pl.pktOut = ms
		}
	}
	return pl, nil
}

// carry moves the forwarding state of old into pl (RECONCILE_AND_COMMIT):
// table entries and default actions by table and action name, register
// and counter cells by name, clone sessions; an entry or a cell that has
// no place in the new program is an error.
func (pl *pipeline) carry(old *pipeline, oldModel *pisa.Model) error {
	for _, ot := range old.tables {
		var nt *tableInfo
		for _, t := range pl.tables {
			if t.t.Name == ot.t.Name {
				nt = t
			}
		}
		es := old.entries[ot]
		if nt == nil {
			if len(es) > 0 || ot.defaultSet {
				return fmt.Errorf("table %s has entries and is not in the new program", ot.t.Name)
			}
			continue
		}
		if len(nt.fields) != len(ot.fields) {
			return fmt.Errorf("table %s has another key in the new program", ot.t.Name)
		}
		for i := range nt.fields {
			if nt.fields[i].bits != ot.fields[i].bits || nt.fields[i].kind != ot.fields[i].kind {
				return fmt.Errorf("table %s has another key in the new program", ot.t.Name)
			}
		}
		remap := func(a *p4gen.Action) (*p4gen.Action, error) {
			for _, ai := range nt.actions {
				if ai.a.Name == a.Name && len(ai.a.Params) == len(a.Params) {
					return ai.a, nil
				}
			}
			if nt.t.Default.Name == a.Name {
				return nt.t.Default, nil
			}
			return nil, fmt.Errorf("table %s: action %s is not in the new program", ot.t.Name, a.Name)
		}
		var moved []*stored
		for _, s := range es {
			a, err := remap(s.entry.Action)
			if err != nil {
				return err
			}
			n := *s
			n.entry.Action = a
			moved = append(moved, &n)
		}
		pl.entries[nt] = moved
		if err := pl.install(nt); err != nil {
			return err
		}
		if ot.defaultSet {
			a, args := oldModel.Default(ot.t)
			na, err := remap(a)
			if err != nil {
				return err
			}
			if err := pl.model.SetDefault(nt.t, na, args); err != nil {
				return err
			}
			nt.defaultSet = true
		}
	}
	for _, or := range old.prog.Registers {
		nr := pl.prog.Register(or.Name)
		if nr == nil || nr.Size != or.Size || nr.Width != or.Width {
			return fmt.Errorf("register %s is not in the new program as it was", or.Name)
		}
		copy(pl.model.Register(nr), oldModel.Register(or))
	}
	for _, oc := range old.prog.Counters {
		var nc *p4gen.Counter
		for _, c := range pl.prog.Counters {
			if c.Name == oc.Name && c.Size == oc.Size {
				nc = c
			}
		}
		if nc == nil {
			return fmt.Errorf("counter %s is not in the new program as it was", oc.Name)
		}
		copy(pl.model.Counter(nc), oldModel.Counter(oc))
	}
	for id, c := range old.dcfg {
		for nid, nd := range pl.digests {
			if nd.d.Name == old.digests[id].d.Name {
				pl.dcfg[nid] = c
			}
		}
	}
	for id, port := range oldModel.Sessions() {
		pl.model.SetSession(id, int(port))
	}
	return nil
}

// install gives the model table t's entries as stored.
func (pl *pipeline) install(t *tableInfo) error {
	es := make([]p4gen.Entry, 0, len(pl.entries[t]))
	for _, s := range pl.entries[t] {
		es = append(es, s.entry)
	}
	return pl.model.SetEntries(t.t, es)
}
