package server

import (
	"context"
	"fmt"
	"slices"
	"strings"

	p4cfg "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ffpf-go/ffpf/flowspaces/p4/pisa"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// Write applies a batch of updates, each on its own (CONTINUE_ON_ERROR).
func (s *Server) Write(_ context.Context, r *p4.WriteRequest) (*p4.WriteResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkWriter(r.GetDeviceId(), r.GetRole(), r.GetElectionId()); err != nil {
		return nil, err
	}
	pl := s.current()
	if pl == nil {
		return nil, status.Error(codes.FailedPrecondition, "no forwarding pipeline config is set")
	}
	if r.GetAtomicity() != p4.WriteRequest_CONTINUE_ON_ERROR {
		return nil, status.Errorf(codes.Unimplemented, "atomicity %v is not served (CONTINUE_ON_ERROR is)", r.GetAtomicity())
	}
	errs := make([]error, len(r.GetUpdates()))
	for i, u := range r.GetUpdates() {
		errs[i] = s.update(pl, u)
	}
	if err := batchError("write", errs); err != nil {
		return nil, err
	}
	return &p4.WriteResponse{}, nil
}

func (s *Server) update(pl *pipeline, u *p4.Update) (err error) {
	defer func() {
		// A bug here must cost one update, not the switch.
		if r := recover(); r != nil {
			err = status.Errorf(codes.Internal, "the update failed: %v", r)
		}
	}()
	t := u.GetType()
	if t != p4.Update_INSERT && t != p4.Update_MODIFY && t != p4.Update_DELETE {
		return status.Errorf(codes.InvalidArgument, "update type %v is not INSERT, MODIFY or DELETE", t)
	}
	switch e := u.GetEntity().GetEntity().(type) {
	case *p4.Entity_TableEntry:
		return s.writeTable(pl, t, e.TableEntry)
	case *p4.Entity_CounterEntry:
		return s.writeCounter(pl, t, e.CounterEntry)
	case *p4.Entity_RegisterEntry:
		return s.writeRegister(pl, t, e.RegisterEntry)
	case *p4.Entity_DigestEntry:
		return s.dig.configure(pl, t, e.DigestEntry)
	case *p4.Entity_PacketReplicationEngineEntry:
		return s.writePRE(pl, t, e.PacketReplicationEngineEntry)
	case nil:
		return status.Error(codes.InvalidArgument, "the update has no entity")
	default:
		return status.Errorf(codes.Unimplemented, "entity %T is not served", e)
	}
}

// index checks a counter or register index: negative is INVALID_ARGUMENT,
// past the end OUT_OF_RANGE; unset (-1) means every cell.
func index(ix *p4.Index, size int, what string) (int, error) {
	if ix == nil {
		return -1, nil
	}
	i := ix.GetIndex()
	if i < 0 {
		return 0, status.Errorf(codes.InvalidArgument, "%s: index %d is negative", what, i)
	}
	if i >= int64(size) {
		return 0, status.Errorf(codes.OutOfRange, "%s: index %d is past its %d cells", what, i, size)
	}
	return int(i), nil
}

func (s *Server) writeCounter(pl *pipeline, t p4.Update_Type, e *p4.CounterEntry) error {
	ci := pl.ctrs[e.GetCounterId()]
	if ci == nil {
		return status.Errorf(codes.NotFound, "no counter id %#x", e.GetCounterId())
	}
	if t != p4.Update_MODIFY {
		return status.Errorf(codes.InvalidArgument, "counter %s: a counter entry is only modified", ci.c.Name)
	}
	i, err := index(e.GetIndex(), ci.c.Size, "counter "+ci.c.Name)
	if err != nil {
		return err
	}
	d := e.GetData()
	if d == nil {
		return nil
	}
	if d.GetPacketCount() < 0 || d.GetByteCount() < 0 {
		return status.Errorf(codes.InvalidArgument, "counter %s: a negative count", ci.c.Name)
	}
	return s.on(pl, func(m *pisa.Model) error {
		cells := m.Counter(ci.c)
		for j := range cells {
			if i < 0 || i == j {
				cells[j] = p4gen.CounterCell{Packets: uint64(d.GetPacketCount()), Bytes: uint64(d.GetByteCount())}
			}
		}
		return nil
	})
}

func (s *Server) writeRegister(pl *pipeline, t p4.Update_Type, e *p4.RegisterEntry) error {
	ri := pl.regs[e.GetRegisterId()]
	if ri == nil {
		return status.Errorf(codes.NotFound, "no register id %#x", e.GetRegisterId())
	}
	if t != p4.Update_MODIFY {
		return status.Errorf(codes.InvalidArgument, "register %s: a register entry is only modified", ri.r.Name)
	}
	i, err := index(e.GetIndex(), ri.r.Size, "register "+ri.r.Name)
	if err != nil {
		return err
	}
	bs, ok := e.GetData().GetData().(*p4.P4Data_Bitstring)
	if !ok {
		return status.Errorf(codes.InvalidArgument, "register %s: the data must be a bitstring of %d bits", ri.r.Name, ri.r.Width)
	}
	v, err := value(bs.Bitstring, ri.r.Width, "register "+ri.r.Name+"'s value")
	if err != nil {
		return err
	}
	return s.on(pl, func(m *pisa.Model) error {
		cells := m.Register(ri.r)
		for j := range cells {
			if i < 0 || i == j {
				cells[j] = v
			}
		}
		return nil
	})
}

// sdnCPU is the SDN port number of the CPU port (P4Runtime's
// translation of port numbers).
const sdnCPU = 0xfffffffd

func (s *Server) writePRE(pl *pipeline, t p4.Update_Type, e *p4.PacketReplicationEngineEntry) error {
	cs := e.GetCloneSessionEntry()
	if cs == nil {
		return status.Error(codes.Unimplemented, "multicast groups are not served; clone sessions are")
	}
	id := cs.GetSessionId()
	if id == 0 {
		return status.Error(codes.InvalidArgument, "clone session id 0 is reserved for wildcard reads")
	}
	var exists bool
	_ = s.on(pl, func(m *pisa.Model) error {
		_, exists = m.Sessions()[id]
		return nil
	})
	if t == p4.Update_DELETE {
		if !exists {
			return status.Errorf(codes.NotFound, "no clone session %d", id)
		}
		return s.on(pl, func(m *pisa.Model) error { m.SetSession(id, -1); return nil })
	}
	if t == p4.Update_INSERT && exists {
		return status.Errorf(codes.AlreadyExists, "clone session %d exists", id)
	}
	if t == p4.Update_MODIFY && !exists {
		return status.Errorf(codes.NotFound, "no clone session %d", id)
	}
	if len(cs.GetReplicas()) != 1 {
		return status.Errorf(codes.InvalidArgument, "clone session %d: the switch clones to one port, not %d", id, len(cs.GetReplicas()))
	}
	rep := cs.GetReplicas()[0]
	var port uint64
	switch pk := rep.GetPortKind().(type) {
	case *p4.Replica_EgressPort:
		port = uint64(pk.EgressPort)
	case *p4.Replica_Port:
		v, err := value(pk.Port, 32, "the replica's port")
		if err != nil {
			return err
		}
		port = v
	default:
		return status.Errorf(codes.InvalidArgument, "clone session %d: the replica has no port", id)
	}
	if port == sdnCPU {
		port = uint64(s.dev.CPUPort())
	}
	if port >= p4gen.DropPort {
		return status.Errorf(codes.OutOfRange, "clone session %d: port %d is not a port of the switch (9 bits, 511 drops)", id, port)
	}
	return s.on(pl, func(m *pisa.Model) error { m.SetSession(id, int(port)); return nil })
}

// match turns a TableEntry's matches into the IR's, checking them as the
// spec's Match Format says; it also returns the canonical key.
func (ti *tableInfo) match(e *p4.TableEntry) ([]p4gen.Match, string, error) {
	ms := make([]p4gen.Match, len(ti.fields))
	given := make([]bool, len(ti.fields))
	for _, fm := range e.GetMatch() {
		i, ok := ti.byID[fm.GetFieldId()]
		if !ok {
			return nil, "", status.Errorf(codes.InvalidArgument, "table %s has no match field id %d", ti.name, fm.GetFieldId())
		}
		if given[i] {
			return nil, "", status.Errorf(codes.InvalidArgument, "table %s: match field id %d is given twice", ti.name, fm.GetFieldId())
		}
		given[i] = true
		f := ti.fields[i]
		what := fmt.Sprintf("table %s, match field %d", ti.name, f.id)
		var m p4gen.Match
		switch x := fm.GetFieldMatchType().(type) {
		case *p4.FieldMatch_Exact_:
			if f.kind != p4gen.Exact {
				return nil, "", status.Errorf(codes.InvalidArgument, "%s is %v, given exact", what, f.kind)
			}
			v, err := value(x.Exact.GetValue(), f.bits, what)
			if err != nil {
				return nil, "", err
			}
			m.Value = v
		case *p4.FieldMatch_Ternary_:
			if f.kind != p4gen.Ternary {
				return nil, "", status.Errorf(codes.InvalidArgument, "%s is %v, given ternary", what, f.kind)
			}
			v, err := value(x.Ternary.GetValue(), f.bits, what)
			if err != nil {
				return nil, "", err
			}
			mask, err := value(x.Ternary.GetMask(), f.bits, what+"'s mask")
			if err != nil {
				return nil, "", err
			}
			if mask == 0 {
				return nil, "", status.Errorf(codes.InvalidArgument, "%s: a mask of zeros is a don't-care: omit the field", what)
			}
			if v&^mask != 0 {
				return nil, "", status.Errorf(codes.InvalidArgument, "%s: value %#x has bits outside mask %#x", what, v, mask)
			}
			m.Value, m.Mask = v, mask
		case *p4.FieldMatch_Lpm:
			if f.kind != p4gen.LPM {
				return nil, "", status.Errorf(codes.InvalidArgument, "%s is %v, given lpm", what, f.kind)
			}
			v, err := value(x.Lpm.GetValue(), f.bits, what)
			if err != nil {
				return nil, "", err
			}
			pl := int(x.Lpm.GetPrefixLen())
			if pl <= 0 || pl > f.bits {
				return nil, "", status.Errorf(codes.InvalidArgument, "%s: prefix length %d is not in 1 to %d (a don't-care is omitted)", what, pl, f.bits)
			}
			if pl < f.bits && v&(1<<uint(f.bits-pl)-1) != 0 {
				return nil, "", status.Errorf(codes.InvalidArgument, "%s: value %#x has bits past its /%d prefix", what, v, pl)
			}
			m.Value, m.PrefixLen = v, pl
		case *p4.FieldMatch_Range_:
			if f.kind != p4gen.Range {
				return nil, "", status.Errorf(codes.InvalidArgument, "%s is %v, given range", what, f.kind)
			}
			lo, err := value(x.Range.GetLow(), f.bits, what+"'s low")
			if err != nil {
				return nil, "", err
			}
			hi, err := value(x.Range.GetHigh(), f.bits, what+"'s high")
			if err != nil {
				return nil, "", err
			}
			if lo > hi {
				return nil, "", status.Errorf(codes.InvalidArgument, "%s: low %d is above high %d", what, lo, hi)
			}
			if lo == 0 && hi == p4gen.Bit(f.bits).Mask() {
				return nil, "", status.Errorf(codes.InvalidArgument, "%s: the whole range is a don't-care: omit the field", what)
			}
			m.Lo, m.Hi = lo, hi
		default:
			return nil, "", status.Errorf(codes.InvalidArgument, "%s: match type %T is not served", what, x)
		}
		ms[i] = m
	}
	for i, f := range ti.fields {
		if given[i] {
			continue
		}
		switch f.kind {
		case p4gen.Exact:
			return nil, "", status.Errorf(codes.InvalidArgument, "table %s: exact match field %d is missing", ti.name, f.id)
		case p4gen.Range:
			ms[i] = p4gen.Match{Lo: 0, Hi: p4gen.Bit(f.bits).Mask()}
		}
	}
	var sb strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&sb, "%d/%d/%d/%d/%d;", m.Value, m.Mask, m.PrefixLen, m.Lo, m.Hi)
	}
	fmt.Fprintf(&sb, "p%d", e.GetPriority())
	return ms, sb.String(), nil
}

