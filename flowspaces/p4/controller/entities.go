package controller

import (
	"errors"
	"fmt"
	"io"
	"math/bits"

	p4cfg "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"

	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// names indexes a P4Info by the names of its entities.
type names struct {
	info     *p4cfg.P4Info
	tables   map[string]*p4cfg.Table
	actions  map[string]*p4cfg.Action
	counters map[string]*p4cfg.Counter
	regs     map[string]*p4cfg.Register
	digests  map[string]*p4cfg.Digest
	// packet-in metadata by id
	packetIn map[uint32]string
	// packet-out metadata by name
	packetOut map[string]*p4cfg.ControllerPacketMetadata_Metadata
}

func index(info *p4cfg.P4Info) *names {
	n := &names{info: info, tables: map[string]*p4cfg.Table{}, actions: map[string]*p4cfg.Action{},
		counters: map[string]*p4cfg.Counter{}, regs: map[string]*p4cfg.Register{}, digests: map[string]*p4cfg.Digest{},
		packetIn: map[uint32]string{}, packetOut: map[string]*p4cfg.ControllerPacketMetadata_Metadata{}}
	for _, t := range info.GetTables() {
		n.tables[t.GetPreamble().GetName()] = t
	}
	for _, a := range info.GetActions() {
		n.actions[a.GetPreamble().GetName()] = a
	}
	for _, c := range info.GetCounters() {
		n.counters[c.GetPreamble().GetName()] = c
	}
	for _, r := range info.GetRegisters() {
		n.regs[r.GetPreamble().GetName()] = r
	}
	for _, d := range info.GetDigests() {
		n.digests[d.GetPreamble().GetName()] = d
	}
	for _, m := range info.GetControllerPacketMetadata() {
		for _, f := range m.GetMetadata() {
			switch m.GetPreamble().GetName() {
			case "packet_in":
				n.packetIn[f.GetId()] = f.GetName()
			case "packet_out":
				n.packetOut[f.GetName()] = f
			}
		}
	}
	return n
}

// SetPipeline pushes a pipeline, VERIFY_AND_COMMIT: the switch checks it,
// then runs it with empty tables and zeroed state. deviceConfig is the
// target's own form of the program (the PISA model's: the IR as JSON).
func (c *Client) SetPipeline(info *p4cfg.P4Info, deviceConfig []byte) error {
	return c.setPipeline(p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT, info, deviceConfig, "take the pipeline")
}

// SavePipeline pushes a pipeline, VERIFY_AND_SAVE: the switch checks it
// and keeps it without running it; the entities written before Commit
// are the new pipeline's, so that it starts with them.
func (c *Client) SavePipeline(info *p4cfg.P4Info, deviceConfig []byte) error {
	return c.setPipeline(p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_SAVE, info, deviceConfig, "take the pipeline")
}

// Commit makes the pipeline saved (SavePipeline) the one the switch runs.
func (c *Client) Commit() error {
	ctx, cancel := c.timeout()
	defer cancel()
	_, err := c.rt.SetForwardingPipelineConfig(ctx, &p4v1.SetForwardingPipelineConfigRequest{
		DeviceId: c.opts.DeviceID, ElectionId: c.election(), Action: p4v1.SetForwardingPipelineConfigRequest_COMMIT})
	if err != nil {
		return c.callError("run the pipeline", err)
	}
	return nil
}

func (c *Client) setPipeline(action p4v1.SetForwardingPipelineConfigRequest_Action, info *p4cfg.P4Info, deviceConfig []byte, what string) error {
	ctx, cancel := c.timeout()
	defer cancel()
	_, err := c.rt.SetForwardingPipelineConfig(ctx, &p4v1.SetForwardingPipelineConfigRequest{
		DeviceId:   c.opts.DeviceID,
		ElectionId: c.election(),
		Action:     action,
		Config:     &p4v1.ForwardingPipelineConfig{P4Info: info, P4DeviceConfig: deviceConfig},
	})
	if err != nil {
		return c.callError(what, err)
	}
	n := index(info)
	c.mu.Lock()
	c.names = n
	c.digests = map[uint32]string{}
	for name, d := range n.digests {
		c.digests[d.GetPreamble().GetId()] = name
	}
	c.mu.Unlock()
	return nil
}

func (c *Client) election() *p4v1.Uint128 {
	return &p4v1.Uint128{High: c.opts.ElectionID.High, Low: c.opts.ElectionID.Low}
}

func (c *Client) index() (*names, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.names == nil {
		return nil, errNoPipeline
	}
	return c.names, nil
}

// write sends one update.
func (c *Client) write(t p4v1.Update_Type, e *p4v1.Entity) error {
	ctx, cancel := c.timeout()
	defer cancel()
	_, err := c.rt.Write(ctx, &p4v1.WriteRequest{DeviceId: c.opts.DeviceID, ElectionId: c.election(),
		Updates: []*p4v1.Update{{Type: t, Entity: e}}})
	if err != nil {
		what := map[p4v1.Update_Type]string{p4v1.Update_INSERT: "insert", p4v1.Update_MODIFY: "modify", p4v1.Update_DELETE: "delete"}[t]
		return c.callError(what+" "+describeEntity(e), err)
	}
	return nil
}

// Insert writes entities, in order, and remembers them to delete on
// Close; it stops at the first the switch refuses.
func (c *Client) Insert(es ...*p4v1.Entity) error {
	for _, e := range es {
		if err := c.write(p4v1.Update_INSERT, e); err != nil {
			return err
		}
		c.mu.Lock()
		c.installed = append(c.installed, e)
		c.mu.Unlock()
	}
	return nil
}

// Modify writes an entity that exists (a table's default action, a
// digest's configuration): it is not deleted on Close.
func (c *Client) Modify(e *p4v1.Entity) error { return c.write(p4v1.Update_MODIFY, e) }

func describeEntity(e *p4v1.Entity) string {
	switch x := e.Entity.(type) {
	case *p4v1.Entity_TableEntry:
		return fmt.Sprintf("an entry of table %d", x.TableEntry.TableId)
	case *p4v1.Entity_DigestEntry:
		return fmt.Sprintf("the configuration of digest %d", x.DigestEntry.DigestId)
	case *p4v1.Entity_PacketReplicationEngineEntry:
		return "a clone session"
	case *p4v1.Entity_CounterEntry:
		return fmt.Sprintf("counter %d", x.CounterEntry.CounterId)
	case *p4v1.Entity_RegisterEntry:
		return fmt.Sprintf("register %d", x.RegisterEntry.RegisterId)
	}
	return "an entity"
}

// TableEntry returns the entity of entry e of table (its P4Info name) for
// the action named action (P4Info names). A ternary key whose mask is
// zero, an LPM key of prefix 0 and a range over every value are left out,
// as the P4Runtime specification requires of a "don't care".
func (c *Client) TableEntry(table string, e p4gen.Entry, action string) (*p4v1.Entity, error) {
	n, err := c.index()
	if err != nil {
		return nil, err
	}
	t, ok := n.tables[table]
	if !ok {
		return nil, fmt.Errorf("the pipeline has no table %s", table)
	}
	a, ok := n.actions[action]
	if !ok {
		return nil, fmt.Errorf("the pipeline has no action %s", action)
	}
	if len(e.Match) != len(t.MatchFields) {
		return nil, fmt.Errorf("table %s has %d keys, the entry %d", table, len(t.MatchFields), len(e.Match))
	}
	if len(e.Args) != len(a.Params) {
		return nil, fmt.Errorf("action %s takes %d parameters, the entry gives %d", action, len(a.Params), len(e.Args))
	}
	te := &p4v1.TableEntry{TableId: t.Preamble.Id, Priority: e.Priority}
	for i, f := range t.MatchFields {
		m, w := e.Match[i], int(f.Bitwidth)
		all := p4gen.Bit(w).Mask()
		fm := &p4v1.FieldMatch{FieldId: f.Id}
		switch f.GetMatchType() {
		case p4cfg.MatchField_EXACT:
			fm.FieldMatchType = &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: Bytes(m.Value, w)}}
		case p4cfg.MatchField_TERNARY:
			if m.Mask&all == 0 {
				continue
			}
			fm.FieldMatchType = &p4v1.FieldMatch_Ternary_{Ternary: &p4v1.FieldMatch_Ternary{
				Value: Bytes(m.Value&m.Mask, w), Mask: Bytes(m.Mask, w)}}
		case p4cfg.MatchField_LPM:
			if m.PrefixLen == 0 {
				continue
			}
			v := m.Value
			if m.PrefixLen < w {
				v &^= p4gen.Bit(w - m.PrefixLen).Mask()
			}
			fm.FieldMatchType = &p4v1.FieldMatch_Lpm{Lpm: &p4v1.FieldMatch_LPM{Value: Bytes(v, w), PrefixLen: int32(m.PrefixLen)}}
		case p4cfg.MatchField_RANGE:
			if m.Lo == 0 && m.Hi&all == all {
				continue
			}
			fm.FieldMatchType = &p4v1.FieldMatch_Range_{Range: &p4v1.FieldMatch_Range{Low: Bytes(m.Lo, w), High: Bytes(m.Hi, w)}}
		default:
			return nil, fmt.Errorf("table %s: key %s has a match kind the controller does not write", table, f.Name)
		}
		te.Match = append(te.Match, fm)
	}
	act := &p4v1.Action{ActionId: a.Preamble.Id}
	for i, p := range a.Params {
		act.Params = append(act.Params, &p4v1.Action_Param{ParamId: p.Id, Value: Bytes(e.Args[i], int(p.Bitwidth))})
	}
	te.Action = &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: act}}
	return &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: te}}, nil
}

