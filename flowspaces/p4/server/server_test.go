package server

import (
	"context"
	"encoding/binary"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	p4cfg "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/ffpf-go/ffpf/flowspaces/p4/pisa"
	"github.com/ffpf-go/ffpf/flowspaces/p4/server/p4infotest"
	"github.com/ffpf-go/ffpf/functions/p4gen"
	"github.com/ffpf-go/ffpf/functions/p4gen/p4gentest"
	"github.com/ffpf-go/ffpf/functions/p4gen/p4info"
)

// rig is a switch serving P4Runtime on a loopback port, and a client.
type rig struct {
	t    testing.TB
	dev  *pisa.Device
	srv  *Server
	c    p4.P4RuntimeClient
	conn *grpc.ClientConn

	mu  sync.Mutex
	out map[uint16][][]byte // frames that left, by port
}

func newRig(t testing.TB) *rig {
	t.Helper()
	r := &rig{t: t, out: map[uint16][][]byte{}}
	r.dev = pisa.NewDevice(255, nil, 0)
	r.dev.Out = func(port uint16, f []byte) {
		r.mu.Lock()
		r.out[port] = append(r.out[port], append([]byte(nil), f...))
		r.mu.Unlock()
	}
	r.srv = New(r.dev, Options{DeviceID: 1, Profile: p4gen.Tofino1()})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	r.srv.Register(g)
	go g.Serve(ln)
	r.conn, err = grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	r.c = p4.NewP4RuntimeClient(r.conn)
	t.Cleanup(func() {
		r.conn.Close()
		g.Stop()
		r.srv.Close()
	})
	return r
}

func (r *rig) frames(port uint16) [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.out[port])
}

// client is one controller's stream.
type client struct {
	t        testing.TB
	s        p4.P4Runtime_StreamChannelClient
	election *p4.Uint128
	msgs     chan *p4.StreamMessageResponse
	held     []*p4.StreamMessageResponse // received, not yet asked for
	err      chan error
	cancel   context.CancelFunc
}

func (r *rig) connect(election uint64) *client {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := r.c.StreamChannel(ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	cl := &client{t: r.t, s: s, election: &p4.Uint128{Low: election}, msgs: make(chan *p4.StreamMessageResponse, 100), err: make(chan error, 1), cancel: cancel}
	r.t.Cleanup(cancel)
	go func() {
		for {
			m, err := s.Recv()
			if err != nil {
				cl.err <- err
				return
			}
			cl.msgs <- m
		}
	}()
	cl.arbitrate(1, election)
	return cl
}

func (cl *client) arbitrate(device, election uint64) {
	if err := cl.s.Send(&p4.StreamMessageRequest{Update: &p4.StreamMessageRequest_Arbitration{
		Arbitration: &p4.MasterArbitrationUpdate{DeviceId: device, ElectionId: &p4.Uint128{Low: election}}}}); err != nil {
		cl.t.Fatal(err)
	}
}

// next returns the first message of the kind wanted; the others stay
// for later calls.
func next[T any](cl *client, pick func(*p4.StreamMessageResponse) (T, bool)) T {
	cl.t.Helper()
	for i, m := range cl.held {
		if v, ok := pick(m); ok {
			cl.held = append(cl.held[:i], cl.held[i+1:]...)
			return v
		}
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case m := <-cl.msgs:
			if v, ok := pick(m); ok {
				return v
			}
			cl.held = append(cl.held, m)
		case err := <-cl.err:
			cl.t.Fatalf("the stream ended: %v", err)
		case <-deadline:
			cl.t.Fatal("no message came within 5 s")
		}
	}
}

func arbitration(m *p4.StreamMessageResponse) (*p4.MasterArbitrationUpdate, bool) {
	a := m.GetArbitration()
	return a, a != nil
}

func (r *rig) push(cl *client, prog *p4gen.Program, action p4.SetForwardingPipelineConfigRequest_Action) error {
	r.t.Helper()
	dc, err := p4gen.EncodeJSON(prog)
	if err != nil {
		r.t.Fatal(err)
	}
	_, err = r.c.SetForwardingPipelineConfig(context.Background(), &p4.SetForwardingPipelineConfigRequest{DeviceId: 1,
		ElectionId: cl.election, Action: action, Config: &p4.ForwardingPipelineConfig{P4Info: p4infotest.P4Info(prog),
			P4DeviceConfig: dc, Cookie: &p4.ForwardingPipelineConfig_Cookie{Cookie: 77}}})
	return err
}