// action checks a TableAction for the table and returns the action and
// its arguments.
func (ti *tableInfo) action(pl *pipeline, ta *p4.TableAction, asDefault bool) (*p4gen.Action, []uint64, error) {
	a := ta.GetAction()
	if a == nil {
		return nil, nil, status.Errorf(codes.InvalidArgument, "table %s: only direct actions are served (no action profiles)", ti.name)
	}
	ai := ti.actions[a.GetActionId()]
	if ai == nil {
		if pl.actions[a.GetActionId()] != nil {
			return nil, nil, status.Errorf(codes.InvalidArgument, "table %s: action %s is not one of its actions", ti.name, pl.actions[a.GetActionId()].name)
		}
		return nil, nil, status.Errorf(codes.InvalidArgument, "table %s: no action id %#x", ti.name, a.GetActionId())
	}
	sc := ti.scope[ai.id]
	if asDefault && sc == p4cfg.ActionRef_TABLE_ONLY || !asDefault && sc == p4cfg.ActionRef_DEFAULT_ONLY {
		return nil, nil, status.Errorf(codes.PermissionDenied, "table %s: action %s's scope is %v", ti.name, ai.name, sc)
	}
	args := make([]uint64, len(ai.params))
	given := make([]bool, len(ai.params))
	for _, p := range a.GetParams() {
		i := slices.IndexFunc(ai.params, func(f fieldInfo) bool { return f.id == p.GetParamId() })
		if i < 0 {
			return nil, nil, status.Errorf(codes.InvalidArgument, "action %s has no parameter id %d", ai.name, p.GetParamId())
		}
		if given[i] {
			return nil, nil, status.Errorf(codes.InvalidArgument, "action %s: parameter id %d is given twice", ai.name, p.GetParamId())
		}
		v, err := value(p.GetValue(), ai.params[i].bits, fmt.Sprintf("action %s, parameter %d", ai.name, p.GetParamId()))
		if err != nil {
			return nil, nil, err
		}
		args[i], given[i] = v, true
	}
	for i, g := range given {
		if !g {
			return nil, nil, status.Errorf(codes.InvalidArgument, "action %s: parameter id %d is missing", ai.name, ai.params[i].id)
		}
	}
	return ai.a, args, nil
}

