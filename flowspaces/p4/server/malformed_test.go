package server

import (
	"context"
	"testing"

	p4cfg "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/ffpf-go/ffpf/flowspaces/p4/server/p4infotest"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// updateCode is the code the spec gives one update of a batch: the
// p4.Error of its place in the details of an UNKNOWN status.
func updateCode(t *testing.T, err error, i int) codes.Code {
	t.Helper()
	if err == nil {
		return codes.OK
	}
	st := status.Convert(err)
	if st.Code() != codes.Unknown {
		return st.Code() // an RPC-wide error
	}
	ds := st.Details()
	if i >= len(ds) {
		t.Fatalf("%d details for update %d: %v", len(ds), i, err)
	}
	pe, ok := ds[i].(*p4.Error)
	if !ok {
		t.Fatalf("detail %d is %T", i, ds[i])
	}
	return codes.Code(pe.GetCanonicalCode())
}

// malformed returns write updates and the code the spec gives each, in
// a switch running p4infotest.Switch with one route entry for 10.0.0.2.
func malformed(x ids) []struct {
	name string
	u    *p4.Update
	want codes.Code
} {
	route, acl := x.table("route"), x.table("acl")
	fwd := x.action("fwd")
	te := func(t p4.Update_Type, e *p4.TableEntry) *p4.Update { return tableUpdate(t, e) }
	good := func() *p4.TableEntry {
		return &p4.TableEntry{TableId: route, Match: []*p4.FieldMatch{exact(1, []byte{10, 0, 0, 7})}, Action: act(fwd, []byte{2})}
	}
	with := func(f func(e *p4.TableEntry)) *p4.TableEntry { e := good(); f(e); return e }
	tern := func(v, m []byte) *p4.FieldMatch {
		return &p4.FieldMatch{FieldId: 1, FieldMatchType: &p4.FieldMatch_Ternary_{Ternary: &p4.FieldMatch_Ternary{Value: v, Mask: m}}}
	}
	rng := func(lo, hi []byte) *p4.FieldMatch {
		return &p4.FieldMatch{FieldId: 2, FieldMatchType: &p4.FieldMatch_Range_{Range: &p4.FieldMatch_Range{Low: lo, High: hi}}}
	}
	ctr := func(t p4.Update_Type, id uint32, ix *p4.Index) *p4.Update {
		return &p4.Update{Type: t, Entity: &p4.Entity{Entity: &p4.Entity_CounterEntry{CounterEntry: &p4.CounterEntry{CounterId: id, Index: ix,
			Data: &p4.CounterData{PacketCount: 1}}}}}
	}
	reg := func(ix *p4.Index, d *p4.P4Data) *p4.Update {
		return &p4.Update{Type: p4.Update_MODIFY, Entity: &p4.Entity{Entity: &p4.Entity_RegisterEntry{RegisterEntry: &p4.RegisterEntry{
			RegisterId: x.of("register"), Index: ix, Data: d}}}}
	}
	bits := func(b []byte) *p4.P4Data { return &p4.P4Data{Data: &p4.P4Data_Bitstring{Bitstring: b}} }
	dig := func(t p4.Update_Type, id uint32) *p4.Update {
		return &p4.Update{Type: t, Entity: &p4.Entity{Entity: &p4.Entity_DigestEntry{DigestEntry: &p4.DigestEntry{DigestId: id, Config: &p4.DigestEntry_Config{}}}}}
	}
	clone := func(id uint32, port []byte) *p4.Update {
		return &p4.Update{Type: p4.Update_INSERT, Entity: &p4.Entity{Entity: &p4.Entity_PacketReplicationEngineEntry{PacketReplicationEngineEntry: &p4.PacketReplicationEngineEntry{
			Type: &p4.PacketReplicationEngineEntry_CloneSessionEntry{CloneSessionEntry: &p4.CloneSessionEntry{SessionId: id,
				Replicas: []*p4.Replica{{PortKind: &p4.Replica_Port{Port: port}}}}}}}}}
	}
	return []struct {
		name string
		u    *p4.Update
		want codes.Code
	}{
		{"a good insert", te(p4.Update_INSERT, good()), codes.OK},
		{"the same again", te(p4.Update_INSERT, with(func(e *p4.TableEntry) {})), codes.AlreadyExists},
		{"an unknown table", te(p4.Update_INSERT, with(func(e *p4.TableEntry) { e.TableId = 0x02ffffff })), codes.NotFound},
		{"an unknown match field", te(p4.Update_INSERT, with(func(e *p4.TableEntry) { e.Match[0].FieldId = 9 })), codes.InvalidArgument},
		{"a field given twice", te(p4.Update_INSERT, with(func(e *p4.TableEntry) { e.Match = append(e.Match, e.Match[0]) })), codes.InvalidArgument},
		{"an exact value too wide", te(p4.Update_INSERT, with(func(e *p4.TableEntry) { e.Match[0] = exact(1, []byte{1, 0, 0, 0, 0}) })), codes.OutOfRange},
		{"an empty value", te(p4.Update_INSERT, with(func(e *p4.TableEntry) { e.Match[0] = exact(1, nil) })), codes.OutOfRange},
		{"a missing exact field", te(p4.Update_INSERT, with(func(e *p4.TableEntry) { e.Match = nil })), codes.InvalidArgument},
		{"a ternary match on an exact field", te(p4.Update_INSERT, with(func(e *p4.TableEntry) { e.Match[0] = tern([]byte{1}, []byte{1}) })), codes.InvalidArgument},
		{"a priority on an exact table", te(p4.Update_INSERT, with(func(e *p4.TableEntry) { e.Priority = 3 })), codes.InvalidArgument},
		{"no priority on a ternary table", te(p4.Update_INSERT, &p4.TableEntry{TableId: acl, Match: []*p4.FieldMatch{tern([]byte{6}, []byte{0xff})}, Action: act(fwd, []byte{1})}), codes.InvalidArgument},
		{"a zero mask", te(p4.Update_INSERT, &p4.TableEntry{TableId: acl, Priority: 1, Match: []*p4.FieldMatch{tern([]byte{0}, []byte{0})}, Action: act(fwd, []byte{1})}), codes.InvalidArgument},
		{"value bits outside the mask", te(p4.Update_INSERT, &p4.TableEntry{TableId: acl, Priority: 1, Match: []*p4.FieldMatch{tern([]byte{7}, []byte{6})}, Action: act(fwd, []byte{1})}), codes.InvalidArgument},
		{"a range low above high", te(p4.Update_INSERT, &p4.TableEntry{TableId: acl, Priority: 1, Match: []*p4.FieldMatch{rng([]byte{9}, []byte{8})}, Action: act(fwd, []byte{1})}), codes.InvalidArgument},
		{"a whole range", te(p4.Update_INSERT, &p4.TableEntry{TableId: acl, Priority: 1, Match: []*p4.FieldMatch{rng([]byte{0}, []byte{0xff, 0xff})}, Action: act(fwd, []byte{1})}), codes.InvalidArgument},
		{"a range too wide", te(p4.Update_INSERT, &p4.TableEntry{TableId: acl, Priority: 1, Match: []*p4.FieldMatch{rng([]byte{0}, []byte{1, 0, 0})}, Action: act(fwd, []byte{1})}), codes.OutOfRange},
		{"no action on insert", te(p4.Update_INSERT, with(func(e *p4.TableEntry) { e.Match[0] = exact(1, []byte{8}); e.Action = nil })), codes.InvalidArgument},
		{"an action not the table's", te(p4.Update_INSERT, with(func(e *p4.TableEntry) { e.Match[0] = exact(1, []byte{8}); e.Action = act(x.action("nop")) })), codes.InvalidArgument},
		{"an unknown action", te(p4.Update_INSERT, with(func(e *p4.TableEntry) { e.Match[0] = exact(1, []byte{8}); e.Action = act(0x01ffffff) })), codes.InvalidArgument},
		{"a missing parameter", te(p4.Update_INSERT, with(func(e *p4.TableEntry) { e.Match[0] = exact(1, []byte{8}); e.Action = act(fwd) })), codes.InvalidArgument},
		{"an extra parameter", te(p4.Update_INSERT, with(func(e *p4.TableEntry) { e.Match[0] = exact(1, []byte{8}); e.Action = act(fwd, []byte{1}, []byte{1}) })), codes.InvalidArgument},
		{"a parameter too wide", te(p4.Update_INSERT, with(func(e *p4.TableEntry) { e.Match[0] = exact(1, []byte{8}); e.Action = act(fwd, []byte{2, 0}) })), codes.OutOfRange},
		{"an action profile member", te(p4.Update_INSERT, with(func(e *p4.TableEntry) {
			e.Match[0] = exact(1, []byte{8})
			e.Action = &p4.TableAction{Type: &p4.TableAction_ActionProfileMemberId{ActionProfileMemberId: 1}}
		})), codes.InvalidArgument},
		{"is_const", te(p4.Update_INSERT, with(func(e *p4.TableEntry) { e.IsConst = true })), codes.InvalidArgument},
		{"modify a missing entry", te(p4.Update_MODIFY, with(func(e *p4.TableEntry) { e.Match[0] = exact(1, []byte{9}) })), codes.NotFound},
		{"delete a missing entry", te(p4.Update_DELETE, with(func(e *p4.TableEntry) { e.Match[0] = exact(1, []byte{9}) })), codes.NotFound},
		{"insert the default entry", te(p4.Update_INSERT, &p4.TableEntry{TableId: route, IsDefaultAction: true, Action: act(fwd, []byte{1})}), codes.InvalidArgument},
		{"a default entry with a match", te(p4.Update_MODIFY, &p4.TableEntry{TableId: route, IsDefaultAction: true, Match: good().Match}), codes.InvalidArgument},
		{"an unspecified update", &p4.Update{Entity: &p4.Entity{Entity: &p4.Entity_TableEntry{TableEntry: good()}}}, codes.InvalidArgument},
		{"no entity", &p4.Update{Type: p4.Update_INSERT}, codes.InvalidArgument},
		{"a meter", &p4.Update{Type: p4.Update_MODIFY, Entity: &p4.Entity{Entity: &p4.Entity_MeterEntry{MeterEntry: &p4.MeterEntry{}}}}, codes.Unimplemented},
		{"a counter inserted", ctr(p4.Update_INSERT, x.of("counter"), nil), codes.InvalidArgument},
		{"a counter deleted", ctr(p4.Update_DELETE, x.of("counter"), nil), codes.InvalidArgument},
		{"an unknown counter", ctr(p4.Update_MODIFY, 0x12ffffff, nil), codes.NotFound},
		{"a negative counter index", ctr(p4.Update_MODIFY, x.of("counter"), &p4.Index{Index: -1}), codes.InvalidArgument},
		{"a counter index past the end", ctr(p4.Update_MODIFY, x.of("counter"), &p4.Index{Index: 1}), codes.OutOfRange},
		{"a good counter write", ctr(p4.Update_MODIFY, x.of("counter"), &p4.Index{Index: 0}), codes.OK},
		{"a register index past the end", reg(&p4.Index{Index: 16}, bits([]byte{1})), codes.OutOfRange},
		{"a register value too wide", reg(&p4.Index{Index: 0}, bits([]byte{1, 0, 0, 0, 0})), codes.OutOfRange},
		{"a register value not a bitstring", reg(&p4.Index{Index: 0}, &p4.P4Data{Data: &p4.P4Data_Bool{Bool: true}}), codes.InvalidArgument},
		{"a good register write", reg(nil, bits([]byte{7})), codes.OK},
		{"an unknown digest", dig(p4.Update_INSERT, 0x17ffffff), codes.NotFound},
		{"a digest modified before enabled", dig(p4.Update_MODIFY, x.of("digest")), codes.NotFound},
		{"a digest enabled", dig(p4.Update_INSERT, x.of("digest")), codes.OK},
		{"a digest enabled twice", dig(p4.Update_INSERT, x.of("digest")), codes.AlreadyExists},
		{"clone session 0", clone(0, []byte{1}), codes.InvalidArgument},
		{"a clone to port 511", clone(3, []byte{1, 0xff}), codes.OutOfRange},
		{"a good clone session", clone(3, []byte{1}), codes.OK},
		{"the same again", clone(3, []byte{1}), codes.AlreadyExists},
	}
}

// TestMalformedWrites: every malformed update gets the spec's code, in
// one batch (each in its place among the details) and alone.
func TestMalformedWrites(t *testing.T) {
	r := newRig(t)
	cl := r.connect(1)
	next(cl, arbitration)
	prog := p4infotest.Switch()
	if err := r.push(cl, prog, p4.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT); err != nil {
		t.Fatal(err)
	}
	x := ids{p4infotest.P4Info(prog)}
	cases := malformed(x)
	for _, c := range cases {
		err := r.write(cl, c.u)
		if got := updateCode(t, err, 0); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// Again in one batch on a fresh pipeline: the codes in their places.
	if err := r.push(cl, prog, p4.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT); err != nil {
		t.Fatal(err)
	}
	var us []*p4.Update
	for _, c := range cases {
		us = append(us, c.u)
	}
	err := r.write(cl, us...)
	if status.Code(err) != codes.Unknown || len(status.Convert(err).Details()) != len(cases) {
		t.Fatalf("batch: %v", err)
	}
	for i, c := range cases {
		if got := updateCode(t, err, i); got != c.want {
			t.Errorf("in the batch, %s: %v, want %v", c.name, got, c.want)
		}
	}
	// RPC-wide errors.
	ctx := context.Background()
	for _, c := range []struct {
		name string
		req  *p4.WriteRequest
		want codes.Code
	}{
		{"another device", &p4.WriteRequest{DeviceId: 2, ElectionId: cl.election}, codes.NotFound},
		{"another role", &p4.WriteRequest{DeviceId: 1, Role: "x", ElectionId: cl.election}, codes.NotFound},
		{"no election id", &p4.WriteRequest{DeviceId: 1}, codes.PermissionDenied},
		{"a rollback", &p4.WriteRequest{DeviceId: 1, ElectionId: cl.election, Atomicity: p4.WriteRequest_ROLLBACK_ON_ERROR}, codes.Unimplemented},
	} {
		if _, err := r.c.Write(ctx, c.req); status.Code(err) != c.want {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// Reads: the bad request's error in its place, the good one's entities.
	rc, err := r.c.Read(ctx, &p4.ReadRequest{DeviceId: 1, Entities: []*p4.Entity{
		{Entity: &p4.Entity_CounterEntry{CounterEntry: &p4.CounterEntry{CounterId: x.of("counter")}}},
		{},
		{Entity: &p4.Entity_RegisterEntry{RegisterEntry: &p4.RegisterEntry{RegisterId: x.of("register"), Index: &p4.Index{Index: 99}}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		m, err := rc.Recv()
		if err != nil {
			if status.Code(err) != codes.Unknown || updateCode(t, err, 0) != codes.OK || updateCode(t, err, 1) != codes.InvalidArgument || updateCode(t, err, 2) != codes.OutOfRange {
				t.Errorf("read: %v", err)
			}
			break
		}
		n += len(m.GetEntities())
	}
	if n != 1 {
		t.Errorf("%d entities read, want the counter's cell", n)
	}
	if _, err := r.read(&p4.Entity{Entity: &p4.Entity_TableEntry{TableEntry: &p4.TableEntry{}}}); err != nil {
		t.Errorf("a wildcard read: %v", err)
	}
}

// TestMalformedPipelines: configs the switch cannot realize, and actions
// out of order.
func TestMalformedPipelines(t *testing.T) {
	r := newRig(t)
	cl := r.connect(1)
	next(cl, arbitration)
	e := &p4.TableEntry{TableId: 1, Match: []*p4.FieldMatch{exact(1, []byte{1})}}
	if err := r.write(cl, tableUpdate(p4.Update_INSERT, e)); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("a write before a pipeline: %v", err)
	}
	if _, err := r.read(&p4.Entity{Entity: &p4.Entity_TableEntry{TableEntry: &p4.TableEntry{}}}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("a read before a pipeline: %v", err)
	}
	prog := p4infotest.Switch()
	dc, _ := p4gen.EncodeJSON(prog)
	info := p4infotest.P4Info(prog)
	set := func(a p4.SetForwardingPipelineConfigRequest_Action, cfg *p4.ForwardingPipelineConfig) error {
		_, err := r.c.SetForwardingPipelineConfig(context.Background(), &p4.SetForwardingPipelineConfigRequest{DeviceId: 1, ElectionId: cl.election, Action: a, Config: cfg})
		return err
	}
	smaller := proto.Clone(info).(*p4cfg.P4Info)
	smaller.Registers[0].Size = 8
	noTable := proto.Clone(info).(*p4cfg.P4Info)
	noTable.Tables = noTable.Tables[1:]
	big := p4infotest.Switch()
	big.Registers[0].Size = 1 << 24
	bigDC, _ := p4gen.EncodeJSON(big)
	for _, c := range []struct {
		name string
		a    p4.SetForwardingPipelineConfigRequest_Action
		cfg  *p4.ForwardingPipelineConfig
		want codes.Code
	}{
		{"no config", p4.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT, nil, codes.InvalidArgument},
		{"no device config", p4.SetForwardingPipelineConfigRequest_VERIFY, &p4.ForwardingPipelineConfig{P4Info: info}, codes.InvalidArgument},
		{"not JSON", p4.SetForwardingPipelineConfigRequest_VERIFY, &p4.ForwardingPipelineConfig{P4Info: info, P4DeviceConfig: []byte("{")}, codes.InvalidArgument},
		{"a P4Info of another size", p4.SetForwardingPipelineConfigRequest_VERIFY, &p4.ForwardingPipelineConfig{P4Info: smaller, P4DeviceConfig: dc}, codes.InvalidArgument},
		{"a P4Info without a table", p4.SetForwardingPipelineConfigRequest_VERIFY, &p4.ForwardingPipelineConfig{P4Info: noTable, P4DeviceConfig: dc}, codes.InvalidArgument},
		{"a program too big for the switch", p4.SetForwardingPipelineConfigRequest_VERIFY, &p4.ForwardingPipelineConfig{P4Info: p4infotest.P4Info(big), P4DeviceConfig: bigDC}, codes.InvalidArgument},
		{"commit without a save", p4.SetForwardingPipelineConfigRequest_COMMIT, nil, codes.NotFound},
		{"no action", p4.SetForwardingPipelineConfigRequest_UNSPECIFIED, &p4.ForwardingPipelineConfig{P4Info: info, P4DeviceConfig: dc}, codes.InvalidArgument},
		{"a good verify", p4.SetForwardingPipelineConfigRequest_VERIFY, &p4.ForwardingPipelineConfig{P4Info: info, P4DeviceConfig: dc}, codes.OK},
		{"a save", p4.SetForwardingPipelineConfigRequest_VERIFY_AND_SAVE, &p4.ForwardingPipelineConfig{P4Info: info, P4DeviceConfig: dc}, codes.OK},
		{"commit with a config", p4.SetForwardingPipelineConfigRequest_COMMIT, &p4.ForwardingPipelineConfig{P4Info: info, P4DeviceConfig: dc}, codes.InvalidArgument},
		{"commit", p4.SetForwardingPipelineConfigRequest_COMMIT, nil, codes.OK},
	} {
		if err := set(c.a, c.cfg); status.Code(err) != c.want {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if !r.dev.Loaded() {
		t.Fatal("COMMIT left no pipeline")
	}
	// RECONCILE_AND_COMMIT keeps the entries and the register cells.
	x := ids{info}
	if err := r.write(cl, tableUpdate(p4.Update_INSERT, &p4.TableEntry{TableId: x.table("route"), Match: []*p4.FieldMatch{exact(1, []byte{10, 0, 0, 2})}, Action: act(x.action("fwd"), []byte{6})})); err != nil {
		t.Fatal(err)
	}
	r.dev.Receive(1, udp([4]byte{10, 0, 0, 2}, 1000, 53), 0)
	if err := set(p4.SetForwardingPipelineConfigRequest_RECONCILE_AND_COMMIT, &p4.ForwardingPipelineConfig{P4Info: info, P4DeviceConfig: dc}); err != nil {
		t.Fatal(err)
	}
	es, err := r.read(&p4.Entity{Entity: &p4.Entity_TableEntry{TableEntry: &p4.TableEntry{}}},
		&p4.Entity{Entity: &p4.Entity_RegisterEntry{RegisterEntry: &p4.RegisterEntry{RegisterId: x.of("register"), Index: &p4.Index{Index: 1000 % 16}}}})
	if err != nil || len(es) != 2 || string(es[1].GetRegisterEntry().GetData().GetBitstring()) != "\x01" {
		t.Errorf("after RECONCILE_AND_COMMIT: %v, %v", es, err)
	}
	r.dev.Receive(1, udp([4]byte{10, 0, 0, 2}, 1000, 53), 1)
	if len(r.frames(6)) != 2 {
		t.Errorf("%d frames on port 6, want the entry to work before and after", len(r.frames(6)))
	}
}
