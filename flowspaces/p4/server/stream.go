package server

import (
	"errors"
	"io"
	"sync/atomic"

	p4 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/genproto/googleapis/rpc/code"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// stream is one client's StreamChannel.
type stream struct {
	out      chan *p4.StreamMessageResponse
	done     chan struct{}
	live     bool // sent a successful arbitration update
	device   uint64
	role     string
	election *p4.Uint128
	dropped  atomic.Uint64 // messages lost because the client read too slowly
}

// streamBuffer is how many messages wait for a slow client before the
// newest are dropped (counted): packets and digests never block the
// switch.
const streamBuffer = 1024

func anyOf(m proto.Message) (*anypb.Any, error) { return anypb.New(m) }

// send queues m for the client without blocking.
func (st *stream) send(m *p4.StreamMessageResponse) {
	select {
	case st.out <- m:
	default:
		st.dropped.Add(1)
	}
}

// StreamChannel serves one client's stream: arbitration, PacketOut,
// digest acknowledgements in; arbitration updates, PacketIn, DigestList
// and stream errors out.
func (s *Server) StreamChannel(ch p4.P4Runtime_StreamChannelServer) error {
	st := &stream{out: make(chan *p4.StreamMessageResponse, streamBuffer), done: make(chan struct{})}
	sendErr := make(chan error, 1)
	go func() {
		for {
			select {
			case m := <-st.out:
				if err := ch.Send(m); err != nil {
					sendErr <- err
					return
				}
			case <-st.done:
				return
			}
		}
	}()
	defer func() {
		close(st.done)
		s.mu.Lock()
		s.leave(st)
		s.mu.Unlock()
	}()
	for {
		m, err := ch.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case err := <-sendErr:
			return err
		default:
		}
		switch u := m.GetUpdate().(type) {
		case *p4.StreamMessageRequest_Arbitration:
			s.mu.Lock()
			err := s.arbitrate(st, u.Arbitration)
			s.mu.Unlock()
			if err != nil {
				return err
			}
		case *p4.StreamMessageRequest_Packet:
			s.packetOut(st, u.Packet)
		case *p4.StreamMessageRequest_DigestAck:
			s.dig.ack(st, u.DigestAck)
		default:
			st.send(streamError(codes.Unimplemented, "this stream message is not served", nil))
		}
	}
}

// arbitrate applies a MasterArbitrationUpdate (the spec's rules).
func (s *Server) arbitrate(st *stream, a *p4.MasterArbitrationUpdate) error {
	roleName := a.GetRole().GetName()
	if a.GetRole().GetConfig() != nil {
		return status.Error(codes.InvalidArgument, "role configs are not served: leave role.config unset for full access")
	}
	if !st.live {
		if a.GetDeviceId() != s.deviceID {
			return status.Errorf(codes.NotFound, "no device %d (this is device %d)", a.GetDeviceId(), s.deviceID)
		}
	} else {
		if a.GetDeviceId() != st.device {
			return status.Errorf(codes.FailedPrecondition, "this stream is for device %d, not %d", st.device, a.GetDeviceId())
		}
		if roleName != st.role {
			return status.Errorf(codes.FailedPrecondition, "this stream has role %q; open another stream for role %q", st.role, roleName)
		}
	}
	if id := a.GetElectionId(); id != nil {
		for o := range s.streams {
			if o != st && o.role == roleName && same(o.election, id) {
				return status.Errorf(codes.InvalidArgument, "election id %s is another live client's", fmtID(id))
			}
		}
	}
	r := s.roles[roleName]
	if r == nil {
		r = &role{}
		s.roles[roleName] = r
	}
	wasPrimary := r.primary == st
	st.live, st.device, st.role, st.election = true, a.GetDeviceId(), roleName, a.GetElectionId()
	s.streams[st] = true
	id := a.GetElectionId()
	if id != nil && !less(id, r.highest) {
		// Primary (or still): everyone hears of it.
		r.highest = id
		r.primary = st
		s.published()
		if !wasPrimary {
			s.logf("client with election id %s is the primary", fmtID(id))
		}
		s.notify(r, roleName, nil)
		return nil
	}
	if wasPrimary {
		r.primary = nil
		s.published()
		s.notify(r, roleName, nil)
		return nil
	}
	s.notify(r, roleName, st)
	return nil
}

