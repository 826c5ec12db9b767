package server

import (
	"bytes"
	"sort"

	p4 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ffpf-go/ffpf/flowspaces/p4/pisa"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// readBatch is how many entities one ReadResponse carries at most.
const readBatch = 1000

// Read streams the entities each request selects; a request that is
// invalid gets its error in the final status (UNKNOWN with a p4.Error
// per request), the others their entities.
func (s *Server) Read(r *p4.ReadRequest, rs p4.P4Runtime_ReadServer) error {
	s.mu.Lock()
	if r.GetDeviceId() != s.deviceID {
		s.mu.Unlock()
		return status.Errorf(codes.NotFound, "no device %d (this is device %d)", r.GetDeviceId(), s.deviceID)
	}
	pl := s.current()
	if pl == nil {
		s.mu.Unlock()
		return status.Error(codes.FailedPrecondition, "no forwarding pipeline config is set")
	}
	var out []*p4.Entity
	errs := make([]error, len(r.GetEntities()))
	for i, e := range r.GetEntities() {
		got, err := s.read(pl, e)
		errs[i] = err
		out = append(out, got...)
	}
	s.mu.Unlock()
	for len(out) > 0 {
		n := min(len(out), readBatch)
		if err := rs.Send(&p4.ReadResponse{Entities: out[:n]}); err != nil {
			return err
		}
		out = out[n:]
	}
	return batchError("read", errs)
}

func (s *Server) read(pl *pipeline, e *p4.Entity) (out []*p4.Entity, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, status.Errorf(codes.Internal, "the read failed: %v", r)
		}
	}()
	switch x := e.GetEntity().(type) {
	case *p4.Entity_TableEntry:
		return s.readTables(pl, x.TableEntry)
	case *p4.Entity_CounterEntry:
		return s.readCounters(pl, x.CounterEntry)
	case *p4.Entity_RegisterEntry:
		return s.readRegisters(pl, x.RegisterEntry)
	case *p4.Entity_DigestEntry:
		ds, err := s.dig.entries(pl, x.DigestEntry.GetDigestId())
		for _, d := range ds {
			out = append(out, &p4.Entity{Entity: &p4.Entity_DigestEntry{DigestEntry: d}})
		}
		return out, err
	case *p4.Entity_PacketReplicationEngineEntry:
		cs := x.PacketReplicationEngineEntry.GetCloneSessionEntry()
		if cs == nil {
			return nil, status.Error(codes.Unimplemented, "multicast groups are not served; clone sessions are")
		}
		var sessions map[uint32]uint16
		_ = s.on(pl, func(m *pisa.Model) error { sessions = m.Sessions(); return nil })
		ids := make([]uint32, 0, len(sessions))
		for id := range sessions {
			if cs.GetSessionId() == 0 || cs.GetSessionId() == id {
				ids = append(ids, id)
			}
		}
		if cs.GetSessionId() != 0 && len(ids) == 0 {
			return nil, status.Errorf(codes.NotFound, "no clone session %d", cs.GetSessionId())
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		for _, id := range ids {
			port := uint32(sessions[id])
			if port == uint32(s.dev.CPUPort()) {
				port = sdnCPU
			}
			out = append(out, &p4.Entity{Entity: &p4.Entity_PacketReplicationEngineEntry{PacketReplicationEngineEntry: &p4.PacketReplicationEngineEntry{
				Type: &p4.PacketReplicationEngineEntry_CloneSessionEntry{CloneSessionEntry: &p4.CloneSessionEntry{SessionId: id,
					Replicas: []*p4.Replica{{PortKind: &p4.Replica_Port{Port: bytesOf(uint64(port))}, Instance: 1}}}}}}})
		}
		return out, nil
	case nil:
		return nil, status.Error(codes.InvalidArgument, "a read request's entity is unset")
	default:
		return nil, status.Errorf(codes.Unimplemented, "entity %T is not served", x)
	}
}

// entityOf is a stored entry as P4Runtime writes it back.
func (ti *tableInfo) entityOf(pl *pipeline, st *stored) *p4.TableEntry {
	te := &p4.TableEntry{TableId: ti.id, Priority: st.entry.Priority, ControllerMetadata: st.cookie, Metadata: st.meta}
	for i, f := range ti.fields {
		m := st.entry.Match[i]
		var fm *p4.FieldMatch
		switch f.kind {
		case p4gen.Exact:
			fm = &p4.FieldMatch{FieldMatchType: &p4.FieldMatch_Exact_{Exact: &p4.FieldMatch_Exact{Value: bytesOf(m.Value)}}}
		case p4gen.Ternary:
			if m.Mask == 0 {
				continue
			}
			fm = &p4.FieldMatch{FieldMatchType: &p4.FieldMatch_Ternary_{Ternary: &p4.FieldMatch_Ternary{Value: bytesOf(m.Value), Mask: bytesOf(m.Mask)}}}
		case p4gen.LPM:
			if m.PrefixLen == 0 {
				continue
			}
			fm = &p4.FieldMatch{FieldMatchType: &p4.FieldMatch_Lpm{Lpm: &p4.FieldMatch_LPM{Value: bytesOf(m.Value), PrefixLen: int32(m.PrefixLen)}}}
		case p4gen.Range:
			if m.Lo == 0 && m.Hi == p4gen.Bit(f.bits).Mask() {
				continue
			}
			fm = &p4.FieldMatch{FieldMatchType: &p4.FieldMatch_Range_{Range: &p4.FieldMatch_Range{Low: bytesOf(m.Lo), High: bytesOf(m.Hi)}}}
		}
		fm.FieldId = f.id
		te.Match = append(te.Match, fm)
	}
	te.Action = actionOf(ti, st.entry.Action, st.entry.Args)
	return te
}

