// Package server serves P4Runtime for the PISA model (flowspaces/p4/pisa),
// as bmv2's simple_switch_grpc serves it for bmv2: the control path of
// the P4 switch flowspace (DESIGN.md §13), so that a controller written
// against it drives a hardware switch by changing an address.
//
// It arbitrates clients by election id on the stream (the primary alone
// writes; a lower election id writing gets PERMISSION_DENIED), takes a
// forwarding pipeline whose device config is the program as p4gen's JSON
// checked against its P4Info (VERIFY, VERIFY_AND_SAVE, VERIFY_AND_COMMIT,
// COMMIT, RECONCILE_AND_COMMIT), reads and writes table entries (exact,
// ternary, LPM and range keys, priorities, the default action, wildcard
// reads), register and counter cells and clone sessions, configures
// digests and streams them as DigestLists (acknowledged, deduplicated),
// and carries PacketIn and PacketOut with their controller metadata.
// Malformed requests get the status the spec names, never a crash.
//
// The sharp edge: register reads are the model's (bmv2 does not serve
// them, p4lang/PI#376); a controller that must also drive bmv2 reads
// counters and digests instead.
package server

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	p4cfg "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/genproto/googleapis/rpc/code"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/ffpf-go/ffpf/flowspaces/p4/pisa"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// APIVersion is the P4Runtime version served.
const APIVersion = "1.4.1"

// Server is a P4Runtime server for one device.
type Server struct {
	p4.UnimplementedP4RuntimeServer

	deviceID uint64
	dev      *pisa.Device
	prof     p4gen.Profile
	// Now is the switch's clock (µs), for packets the controller sends.
	now func() uint64

	mu        sync.Mutex
	streams   map[*stream]bool
	roles     map[string]*role
	committed *pipeline
	saved     *pipeline // VERIFY_AND_SAVE'd, not yet committed
	dig       *digester
	// what the datapath's callbacks read (published)
	livePrimary  atomic.Pointer[stream]
	livePipeline atomic.Pointer[pipeline]

	// Log, when set, gets one line per event worth telling the operator
	// (a pipeline committed, a primary elected).
	Log func(format string, args ...any)
}

// role is the arbitration state of one (device, role).
type role struct {
	highest *p4.Uint128 // the highest election id ever seen; nil: none
	primary *stream
}

// Options configure a Server.
type Options struct {
	DeviceID uint64
	Profile  p4gen.Profile
	// Now returns the switch's clock in µs.
	Now func() uint64
}

// New returns a server for dev; Register it on a grpc.Server.
func New(dev *pisa.Device, o Options) *Server {
	s := &Server{deviceID: o.DeviceID, dev: dev, prof: o.Profile, now: o.Now,
		streams: map[*stream]bool{}, roles: map[string]*role{}}
	if s.now == nil {
		s.now = func() uint64 { return 0 }
	}
	s.dig = newDigester(s)
	dev.Digest = s.dig.fromDevice
	dev.PacketIn = s.packetIn
	return s
}

// Register adds the P4Runtime service to g.
func (s *Server) Register(g *grpc.Server) { p4.RegisterP4RuntimeServer(g, s) }

// Close stops the server's background work.
func (s *Server) Close() { s.dig.close() }

func (s *Server) logf(format string, args ...any) {
	if s.Log != nil {
		s.Log(format, args...)
	}
}

func less(a, b *p4.Uint128) bool {
	if a == nil {
		return b != nil
	}
	if b == nil {
		return false
	}
	return a.High < b.High || a.High == b.High && a.Low < b.Low
}

func same(a, b *p4.Uint128) bool {
	return a != nil && b != nil && a.High == b.High && a.Low == b.Low
}

// Capabilities answers with the version served.
func (s *Server) Capabilities(context.Context, *p4.CapabilitiesRequest) (*p4.CapabilitiesResponse, error) {
	return &p4.CapabilitiesResponse{P4RuntimeApiVersion: APIVersion}, nil
}

// checkWriter applies the checks every mutating RPC starts with: the
// device, the role, and that the client is the primary.
func (s *Server) checkWriter(device uint64, roleName string, election *p4.Uint128) error {
	if device != s.deviceID {
		return status.Errorf(codes.NotFound, "no device %d (this is device %d)", device, s.deviceID)
	}
	r := s.roles[roleName]
	if r == nil {
		if roleName != "" {
			return status.Errorf(codes.NotFound, "no client has role %q", roleName)
		}
		return status.Errorf(codes.PermissionDenied, "no primary client: open a stream and send an arbitration update first")
	}
	if r.primary == nil || !same(r.primary.election, election) {
		return status.Errorf(codes.PermissionDenied, "election id %v is not the primary's", fmtID(election))
	}
	return nil
}

func fmtID(id *p4.Uint128) string {
	if id == nil {
		return "(unset)"
	}
	if id.High == 0 {
		return fmt.Sprint(id.Low)
	}
	return fmt.Sprintf("%d:%d", id.High, id.Low)
}