// notify sends the arbitration state of a role to only (or to all its
// clients when only is nil).
func (s *Server) notify(r *role, roleName string, only *stream) {
	for o := range s.streams {
		if o.role != roleName || (only != nil && o != only) {
			continue
		}
		c := code.Code_NOT_FOUND
		switch {
		case r.primary == o:
			c = code.Code_OK
		case r.primary != nil:
			c = code.Code_ALREADY_EXISTS
		}
		u := &p4.MasterArbitrationUpdate{DeviceId: s.deviceID, ElectionId: r.highest, Status: &rpcstatus.Status{Code: int32(c)}}
		if roleName != "" {
			u.Role = &p4.Role{Name: roleName}
		}
		o.send(&p4.StreamMessageResponse{Update: &p4.StreamMessageResponse_Arbitration{Arbitration: u}})
	}
}

// leave forgets a closed stream; a primary leaving is told to the rest.
func (s *Server) leave(st *stream) {
	if !s.streams[st] {
		return
	}
	delete(s.streams, st)
	r := s.roles[st.role]
	if r != nil && r.primary == st {
		r.primary = nil
		s.published()
		s.logf("the primary client left")
		s.notify(r, st.role, nil)
	}
}

// primary returns the default role's primary stream, or nil.
func (s *Server) primary() *stream {
	if r := s.roles[""]; r != nil {
		return r.primary
	}
	return nil
}

// published makes the primary and the committed pipeline visible to the
// datapath's callbacks, which run under the device's lock and so cannot
// take the server's (s.mu is held).
func (s *Server) published() {
	s.livePrimary.Store(s.primary())
	s.livePipeline.Store(s.committed)
}

func streamError(c codes.Code, msg string, po *p4.PacketOut) *p4.StreamMessageResponse {
	e := &p4.StreamError{CanonicalCode: int32(c), Message: msg}
	if po != nil {
		e.Details = &p4.StreamError_PacketOut{PacketOut: &p4.PacketOutError{PacketOut: po}}
	}
	return &p4.StreamMessageResponse{Update: &p4.StreamMessageResponse_Error{Error: e}}
}

// packetOut sends a controller's packet into the switch through the CPU
// port, its metadata made into the packet_out header before it.
func (s *Server) packetOut(st *stream, po *p4.PacketOut) {
	s.mu.Lock()
	pl := s.committed
	isPrimary := s.primary() == st
	s.mu.Unlock()
	switch {
	case !isPrimary:
		st.send(streamError(codes.PermissionDenied, "only the primary client sends packets", po))
		return
	case pl == nil:
		st.send(streamError(codes.FailedPrecondition, "no pipeline is committed", po))
		return
	}
	hdr, err := encodeMeta(pl.pktOut, po.GetMetadata())
	if err != nil {
		st.send(streamError(status.Code(err), status.Convert(err).Message(), po))
		return
	}
	frame := append(hdr, po.GetPayload()...)
	s.dev.Receive(s.dev.CPUPort(), frame, s.now())
}

// packetIn strips a frame sent to the CPU port of its packet_in header
// and sends it to the primary client (under the device's lock: it must
// not block).
func (s *Server) packetIn(frame []byte) {
	st, pl := s.livePrimary.Load(), s.livePipeline.Load()
	if st == nil || pl == nil {
		return
	}
	md, payload, ok := decodeMeta(pl.pktIn, frame)
	if !ok {
		st.send(streamError(codes.Internal, "a frame to the CPU port is shorter than its packet_in header", nil))
		return
	}
	st.send(&p4.StreamMessageResponse{Update: &p4.StreamMessageResponse_Packet{
		Packet: &p4.PacketIn{Payload: payload, Metadata: md}}})
}