func (s *Server) writeTable(pl *pipeline, t p4.Update_Type, e *p4.TableEntry) error {
	ti := pl.tables[e.GetTableId()]
	if ti == nil {
		return status.Errorf(codes.NotFound, "no table id %#x", e.GetTableId())
	}
	if e.GetIsConst() {
		return status.Errorf(codes.InvalidArgument, "table %s: is_const must be false in a write", ti.name)
	}
	if e.GetIsDefaultAction() {
		if t != p4.Update_MODIFY {
			return status.Errorf(codes.InvalidArgument, "table %s: the default entry is only modified", ti.name)
		}
		if len(e.GetMatch()) > 0 || e.GetPriority() != 0 {
			return status.Errorf(codes.InvalidArgument, "table %s: the default entry has no match and no priority", ti.name)
		}
		if ti.constDefault {
			return status.Errorf(codes.PermissionDenied, "table %s: its default action is constant", ti.name)
		}
		a, args := ti.t.Default, ti.t.DefaultArgs
		if e.GetAction() != nil {
			var err error
			if a, args, err = ti.action(pl, e.GetAction(), true); err != nil {
				return err
			}
		}
		ti.defaultSet = e.GetAction() != nil
		return s.on(pl, func(m *pisa.Model) error { return m.SetDefault(ti.t, a, args) })
	}
	if ti.isConst {
		return status.Errorf(codes.PermissionDenied, "table %s is constant", ti.name)
	}
	if len(ti.fields) == 0 {
		return status.Errorf(codes.InvalidArgument, "table %s has no key: only its default entry is written", ti.name)
	}
	if ti.prio && e.GetPriority() <= 0 {
		return status.Errorf(codes.InvalidArgument, "table %s has a ternary or range key: the entry needs a priority above 0", ti.name)
	}
	if !ti.prio && e.GetPriority() != 0 {
		return status.Errorf(codes.InvalidArgument, "table %s has no ternary or range key: the entry's priority must be 0", ti.name)
	}
	ms, k, err := ti.match(e)
	if err != nil {
		return err
	}
	es := pl.entries[ti]
	at := slices.IndexFunc(es, func(s *stored) bool { return s.key == k })
	switch t {
	case p4.Update_INSERT:
		if at >= 0 {
			return status.Errorf(codes.AlreadyExists, "table %s has this entry", ti.name)
		}
		if len(es) >= ti.size {
			return status.Errorf(codes.ResourceExhausted, "table %s is full (%d entries)", ti.name, ti.size)
		}
		if e.GetAction() == nil {
			return status.Errorf(codes.InvalidArgument, "table %s: an inserted entry needs an action", ti.name)
		}
		a, args, err := ti.action(pl, e.GetAction(), false)
		if err != nil {
			return err
		}
		pl.entries[ti] = append(es, &stored{key: k, entry: p4gen.Entry{Match: ms, Priority: e.GetPriority(), Action: a, Args: args},
			cookie: e.GetControllerMetadata(), meta: e.GetMetadata()})
	case p4.Update_MODIFY:
		if at < 0 {
			return status.Errorf(codes.NotFound, "table %s has no such entry", ti.name)
		}
		n := *es[at]
		if e.GetAction() != nil {
			a, args, err := ti.action(pl, e.GetAction(), false)
			if err != nil {
				return err
			}
			n.entry.Action, n.entry.Args = a, args
		}
		n.cookie, n.meta = e.GetControllerMetadata(), e.GetMetadata()
		es[at] = &n
	case p4.Update_DELETE:
		if at < 0 {
			return status.Errorf(codes.NotFound, "table %s has no such entry", ti.name)
		}
		pl.entries[ti] = slices.Delete(es, at, at+1)
	}
	if err := s.on(pl, func(*pisa.Model) error { return pl.install(ti) }); err != nil {
		return status.Errorf(codes.Internal, "table %s: %v", ti.name, err)
	}
	return nil
}