func (r *rig) write(cl *client, us ...*p4.Update) error {
	_, err := r.c.Write(context.Background(), &p4.WriteRequest{DeviceId: 1, ElectionId: cl.election, Updates: us})
	return err
}

func (r *rig) read(es ...*p4.Entity) ([]*p4.Entity, error) {
	rc, err := r.c.Read(context.Background(), &p4.ReadRequest{DeviceId: 1, Entities: es})
	if err != nil {
		return nil, err
	}
	var out []*p4.Entity
	for {
		m, err := rc.Recv()
		if err != nil {
			if status.Code(err) == codes.OK || err.Error() == "EOF" {
				return out, nil
			}
			return out, err
		}
		out = append(out, m.GetEntities()...)
	}
}

// ids resolves P4Info names to ids.
type ids struct{ info *p4cfg.P4Info }

func (x ids) table(n string) uint32 {
	for _, t := range x.info.GetTables() {
		if t.GetPreamble().GetName() == "ffpf_ingress.sw_1_"+n {
			return t.GetPreamble().GetId()
		}
	}
	panic(n)
}

func (x ids) action(n string) uint32 {
	for _, a := range x.info.GetActions() {
		if a.GetPreamble().GetName() == "ffpf_ingress.sw_1_"+n {
			return a.GetPreamble().GetId()
		}
	}
	panic(n)
}

func (x ids) of(kind string) uint32 {
	switch kind {
	case "register":
		return x.info.GetRegisters()[0].GetPreamble().GetId()
	case "counter":
		return x.info.GetCounters()[0].GetPreamble().GetId()
	case "digest":
		return x.info.GetDigests()[0].GetPreamble().GetId()
	}
	for _, c := range x.info.GetControllerPacketMetadata() {
		if c.GetPreamble().GetName() == kind {
			return c.GetPreamble().GetId()
		}
	}
	panic(kind)
}

func exact(id uint32, v []byte) *p4.FieldMatch {
	return &p4.FieldMatch{FieldId: id, FieldMatchType: &p4.FieldMatch_Exact_{Exact: &p4.FieldMatch_Exact{Value: v}}}
}

func act(id uint32, params ...[]byte) *p4.TableAction {
	a := &p4.Action{ActionId: id}
	for i, v := range params {
		a.Params = append(a.Params, &p4.Action_Param{ParamId: uint32(i + 1), Value: v})
	}
	return &p4.TableAction{Type: &p4.TableAction_Action{Action: a}}
}

func tableUpdate(t p4.Update_Type, e *p4.TableEntry) *p4.Update {
	return &p4.Update{Type: t, Entity: &p4.Entity{Entity: &p4.Entity_TableEntry{TableEntry: e}}}
}

// udp builds an Ethernet/IPv4/UDP frame.
func udp(dst [4]byte, sport, dport uint16) []byte {
	b := make([]byte, 14+20+8+6)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
	copy(ip[12:], []byte{10, 0, 0, 1})
	copy(ip[16:], dst[:])
	binary.BigEndian.PutUint16(ip[20:], sport)
	binary.BigEndian.PutUint16(ip[22:], dport)
	return b
}