// CloneSession returns the entity of clone session id, which sends its
// copies out of port.
func CloneSession(id uint32, port uint32) *p4v1.Entity {
	return &p4v1.Entity{Entity: &p4v1.Entity_PacketReplicationEngineEntry{PacketReplicationEngineEntry: &p4v1.PacketReplicationEngineEntry{
		Type: &p4v1.PacketReplicationEngineEntry_CloneSessionEntry{CloneSessionEntry: &p4v1.CloneSessionEntry{
			SessionId: id, Replicas: []*p4v1.Replica{{PortKind: &p4v1.Replica_EgressPort{EgressPort: port}, Instance: 1}}}}}}}
}

// DigestConfig returns the entity that turns digest name on: each digest
// goes to the controller in a list of its own, at once (max_list_size 1,
// no timeout), so that a record's time is its packet's.
func (c *Client) DigestConfig(name string) (*p4v1.Entity, error) {
	n, err := c.index()
	if err != nil {
		return nil, err
	}
	d, ok := n.digests[name]
	if !ok {
		return nil, fmt.Errorf("the pipeline has no digest %s", name)
	}
	return &p4v1.Entity{Entity: &p4v1.Entity_DigestEntry{DigestEntry: &p4v1.DigestEntry{DigestId: d.Preamble.Id,
		Config: &p4v1.DigestEntry_Config{MaxListSize: 1, MaxTimeoutNs: 0, AckTimeoutNs: 1e9}}}}, nil
}

