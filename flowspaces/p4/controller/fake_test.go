package controller

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"

	p4cfg "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// fake is a small P4Runtime server of our own for the client's tests: it
// arbitrates, keeps what is written, serves counter and register reads
// from fixed values, and sends digests and packets when a test asks. The
// PISA model's server (flowspaces/p4/server) is the real one.
type fake struct {
	p4v1.UnimplementedP4RuntimeServer
	device uint64
	// answerAs, when set, is the device id the arbitration answers with.
	answerAs uint64
	refuse   string // SetForwardingPipelineConfig's refusal, when set

	mu       sync.Mutex
	primary  *p4v1.Uint128
	pipeline *p4v1.ForwardingPipelineConfig
	actions  []p4v1.SetForwardingPipelineConfigRequest_Action
	entities []*p4v1.Entity
	counters map[uint32][]*p4v1.CounterData
	regs     map[uint32][]uint64
	streams  []p4v1.P4Runtime_StreamChannelServer
	acks     chan *p4v1.DigestListAck
	outs     chan *p4v1.PacketOut
}

func startFake(t *testing.T, f *fake) string {
	t.Helper()
	f.acks = make(chan *p4v1.DigestListAck, 16)
	f.outs = make(chan *p4v1.PacketOut, 16)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	p4v1.RegisterP4RuntimeServer(s, f)
	go s.Serve(l)
	t.Cleanup(s.Stop)
	return l.Addr().String()
}

func higher(a, b *p4v1.Uint128) bool {
	return a.High > b.High || a.High == b.High && a.Low > b.Low
}

func (f *fake) StreamChannel(s p4v1.P4Runtime_StreamChannelServer) error {
	for {
		m, err := s.Recv()
		if err != nil {
			return nil
		}
		switch u := m.Update.(type) {
		case *p4v1.StreamMessageRequest_Arbitration:
			a := u.Arbitration
			if f.answerAs == 0 && a.DeviceId != f.device {
				return status.Errorf(codes.NotFound, "this switch is device %d, not %d", f.device, a.DeviceId)
			}
			f.mu.Lock()
			code, msg := codes.OK, "primary"
			if f.primary == nil || higher(a.ElectionId, f.primary) {
				f.primary = a.ElectionId
				f.streams = append(f.streams, s)
			} else {
				code, msg = codes.AlreadyExists, fmt.Sprintf("election id %d is primary", f.primary.Low)
			}
			f.mu.Unlock()
			dev := a.DeviceId
			if f.answerAs != 0 {
				dev = f.answerAs
			}
			s.Send(&p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Arbitration{Arbitration: &p4v1.MasterArbitrationUpdate{
				DeviceId: dev, ElectionId: a.ElectionId, Status: &rpcstatus.Status{Code: int32(code), Message: msg}}}})
		case *p4v1.StreamMessageRequest_DigestAck:
			f.acks <- u.DigestAck
		case *p4v1.StreamMessageRequest_Packet:
			f.outs <- u.Packet
		}
	}
}

func (f *fake) checkPrimary(id *p4v1.Uint128) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.primary == nil || !proto.Equal(id, f.primary) {
		return status.Error(codes.PermissionDenied, "not the primary controller")
	}
	return nil
}

func (f *fake) SetForwardingPipelineConfig(_ context.Context, r *p4v1.SetForwardingPipelineConfigRequest) (*p4v1.SetForwardingPipelineConfigResponse, error) {
	if err := f.checkPrimary(r.ElectionId); err != nil {
		return nil, err
	}
	if f.refuse != "" {
		return nil, status.Error(codes.InvalidArgument, f.refuse)
	}
	f.mu.Lock()
	f.actions = append(f.actions, r.Action)
	if r.Config != nil {
		f.pipeline = r.Config
	}
	f.mu.Unlock()
	return &p4v1.SetForwardingPipelineConfigResponse{}, nil
}

func (f *fake) Write(_ context.Context, r *p4v1.WriteRequest) (*p4v1.WriteResponse, error) {
	if err := f.checkPrimary(r.ElectionId); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, u := range r.Updates {
		switch u.Type {
		case p4v1.Update_INSERT:
			for _, e := range f.entities {
				if proto.Equal(e, u.Entity) {
					return nil, status.Error(codes.AlreadyExists, "the entity exists")
				}
			}
			f.entities = append(f.entities, u.Entity)
		case p4v1.Update_MODIFY:
			switch x := u.Entity.Entity.(type) {
			case *p4v1.Entity_CounterEntry:
				f.counters[x.CounterEntry.CounterId][x.CounterEntry.Index.Index] = x.CounterEntry.Data
			case *p4v1.Entity_RegisterEntry:
				f.regs[x.RegisterEntry.RegisterId][x.RegisterEntry.Index.Index] = Uint(x.RegisterEntry.Data.GetBitstring())
			}
		case p4v1.Update_DELETE:
			found := false
			for i, e := range f.entities {
				if proto.Equal(e, u.Entity) {
					f.entities = append(f.entities[:i], f.entities[i+1:]...)
					found = true
					break
				}
			}
			if !found {
				return nil, status.Error(codes.NotFound, "no such entity")
			}
		}
	}
	return &p4v1.WriteResponse{}, nil
}