// TestClient is a controller's whole session: push the program, write
// entries, a clone session and a digest config, send packets, read
// counters, registers and entries back, receive digests and PacketIns,
// send a PacketOut, change the default action, get the config back.
func TestClient(t *testing.T) {
	r := newRig(t)
	cl := r.connect(10)
	if a := next(cl, arbitration); a.GetStatus().GetCode() != int32(codes.OK) {
		t.Fatalf("the only client is not primary: %v", a)
	}
	prog := p4infotest.Switch()
	if err := r.push(cl, prog, p4.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT); err != nil {
		t.Fatal(err)
	}
	x := ids{p4infotest.P4Info(prog)}
	ternary := &p4.FieldMatch{FieldId: 1, FieldMatchType: &p4.FieldMatch_Ternary_{Ternary: &p4.FieldMatch_Ternary{Value: []byte{17}, Mask: []byte{0xff}}}}
	rng := &p4.FieldMatch{FieldId: 2, FieldMatchType: &p4.FieldMatch_Range_{Range: &p4.FieldMatch_Range{Low: []byte{54}, High: []byte{60}}}}
	entries := []*p4.TableEntry{
		{TableId: x.table("route"), Match: []*p4.FieldMatch{exact(1, []byte{10, 0, 0, 2})}, Action: act(x.action("fwd"), []byte{2}), ControllerMetadata: 9},
		{TableId: x.table("route"), Match: []*p4.FieldMatch{exact(1, []byte{10, 0, 0, 3})}, Action: act(x.action("to_cpu"))},
		{TableId: x.table("acl"), Match: []*p4.FieldMatch{ternary, rng}, Priority: 10, Action: act(x.action("fwd"), []byte{3})},
	}
	var us []*p4.Update
	for _, e := range entries {
		us = append(us, tableUpdate(p4.Update_INSERT, e))
	}
	us = append(us,
		&p4.Update{Type: p4.Update_INSERT, Entity: &p4.Entity{Entity: &p4.Entity_PacketReplicationEngineEntry{PacketReplicationEngineEntry: &p4.PacketReplicationEngineEntry{
			Type: &p4.PacketReplicationEngineEntry_CloneSessionEntry{CloneSessionEntry: &p4.CloneSessionEntry{SessionId: 1,
				Replicas: []*p4.Replica{{PortKind: &p4.Replica_Port{Port: []byte{0xff, 0xff, 0xff, 0xfd}}, Instance: 1}}}}}}}},
		&p4.Update{Type: p4.Update_INSERT, Entity: &p4.Entity{Entity: &p4.Entity_DigestEntry{DigestEntry: &p4.DigestEntry{DigestId: x.of("digest"),
			Config: &p4.DigestEntry_Config{MaxTimeoutNs: 0, MaxListSize: 1, AckTimeoutNs: int64(time.Second)}}}}})
	if err := r.write(cl, us...); err != nil {
		t.Fatal(err)
	}

	dns := udp([4]byte{10, 0, 0, 2}, 1000, 53) // route to 2; counted, digest, clone to the CPU
	toCPU := udp([4]byte{10, 0, 0, 3}, 7, 80)  // route to the CPU
	acl := udp([4]byte{10, 0, 0, 9}, 7, 55)    // route misses (drop), acl sends to 3
	miss := udp([4]byte{10, 0, 0, 9}, 7, 80)   // dropped
	for i, f := range [][]byte{dns, toCPU, acl, miss, dns} {
		r.dev.Receive(1, f, uint64(i))
	}
	if got := r.frames(2); len(got) != 2 || string(got[0]) != string(dns) {
		t.Errorf("port 2: %d frames, want the DNS frame twice", len(got))
	}
	if got := r.frames(3); len(got) != 1 || string(got[0]) != string(acl) {
		t.Errorf("port 3: %d frames, want the acl's", len(got))
	}

	// PacketIns: the DNS packet's clone, the routed one, the second clone;
	// each with its ingress port as metadata.
	for i, want := range [][]byte{dns, toCPU, dns} {
		pin := next(cl, func(m *p4.StreamMessageResponse) (*p4.PacketIn, bool) { return m.GetPacket(), m.GetPacket() != nil })
		md := pin.GetMetadata()
		if string(pin.GetPayload()) != string(want) || len(md) != 2 || md[0].GetMetadataId() != 1 || string(md[0].GetValue()) != "\x01" {
			t.Errorf("PacketIn %d: %x %v", i, pin.GetPayload(), md)
		}
	}
	// Digests: {1000, 1}, then {1000, 2}: distinct, each in a list.
	for i := range 2 {
		dl := next(cl, func(m *p4.StreamMessageResponse) (*p4.DigestList, bool) { return m.GetDigest(), m.GetDigest() != nil })
		ms := dl.GetData()[0].GetStruct().GetMembers()
		if dl.GetDigestId() != x.of("digest") || len(dl.GetData()) != 1 || string(ms[0].GetBitstring()) != "\x03\xe8" || string(ms[1].GetBitstring()) != string([]byte{byte(i + 1)}) {
			t.Errorf("digest list %d: %v", i, dl)
		}
		if err := cl.s.Send(&p4.StreamMessageRequest{Update: &p4.StreamMessageRequest_DigestAck{DigestAck: &p4.DigestListAck{DigestId: dl.GetDigestId(), ListId: dl.GetListId()}}}); err != nil {
			t.Fatal(err)
		}
	}

	// Counters and registers read back.
	es, err := r.read(&p4.Entity{Entity: &p4.Entity_CounterEntry{CounterEntry: &p4.CounterEntry{CounterId: x.of("counter")}}},
		&p4.Entity{Entity: &p4.Entity_RegisterEntry{RegisterEntry: &p4.RegisterEntry{RegisterId: x.of("register"), Index: &p4.Index{Index: 1000 % 16}}}},
		&p4.Entity{Entity: &p4.Entity_RegisterEntry{RegisterEntry: &p4.RegisterEntry{RegisterId: x.of("register")}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1+1+16 {
		t.Fatalf("%d entities read, want 1 counter cell, 1 register cell, 16 cells", len(es))
	}
	if d := es[0].GetCounterEntry().GetData(); d.GetPacketCount() != 2 || d.GetByteCount() != int64(2*len(dns)) {
		t.Errorf("counter %v, want 2 packets, %d bytes", d, 2*len(dns))
	}
	if v := es[1].GetRegisterEntry().GetData().GetBitstring(); string(v) != "\x02" {
		t.Errorf("register cell %x, want 2", v)
	}

	// Entries read back as written (wildcard over every table).
	got, err := r.read(&p4.Entity{Entity: &p4.Entity_TableEntry{TableEntry: &p4.TableEntry{}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(entries) {
		t.Fatalf("%d entries read, want %d", len(got), len(entries))
	}
	for _, w := range entries {
		found := false
		for _, g := range got {
			found = found || proto.Equal(g.GetTableEntry(), w)
		}
		if !found {
			t.Errorf("entry %v not read back; read %v", w, got)
		}
	}

	// A PacketOut leaves by the port its metadata names, without the
	// packet_out header.
	po := udp([4]byte{1, 2, 3, 4}, 1, 2)
	if err := cl.s.Send(&p4.StreamMessageRequest{Update: &p4.StreamMessageRequest_Packet{Packet: &p4.PacketOut{Payload: po,
		Metadata: []*p4.PacketMetadata{{MetadataId: 1, Value: []byte{4}}, {MetadataId: 2, Value: []byte{0}}}}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(r.frames(4)) == 1 })
	if string(r.frames(4)[0]) != string(po) {
		t.Errorf("PacketOut left as %x", r.frames(4)[0])
	}

	// The default action changed: a miss now goes to port 5.
	def := &p4.TableEntry{TableId: x.table("route"), IsDefaultAction: true, Action: act(x.action("fwd"), []byte{5})}
	if err := r.write(cl, tableUpdate(p4.Update_MODIFY, def)); err != nil {
		t.Fatal(err)
	}
	r.dev.Receive(1, miss, 10)
	if len(r.frames(5)) != 1 {
		t.Errorf("a miss after the default changed: %d frames on port 5", len(r.frames(5)))
	}
	got, err = r.read(&p4.Entity{Entity: &p4.Entity_TableEntry{TableEntry: &p4.TableEntry{TableId: x.table("route"), IsDefaultAction: true}}})
	if err != nil || len(got) != 1 || !proto.Equal(got[0].GetTableEntry().GetAction(), def.Action) {
		t.Errorf("default entry read back: %v, %v", got, err)
	}

	// Delete, and the config comes back as pushed.
	if err := r.write(cl, tableUpdate(p4.Update_DELETE, &p4.TableEntry{TableId: x.table("route"), Match: entries[0].Match})); err != nil {
		t.Fatal(err)
	}
	gc, err := r.c.GetForwardingPipelineConfig(context.Background(), &p4.GetForwardingPipelineConfigRequest{DeviceId: 1})
	if err != nil {
		t.Fatal(err)
	}
	dc, _ := p4gen.EncodeJSON(prog)
	if string(gc.GetConfig().GetP4DeviceConfig()) != string(dc) || gc.GetConfig().GetCookie().GetCookie() != 77 || !proto.Equal(gc.GetConfig().GetP4Info(), p4infotest.P4Info(prog)) {
		t.Error("the config read back is not the one pushed")
	}
	caps, err := r.c.Capabilities(context.Background(), &p4.CapabilitiesRequest{})
	if err != nil || caps.GetP4RuntimeApiVersion() != APIVersion {
		t.Errorf("capabilities %v, %v", caps, err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("timed out")
}

// TestElection: the highest election id is the primary; a lower one is a
// backup whose writes are PERMISSION_DENIED, until it takes over with a
// higher id; a duplicate id or another device ends the stream.
func TestElection(t *testing.T) {
	r := newRig(t)
	a := r.connect(10)
	if m := next(a, arbitration); m.GetStatus().GetCode() != int32(codes.OK) {
		t.Fatalf("a: %v", m)
	}
	b := r.connect(5)
	if m := next(b, arbitration); m.GetStatus().GetCode() != int32(codes.AlreadyExists) || m.GetElectionId().GetLow() != 10 {
		t.Fatalf("b, a backup: %v", m)
	}
	prog := p4infotest.Switch()
	if err := r.push(b, prog, p4.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a backup pushed a pipeline: %v", err)
	}
	if err := r.push(a, prog, p4.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT); err != nil {
		t.Fatal(err)
	}
	x := ids{p4infotest.P4Info(prog)}
	e := &p4.TableEntry{TableId: x.table("route"), Match: []*p4.FieldMatch{exact(1, []byte{1})}, Action: act(x.action("drop"))}
	if err := r.write(b, tableUpdate(p4.Update_INSERT, e)); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a backup's write: %v, want PERMISSION_DENIED", err)
	}
	if err := r.write(&client{election: nil}, tableUpdate(p4.Update_INSERT, e)); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a write without an election id: %v", err)
	}
	// b takes over with 20: both hear it, a's writes are refused.
	b.arbitrate(1, 20)
	b.election = &p4.Uint128{Low: 20}
	if m := next(b, arbitration); m.GetStatus().GetCode() != int32(codes.OK) {
		t.Fatalf("b at 20: %v", m)
	}
	if m := next(a, arbitration); m.GetStatus().GetCode() != int32(codes.AlreadyExists) || m.GetElectionId().GetLow() != 20 {
		t.Fatalf("a told of b: %v", m)
	}
	if err := r.write(a, tableUpdate(p4.Update_INSERT, e)); status.Code(err) != codes.PermissionDenied {
		t.Errorf("the old primary's write: %v", err)
	}
	if err := r.write(b, tableUpdate(p4.Update_INSERT, e)); err != nil {
		t.Errorf("the new primary's write: %v", err)
	}
	// A third client with b's id, and one for another device, are refused.
	c := r.connect(20)
	select {
	case err := <-c.err:
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("a duplicate election id: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("a duplicate election id was accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, _ := r.c.StreamChannel(ctx)
	s.Send(&p4.StreamMessageRequest{Update: &p4.StreamMessageRequest_Arbitration{Arbitration: &p4.MasterArbitrationUpdate{DeviceId: 9, ElectionId: &p4.Uint128{Low: 1}}}})
	if _, err := s.Recv(); status.Code(err) != codes.NotFound {
		t.Errorf("another device's stream: %v", err)
	}
	// The primary leaves: a is told there is none.
	b.cancel()
	if m := next(a, arbitration); m.GetStatus().GetCode() != int32(codes.NotFound) {
		t.Errorf("after the primary left: %v", m)
	}
}

// The P4Info the back end writes for a printed program (p4c's names and
// ids) is one the server takes: (cms) > (hll) as the classes lower it is
// pushed with it, and its registers read back by those ids.
func TestPrinterP4Info(t *testing.T) {
	r := newRig(t)
	cl := r.connect(1)
	next(cl, arbitration)
	prog := p4gentest.CMSHLL(t)
	pr, err := p4gen.Print(prog)
	if err != nil {
		t.Fatal(err)
	}
	info := p4info.Of(prog, pr)
	dc, err := p4gen.EncodeJSON(prog)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.SetForwardingPipelineConfig(context.Background(), &p4.SetForwardingPipelineConfigRequest{DeviceId: 1, ElectionId: cl.election,
		Action: p4.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT, Config: &p4.ForwardingPipelineConfig{P4Info: info, P4DeviceConfig: dc}}); err != nil {
		t.Fatal(err)
	}
	cells := 0
	for _, reg := range prog.Registers {
		cells += reg.Size
	}
	es, err := r.read(&p4.Entity{Entity: &p4.Entity_RegisterEntry{RegisterEntry: &p4.RegisterEntry{}}})
	if err != nil || len(es) != cells || len(info.GetRegisters()) != len(prog.Registers) {
		t.Fatalf("%d register cells read (%v), want %d", len(es), err, cells)
	}
	if id := es[0].GetRegisterEntry().GetRegisterId(); id>>24 != 0x16 {
		t.Errorf("register id %#x has not p4c's prefix", id)
	}
}