// Cell is one cell of a counter.
type Cell struct{ Packets, Bytes uint64 }

// ReadCounter reads every cell of counter name (its P4Info name), by
// index.
func (c *Client) ReadCounter(name string) ([]Cell, error) {
	n, err := c.index()
	if err != nil {
		return nil, err
	}
	ct, ok := n.counters[name]
	if !ok {
		return nil, fmt.Errorf("the pipeline has no counter %s", name)
	}
	cells := make([]Cell, ct.Size)
	err = c.read(&p4v1.Entity{Entity: &p4v1.Entity_CounterEntry{CounterEntry: &p4v1.CounterEntry{CounterId: ct.Preamble.Id}}},
		func(e *p4v1.Entity) error {
			ce := e.GetCounterEntry()
			if ce == nil || ce.CounterId != ct.Preamble.Id {
				return fmt.Errorf("a read of counter %s answered with another entity", name)
			}
			i := ce.GetIndex().GetIndex()
			if i < 0 || i >= int64(len(cells)) {
				return fmt.Errorf("a read of counter %s answered with index %d of %d", name, i, len(cells))
			}
			cells[i] = Cell{Packets: uint64(ce.GetData().GetPacketCount()), Bytes: uint64(ce.GetData().GetByteCount())}
			return nil
		})
	if err != nil {
		return nil, err
	}
	return cells, nil
}

// ReadRegister reads every cell of register name (its P4Info name), by
// index. bmv2's P4Runtime server does not serve it (p4lang/PI#376).
func (c *Client) ReadRegister(name string) ([]uint64, error) {
	n, err := c.index()
	if err != nil {
		return nil, err
	}
	r, ok := n.regs[name]
	if !ok {
		return nil, fmt.Errorf("the pipeline has no register %s", name)
	}
	cells := make([]uint64, r.Size)
	err = c.read(&p4v1.Entity{Entity: &p4v1.Entity_RegisterEntry{RegisterEntry: &p4v1.RegisterEntry{RegisterId: r.Preamble.Id}}},
		func(e *p4v1.Entity) error {
			re := e.GetRegisterEntry()
			if re == nil || re.RegisterId != r.Preamble.Id {
				return fmt.Errorf("a read of register %s answered with another entity", name)
			}
			i := re.GetIndex().GetIndex()
			if i < 0 || i >= int64(len(cells)) {
				return fmt.Errorf("a read of register %s answered with index %d of %d", name, i, len(cells))
			}
			cells[i] = Uint(re.GetData().GetBitstring())
			return nil
		})
	if err != nil {
		return nil, err
	}
	return cells, nil
}

