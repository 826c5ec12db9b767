package plugin

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

// The control protocol: go-plugin's handshake and gRPC transport, one
// service (Class) whose messages are the Go values below, encoded by a
// codec of their own (JSON; a batch sent over RPC, the baseline that the
// benchmark measures shared memory against, in binary) registered under
// the content subtype "ffpf". go-plugin's own services (health, broker,
// stdio, controller) stay protobuf. Batches never cross here, except in
// that baseline.

// The handshake an ffpf plugin and ffpf agree on (go-plugin's
// HandshakeConfig): a binary built against another program's cookie, or
// another protocol version, is refused before anything else.
const (
	ProtocolVersion = 1
	CookieKey       = "FFPF_PLUGIN"
	CookieValue     = "function-class"
)

// envSocket names the descriptor (in the plugin) of the unix socket over
// which the rings' and states' descriptors cross.
const envSocket = "FFPF_PLUGIN_SOCKET"

const (
	serviceName = "ffpf.plugin.Class"
	codecName   = "ffpf"
)

type codec struct{}

func (codec) Name() string { return codecName }

func (codec) Marshal(v any) ([]byte, error) {
	if b, ok := v.(*rpcBatch); ok {
		return b.marshal(), nil
	}
	return json.Marshal(v)
}

func (codec) Unmarshal(data []byte, v any) error {
	if b, ok := v.(*rpcBatch); ok {
		return b.unmarshal(data)
	}
	return json.Unmarshal(data, v)
}

func init() { encoding.RegisterCodec(codec{}) }

// Messages. A reply's Err is a sentence of the class's (a parameter it
// refuses, a function it cannot instantiate): an error of the class, not
// of the transport.

type empty struct{}

type schemaReply struct{ Schema schema }

type argsMsg struct {
	Params []functions.Arg
}

type checkArgRequest struct {
	Name  string
	Value functions.Raw
}

type errReply struct{ Err string }

type lenOfRequest struct {
	Field  string
	Params []functions.Arg
}

type lenOfReply struct {
	N   int
	Err string
}

type orderedReply struct {
	Ordered []bool // per ordering of the class, whether the parameters have its setting
	Err     string
}

type contextMsg struct {
	ID        string
	Params    []functions.Arg
	LinkType  functions.LinkType
	Snaplen   int
	Flowspace string
	Captures  []functions.Capture
}

type instantiateRequest struct {
	Ctx   contextMsg
	Token uint64 // the tag of the descriptors sent over the socket before
	State int    // bytes of state (the memfd's size), 0 for none
}

type instantiateReply struct {
	Instance uint64
	Handlers []handlerInfo
	Err      string
}

type handlerInfo struct{ Name, Summary string }

type callRequest struct {
	Instance uint64
	Handler  string
	Arg      string
}

type callReply struct {
	Result json.RawMessage
	Err    string
}

type instanceMsg struct{ Instance uint64 }

// rpcBatch is a batch sent over RPC, packets and all: the baseline.
type rpcBatch struct {
	Instance uint64
	Now      int64
	Dropped  uint32
	E        []buffers.Entry
	Packets  [][]byte // request: per entry
	Wire     []uint32
	TS       []int64
}

func (b *rpcBatch) marshal() []byte {
	n := len(b.E)
	size := 24 + n*24
	for _, p := range b.Packets {
		size += len(p)
	}
	out := make([]byte, 0, size)
	out = binary.LittleEndian.AppendUint64(out, b.Instance)
	out = binary.LittleEndian.AppendUint64(out, uint64(b.Now))
	out = binary.LittleEndian.AppendUint32(out, b.Dropped)
	out = binary.LittleEndian.AppendUint32(out, uint32(n))
	for i, e := range b.E {
		out = binary.LittleEndian.AppendUint32(out, e.Slot)
		out = binary.LittleEndian.AppendUint32(out, e.Class)
		if len(b.Packets) == n {
			out = binary.LittleEndian.AppendUint32(out, b.Wire[i])
			out = binary.LittleEndian.AppendUint64(out, uint64(b.TS[i]))
			out = binary.LittleEndian.AppendUint32(out, uint32(len(b.Packets[i])))
			out = append(out, b.Packets[i]...)
		}
	}
	return out
}

func (b *rpcBatch) unmarshal(d []byte) error {
	bad := errors.New("plugin: a malformed batch")
	if len(d) < 24 {
		return bad
	}
	b.Instance = binary.LittleEndian.Uint64(d)
	b.Now = int64(binary.LittleEndian.Uint64(d[8:]))
	b.Dropped = binary.LittleEndian.Uint32(d[16:])
	n := int(binary.LittleEndian.Uint32(d[20:]))
	if n > buffers.MaxBatch {
		return bad
	}
	d = d[24:]
	b.E = b.E[:0]
	b.Packets, b.Wire, b.TS = b.Packets[:0], b.Wire[:0], b.TS[:0]
	withPackets := len(d) > 8*n
	for range n {
		if len(d) < 8 {
			return bad
		}
		b.E = append(b.E, buffers.Entry{Slot: binary.LittleEndian.Uint32(d), Class: binary.LittleEndian.Uint32(d[4:])})
		d = d[8:]
		if !withPackets {
			continue
		}
		if len(d) < 16 {
			return bad
		}
		b.Wire = append(b.Wire, binary.LittleEndian.Uint32(d))
		b.TS = append(b.TS, int64(binary.LittleEndian.Uint64(d[4:])))
		l := int(binary.LittleEndian.Uint32(d[12:]))
		d = d[16:]
		if len(d) < l {
			return bad
		}
		b.Packets = append(b.Packets, d[:l])
		d = d[l:]
	}
	return nil
}

// The service, described by hand: its handlers decode a request with the
// codec and call the server's method.

type classService interface {
	schema() (*schemaReply, error)
	checkArg(*checkArgRequest) (*errReply, error)
	lenOf(*lenOfRequest) (*lenOfReply, error)
	ordered(*argsMsg) (*orderedReply, error)
	validate(*contextMsg) (*errReply, error)
	instantiate(*instantiateRequest) (*instantiateReply, error)
	call(*callRequest) (*callReply, error)
	closeInstance(*instanceMsg) (*errReply, error)
	batch(*rpcBatch) (*rpcBatch, error)
}

func method[Req, Rep any](name string, f func(classService, *Req) (*Rep, error)) grpc.MethodDesc {
	return grpc.MethodDesc{MethodName: name,
		Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			req := new(Req)
			if err := dec(req); err != nil {
				return nil, err
			}
			h := func(_ context.Context, r any) (any, error) { return f(srv.(classService), r.(*Req)) }
			if icpt == nil {
				return h(ctx, req)
			}
			return icpt(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/" + serviceName + "/" + name}, h)
		}}
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*classService)(nil),
	Methods: []grpc.MethodDesc{
		method("Schema", func(s classService, _ *empty) (*schemaReply, error) { return s.schema() }),
		method("CheckArg", classService.checkArg),
		method("LenOf", classService.lenOf),
		method("Ordered", classService.ordered),
		method("Validate", classService.validate),
		method("Instantiate", classService.instantiate),
		method("Call", classService.call),
		method("Close", classService.closeInstance),
		method("Batch", classService.batch),
	},
}

// rpc is the client of the service.
type rpc struct{ cc *grpc.ClientConn }

func (c *rpc) invoke(ctx context.Context, name string, req, rep any) error {
	if err := c.cc.Invoke(ctx, "/"+serviceName+"/"+name, req, rep, grpc.CallContentSubtype(codecName)); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