func actionOf(ti *tableInfo, a *p4gen.Action, args []uint64) *p4.TableAction {
	for _, ai := range ti.actions {
		if ai.a == a {
			act := &p4.Action{ActionId: ai.id}
			for i, p := range ai.params {
				act.Params = append(act.Params, &p4.Action_Param{ParamId: p.id, Value: bytesOf(args[i])})
			}
			return &p4.TableAction{Type: &p4.TableAction_Action{Action: act}}
		}
	}
	return nil
}

func (s *Server) readTables(pl *pipeline, q *p4.TableEntry) ([]*p4.Entity, error) {
	var tables []*tableInfo
	if q.GetTableId() == 0 {
		for _, t := range pl.tables {
			tables = append(tables, t)
		}
		sort.Slice(tables, func(i, j int) bool { return tables[i].id < tables[j].id })
	} else {
		ti := pl.tables[q.GetTableId()]
		if ti == nil {
			return nil, status.Errorf(codes.NotFound, "no table id %#x", q.GetTableId())
		}
		tables = []*tableInfo{ti}
	}
	var out []*p4.Entity
	wrap := func(te *p4.TableEntry) { out = append(out, &p4.Entity{Entity: &p4.Entity_TableEntry{TableEntry: te}}) }
	for _, ti := range tables {
		if q.GetIsDefaultAction() {
			var a *p4gen.Action
			var args []uint64
			_ = s.on(pl, func(m *pisa.Model) error { a, args = m.Default(ti.t); return nil })
			wrap(&p4.TableEntry{TableId: ti.id, IsDefaultAction: true, Action: actionOf(ti, a, args)})
			continue
		}
		var key string
		if len(q.GetMatch()) > 0 {
			_, k, err := ti.match(q)
			if err != nil {
				return nil, err
			}
			key = k
		}
		var want uint32
		if a := q.GetAction().GetAction(); a != nil {
			want = a.GetActionId()
		}
		if ti.isConst {
			for i, e := range ti.t.Entries {
				te := ti.entityOf(pl, &stored{entry: e})
				te.IsConst = true
				if len(ti.t.Entries) > 0 && ti.prio {
					te.Priority = int32(len(ti.t.Entries) - i)
				}
				wrap(te)
			}
			continue
		}
		for _, st := range pl.entries[ti] {
			switch {
			case key != "" && st.key != key:
			case q.GetPriority() != 0 && st.entry.Priority != q.GetPriority():
			case q.GetControllerMetadata() != 0 && st.cookie != q.GetControllerMetadata():
			case len(q.GetMetadata()) > 0 && !bytes.Equal(st.meta, q.GetMetadata()):
			case want != 0 && (ti.actions[want] == nil || ti.actions[want].a != st.entry.Action):
			default:
				wrap(ti.entityOf(pl, st))
			}
		}
	}
	return out, nil
}

func (s *Server) readCounters(pl *pipeline, q *p4.CounterEntry) ([]*p4.Entity, error) {
	var cs []*ctrInfo
	if q.GetCounterId() == 0 {
		for _, c := range pl.ctrs {
			cs = append(cs, c)
		}
		sort.Slice(cs, func(i, j int) bool { return cs[i].id < cs[j].id })
	} else if c := pl.ctrs[q.GetCounterId()]; c != nil {
		cs = []*ctrInfo{c}
	} else {
		return nil, status.Errorf(codes.NotFound, "no counter id %#x", q.GetCounterId())
	}
	var out []*p4.Entity
	err := s.on(pl, func(m *pisa.Model) error {
		for _, ci := range cs {
			i, err := index(q.GetIndex(), ci.c.Size, "counter "+ci.c.Name)
			if err != nil {
				return err
			}
			for j, cell := range m.Counter(ci.c) {
				if i >= 0 && i != j {
					continue
				}
				out = append(out, &p4.Entity{Entity: &p4.Entity_CounterEntry{CounterEntry: &p4.CounterEntry{CounterId: ci.id,
					Index: &p4.Index{Index: int64(j)}, Data: &p4.CounterData{PacketCount: int64(cell.Packets), ByteCount: int64(cell.Bytes)}}}})
			}
		}
		return nil
	})
	return out, err
}

func (s *Server) readRegisters(pl *pipeline, q *p4.RegisterEntry) ([]*p4.Entity, error) {
	var rs []*regInfo
	if q.GetRegisterId() == 0 {
		for _, r := range pl.regs {
			rs = append(rs, r)
		}
		sort.Slice(rs, func(i, j int) bool { return rs[i].id < rs[j].id })
	} else if r := pl.regs[q.GetRegisterId()]; r != nil {
		rs = []*regInfo{r}
	} else {
		return nil, status.Errorf(codes.NotFound, "no register id %#x", q.GetRegisterId())
	}
	var out []*p4.Entity
	err := s.on(pl, func(m *pisa.Model) error {
		for _, ri := range rs {
			i, err := index(q.GetIndex(), ri.r.Size, "register "+ri.r.Name)
			if err != nil {
				return err
			}
			for j, v := range m.Register(ri.r) {
				if i >= 0 && i != j {
					continue
				}
				out = append(out, &p4.Entity{Entity: &p4.Entity_RegisterEntry{RegisterEntry: &p4.RegisterEntry{RegisterId: ri.id,
					Index: &p4.Index{Index: int64(j)}, Data: &p4.P4Data{Data: &p4.P4Data_Bitstring{Bitstring: bytesOf(v)}}}}})
			}
		}
		return nil
	})
	return out, err
}