// read sends a read request for one (wildcard) entity and hands each
// entity of the answer to f.
func (c *Client) read(e *p4v1.Entity, f func(*p4v1.Entity) error) error {
	ctx, cancel := c.timeout()
	defer cancel()
	s, err := c.rt.Read(ctx, &p4v1.ReadRequest{DeviceId: c.opts.DeviceID, Entities: []*p4v1.Entity{e}})
	if err != nil {
		return c.callError("read "+describeEntity(e), err)
	}
	for {
		r, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return c.callError("read "+describeEntity(e), err)
		}
		for _, x := range r.Entities {
			if err := f(x); err != nil {
				return err
			}
		}
	}
}

// PacketOut sends payload to the switch's CPU port with the packet_out
// metadata given by name.
func (c *Client) PacketOut(payload []byte, metadata map[string]uint64) error {
	n, err := c.index()
	if err != nil {
		return err
	}
	po := &p4v1.PacketOut{Payload: payload}
	for name, v := range metadata {
		f, ok := n.packetOut[name]
		if !ok {
			return fmt.Errorf("the pipeline's packet_out has no field %s", name)
		}
		po.Metadata = append(po.Metadata, &p4v1.PacketMetadata{MetadataId: f.Id, Value: Bytes(v, int(f.Bitwidth))})
	}
	if err := c.send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Packet{Packet: po}}); err != nil {
		return c.callError("take a packet", err)
	}
	return nil
}

func (c *Client) packetMetadata(md []*p4v1.PacketMetadata) map[string]uint64 {
	if len(md) == 0 {
		return nil
	}
	c.mu.Lock()
	n := c.names
	c.mu.Unlock()
	out := map[string]uint64{}
	for _, m := range md {
		name := fmt.Sprint(m.MetadataId)
		if n != nil {
			if s, ok := n.packetIn[m.MetadataId]; ok {
				name = s
			}
		}
		out[name] = Uint(m.Value)
	}
	return out
}

// Bytes encodes v as P4Runtime's canonical binary string of a w-bit
// value: big-endian, without leading zero bytes (one byte for zero).
func Bytes(v uint64, w int) []byte {
	v &= p4gen.Bit(w).Mask()
	n := max(1, (bits.Len64(v)+7)/8)
	b := make([]byte, n)
	for i := n - 1; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
	return b
}

// Uint decodes a binary string (big-endian, of any length; the low 64
// bits).
func Uint(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

// zeroBatch is how many cells one write request zeroes: a request stays
// well below gRPC's 4 MiB message limit.
const zeroBatch = 20000

// ZeroCounter sets every cell of counter name to zero.
func (c *Client) ZeroCounter(name string) error {
	n, err := c.index()
	if err != nil {
		return err
	}
	ct, ok := n.counters[name]
	if !ok {
		return fmt.Errorf("the pipeline has no counter %s", name)
	}
	return c.modifyAll(ct.Size, func(i int64) *p4v1.Entity {
		return &p4v1.Entity{Entity: &p4v1.Entity_CounterEntry{CounterEntry: &p4v1.CounterEntry{
			CounterId: ct.Preamble.Id, Index: &p4v1.Index{Index: i}, Data: &p4v1.CounterData{}}}}
	})
}

// ZeroRegister sets every cell of register name, of width bits, to zero.
func (c *Client) ZeroRegister(name string, width int) error {
	n, err := c.index()
	if err != nil {
		return err
	}
	r, ok := n.regs[name]
	if !ok {
		return fmt.Errorf("the pipeline has no register %s", name)
	}
	return c.modifyAll(int64(r.Size), func(i int64) *p4v1.Entity {
		return &p4v1.Entity{Entity: &p4v1.Entity_RegisterEntry{RegisterEntry: &p4v1.RegisterEntry{
			RegisterId: r.Preamble.Id, Index: &p4v1.Index{Index: i},
			Data: &p4v1.P4Data{Data: &p4v1.P4Data_Bitstring{Bitstring: Bytes(0, width)}}}}}
	})
}

// modifyAll writes entity(i) for every i < size, MODIFY, in batches.
func (c *Client) modifyAll(size int64, entity func(i int64) *p4v1.Entity) error {
	for lo := int64(0); lo < size; lo += zeroBatch {
		req := &p4v1.WriteRequest{DeviceId: c.opts.DeviceID, ElectionId: c.election()}
		for i := lo; i < min(size, lo+zeroBatch); i++ {
			req.Updates = append(req.Updates, &p4v1.Update{Type: p4v1.Update_MODIFY, Entity: entity(i)})
		}
		ctx, cancel := c.timeout()
		_, err := c.rt.Write(ctx, req)
		cancel()
		if err != nil {
			return c.callError("modify "+describeEntity(req.Updates[0].Entity), err)
		}
	}
	return nil
}