func (f *fake) Read(r *p4v1.ReadRequest, s p4v1.P4Runtime_ReadServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*p4v1.Entity
	for _, e := range r.Entities {
		switch x := e.Entity.(type) {
		case *p4v1.Entity_CounterEntry:
			cells, ok := f.counters[x.CounterEntry.CounterId]
			if !ok {
				return status.Error(codes.NotFound, "no such counter")
			}
			for i, c := range cells {
				out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_CounterEntry{CounterEntry: &p4v1.CounterEntry{
					CounterId: x.CounterEntry.CounterId, Index: &p4v1.Index{Index: int64(i)}, Data: c}}})
			}
		case *p4v1.Entity_RegisterEntry:
			cells, ok := f.regs[x.RegisterEntry.RegisterId]
			if !ok {
				return status.Error(codes.Unimplemented, "register reads are not served")
			}
			for i, c := range cells {
				out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_RegisterEntry{RegisterEntry: &p4v1.RegisterEntry{
					RegisterId: x.RegisterEntry.RegisterId, Index: &p4v1.Index{Index: int64(i)},
					Data: &p4v1.P4Data{Data: &p4v1.P4Data_Bitstring{Bitstring: Bytes(c, 32)}}}}})
			}
		}
	}
	// Two responses, to check the client reads the stream to its end.
	half := len(out) / 2
	s.Send(&p4v1.ReadResponse{Entities: out[:half]})
	return s.Send(&p4v1.ReadResponse{Entities: out[half:]})
}

// stream returns the primary's stream.
func (f *fake) stream() p4v1.P4Runtime_StreamChannelServer {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.streams[len(f.streams)-1]
}

func (f *fake) installed() []*p4v1.Entity {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*p4v1.Entity(nil), f.entities...)
}

// testInfo is a P4Info of one table (two keys, ternary and exact), one
// action, a counter, a register, a digest and the CPU port's metadata.
func testInfo() *p4cfg.P4Info {
	pre := func(id uint32, name string) *p4cfg.Preamble { return &p4cfg.Preamble{Id: id, Name: name} }
	return &p4cfg.P4Info{
		Tables: []*p4cfg.Table{{Preamble: pre(0x02000001, "ffpf_ingress.bpf_1_t"), MatchFields: []*p4cfg.MatchField{
			{Id: 1, Name: "hdr.ipv4.protocol", Bitwidth: 8, Match: &p4cfg.MatchField_MatchType_{MatchType: p4cfg.MatchField_TERNARY}},
			{Id: 2, Name: "hdr.tcp.dst_port", Bitwidth: 16, Match: &p4cfg.MatchField_MatchType_{MatchType: p4cfg.MatchField_EXACT}},
		}}},
		Actions: []*p4cfg.Action{{Preamble: pre(0x01000001, "ffpf_ingress.bpf_1_pass"), Params: []*p4cfg.Action_Param{{Id: 1, Name: "v", Bitwidth: 9}}}},
		Counters: []*p4cfg.Counter{{Preamble: pre(0x12000001, "ffpf_ingress.pktcount_2_c"), Size: 3,
			Spec: &p4cfg.CounterSpec{Unit: p4cfg.CounterSpec_BOTH}}},
		Registers: []*p4cfg.Register{{Preamble: pre(0x16000001, "ffpf_ingress.hll_3_m"), Size: 4}},
		Digests:   []*p4cfg.Digest{{Preamble: pre(0x17000001, "counter_4_report_t")}},
		ControllerPacketMetadata: []*p4cfg.ControllerPacketMetadata{
			{Preamble: pre(0x40000001, "packet_in"), Metadata: []*p4cfg.ControllerPacketMetadata_Metadata{{Id: 1, Name: "ingress_port", Bitwidth: 9}}},
			{Preamble: pre(0x40000002, "packet_out"), Metadata: []*p4cfg.ControllerPacketMetadata_Metadata{{Id: 1, Name: "egress_port", Bitwidth: 9}}},
		},
	}
}