// SetForwardingPipelineConfig verifies, saves or commits a pipeline.
func (s *Server) SetForwardingPipelineConfig(_ context.Context, r *p4.SetForwardingPipelineConfigRequest) (*p4.SetForwardingPipelineConfigResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkWriter(r.GetDeviceId(), r.GetRole(), r.GetElectionId()); err != nil {
		return nil, err
	}
	cfg := r.GetConfig()
	verify := func() (*pipeline, error) {
		if cfg == nil {
			return nil, status.Error(codes.InvalidArgument, "no config given")
		}
		pl, err := newPipeline(cfg.GetP4Info(), cfg.GetP4DeviceConfig(), s.prof)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "the pipeline cannot be realized: %v", err)
		}
		pl.cfgP4Info, _ = proto.Marshal(cfg.GetP4Info())
		if c := cfg.GetCookie(); c != nil {
			pl.cookie, pl.hasCookie = c.GetCookie(), true
		}
		return pl, nil
	}
	switch r.GetAction() {
	case p4.SetForwardingPipelineConfigRequest_VERIFY:
		if _, err := verify(); err != nil {
			return nil, err
		}
	case p4.SetForwardingPipelineConfigRequest_VERIFY_AND_SAVE:
		pl, err := verify()
		if err != nil {
			return nil, err
		}
		s.saved = pl
	case p4.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT:
		pl, err := verify()
		if err != nil {
			return nil, err
		}
		s.commit(pl)
	case p4.SetForwardingPipelineConfigRequest_COMMIT:
		if cfg != nil {
			return nil, status.Error(codes.InvalidArgument, "COMMIT takes no config: it commits the one saved")
		}
		if s.saved == nil {
			return nil, status.Error(codes.NotFound, "no config was saved (VERIFY_AND_SAVE) to commit")
		}
		s.commit(s.saved)
	case p4.SetForwardingPipelineConfigRequest_RECONCILE_AND_COMMIT:
		pl, err := verify()
		if err != nil {
			return nil, err
		}
		if old := s.committed; old != nil {
			if err := s.dev.Do(func(m *pisa.Model) error { return pl.carry(old, m) }); err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "the forwarding state cannot be preserved: %v", err)
			}
		}
		s.commit(pl)
	default:
		return nil, status.Errorf(codes.InvalidArgument, "action %v is not one of VERIFY, VERIFY_AND_SAVE, VERIFY_AND_COMMIT, COMMIT, RECONCILE_AND_COMMIT", r.GetAction())
	}
	return &p4.SetForwardingPipelineConfigResponse{}, nil
}

// commit makes pl the running pipeline.
func (s *Server) commit(pl *pipeline) {
	s.committed, s.saved = pl, nil
	s.published()
	s.dig.reset(pl)
	s.dev.Load(pl.model)
	rep := pl.model.Report()
	s.logf("pipeline %s committed: %d tables, %d registers, %d counters, %d digests; %d of %d stages", pl.prog.Name,
		len(pl.tables), len(pl.regs), len(pl.ctrs), len(pl.digests), rep.Depth, rep.Profile.Stages)
}

// GetForwardingPipelineConfig returns the committed config.
func (s *Server) GetForwardingPipelineConfig(_ context.Context, r *p4.GetForwardingPipelineConfigRequest) (*p4.GetForwardingPipelineConfigResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.GetDeviceId() != s.deviceID {
		return nil, status.Errorf(codes.NotFound, "no device %d (this is device %d)", r.GetDeviceId(), s.deviceID)
	}
	pl := s.committed
	if pl == nil {
		return &p4.GetForwardingPipelineConfigResponse{}, nil
	}
	cfg := &p4.ForwardingPipelineConfig{}
	if pl.hasCookie {
		cfg.Cookie = &p4.ForwardingPipelineConfig_Cookie{Cookie: pl.cookie}
	}
	rt := r.GetResponseType()
	if rt == p4.GetForwardingPipelineConfigRequest_ALL || rt == p4.GetForwardingPipelineConfigRequest_P4INFO_AND_COOKIE {
		cfg.P4Info = proto.Clone(pl.p4info).(*p4cfg.P4Info)
	}
	if rt == p4.GetForwardingPipelineConfigRequest_ALL || rt == p4.GetForwardingPipelineConfigRequest_DEVICE_CONFIG_AND_COOKIE {
		cfg.P4DeviceConfig = append([]byte(nil), pl.devConfig...)
	}
	return &p4.GetForwardingPipelineConfigResponse{Config: cfg}, nil
}

// current is the pipeline reads and writes refer to: the saved one when
// there is one, else the committed one.
func (s *Server) current() *pipeline {
	if s.saved != nil {
		return s.saved
	}
	return s.committed
}

// on runs f on pl's model: under the device's lock when it runs.
func (s *Server) on(pl *pipeline, f func(m *pisa.Model) error) error {
	if pl == s.committed {
		return s.dev.Do(f)
	}
	return f(pl.model)
}

// batchError is the status of a batch some of whose elements failed:
// UNKNOWN, with a p4.Error for every element, OK for those that did not.
func batchError(what string, errs []error) error {
	failed := 0
	st := &rpcstatus.Status{Code: int32(code.Code_UNKNOWN)}
	for _, e := range errs {
		pe := &p4.Error{CanonicalCode: int32(code.Code_OK)}
		if e != nil {
			failed++
			s, _ := status.FromError(e)
			pe = &p4.Error{CanonicalCode: int32(s.Code()), Message: s.Message()}
		}
		a, err := anyOf(pe)
		if err != nil {
			return status.Errorf(codes.Internal, "%v", err)
		}
		st.Details = append(st.Details, a)
	}
	if failed == 0 {
		return nil
	}
	st.Message = fmt.Sprintf("%s: %d of %d failed", what, failed, len(errs))
	for _, e := range errs {
		if e != nil {
			st.Message += ": " + status.Convert(e).Message()
			break
		}
	}
	return status.FromProto(st).Err()
}
