package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// Options say which switch to control and how.
type Options struct {
	// Address is the switch's P4Runtime address, host:port.
	Address string
	// DeviceID is the device the switch must be (P4Runtime's device_id).
	DeviceID uint64
	// ElectionID is this controller's election id; zero is 1. The client
	// with the highest is the primary, the only one that may write.
	ElectionID Uint128
	// Timeout bounds the connection and the arbitration, and each call;
	// zero is DefaultTimeout.
	Timeout time.Duration
	// OnDigest receives each digest list in the stream's goroutine; the
	// list is acknowledged when it returns.
	OnDigest func(DigestList)
	// OnPacket receives each PacketIn in the stream's goroutine.
	OnPacket func(PacketIn)
}

// Uint128 is P4Runtime's 128-bit election id.
type Uint128 struct{ High, Low uint64 }

// DefaultTimeout is the timeout of Options.Timeout zero.
const DefaultTimeout = 5 * time.Second

// DigestList is a list of digests the switch sent, each a struct's
// members in the order of its fields.
type DigestList struct {
	Name      string // the digest's P4Info name (its struct type's)
	ID        uint32
	ListID    uint64
	Values    [][]uint64
	Timestamp int64 // ns, the switch's clock
}

// PacketIn is a packet the switch sent to the controller, with its
// controller_packet_metadata by name.
type PacketIn struct {
	Payload  []byte
	Metadata map[string]uint64
}

// Client is a P4Runtime controller of one switch; its methods may be
// called from several goroutines.
type Client struct {
	opts   Options
	conn   *grpc.ClientConn
	rt     p4v1.P4RuntimeClient
	stream p4v1.P4Runtime_StreamChannelClient
	cancel context.CancelFunc
	done   chan struct{} // closed when the stream's goroutine ends

	sendMu sync.Mutex // the stream's Send is not safe for concurrent use

	mu        sync.Mutex
	names     *names            // of the pipeline pushed, nil before
	installed []*p4v1.Entity    // inserted, in order: deleted in reverse on Close
	streamErr error             // why the stream ended
	digests   map[uint32]string // digest id → name
	closed    bool
}

// Dial connects to the switch, opens the stream and wins the
// arbitration: it returns an error with the server's message when the
// switch cannot be reached within the timeout, is another device, or
// has a primary controller with a higher election id.
func Dial(opts Options) (*Client, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.ElectionID == (Uint128{}) {
		opts.ElectionID = Uint128{Low: 1}
	}
	conn, err := grpc.NewClient(opts.Address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("cannot reach the switch at %s: %v", opts.Address, err)
	}
	c := &Client{opts: opts, conn: conn, rt: p4v1.NewP4RuntimeClient(conn), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	// The stream lives as long as the client; the arbitration must be
	// answered within the timeout, or the stream is cancelled.
	timer := time.AfterFunc(opts.Timeout, cancel)
	first, err := c.arbitrate(ctx)
	timedOut := !timer.Stop()
	if err != nil {
		cancel()
		conn.Close()
		if timedOut {
			return nil, fmt.Errorf("the switch at %s did not answer within %v", opts.Address, opts.Timeout)
		}
		return nil, err
	}
	if err := c.checkArbitration(first); err != nil {
		cancel()
		conn.Close()
		return nil, err
	}
	go c.receive()
	return c, nil
}

// arbitrate opens the stream, sends the arbitration request and returns
// the switch's answer.
func (c *Client) arbitrate(ctx context.Context) (*p4v1.MasterArbitrationUpdate, error) {
	s, err := c.rt.StreamChannel(ctx)
	if err != nil {
		return nil, c.callError("open the stream", err)
	}
	c.stream = s
	req := &p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Arbitration{Arbitration: &p4v1.MasterArbitrationUpdate{
		DeviceId:   c.opts.DeviceID,
		ElectionId: &p4v1.Uint128{High: c.opts.ElectionID.High, Low: c.opts.ElectionID.Low},
	}}}
	if err := s.Send(req); err != nil {
		_, err = s.Recv() // the stream's status says why
		return nil, c.callError("arbitrate", err)
	}
	for {
		m, err := s.Recv()
		if err != nil {
			return nil, c.callError("arbitrate", err)
		}
		switch u := m.Update.(type) {
		case *p4v1.StreamMessageResponse_Arbitration:
			return u.Arbitration, nil
		case *p4v1.StreamMessageResponse_Error:
			return nil, fmt.Errorf("the switch at %s refused the arbitration: %s", c.opts.Address, u.Error.Message)
		}
		// Anything else before the arbitration's answer is not for us yet.
	}
}

// checkArbitration checks the switch's answer: the device it is, and
// whether this client is the primary.
func (c *Client) checkArbitration(a *p4v1.MasterArbitrationUpdate) error {
	if a.DeviceId != c.opts.DeviceID {
		return fmt.Errorf("the switch at %s is device %d, not device %d", c.opts.Address, a.DeviceId, c.opts.DeviceID)
	}
	if st := a.Status; st != nil && codes.Code(st.Code) != codes.OK {
		msg := st.Message
		if msg == "" {
			msg = codes.Code(st.Code).String()
		}
		return fmt.Errorf("the switch at %s has another primary controller: %s", c.opts.Address, msg)
	}
	return nil
}

// callError turns a gRPC error into one sentence with the server's
// message.
func (c *Client) callError(what string, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("switch at %s: cannot %s: %v", c.opts.Address, what, err)
	}
	switch st.Code() {
	case codes.Unavailable:
		// gRPC's "connection error: desc = "transport: Error while
		// dialing: dial tcp …: connect: connection refused"": the dial's.
		msg := st.Message()
		if _, dial, ok := strings.Cut(msg, "Error while dialing: "); ok {
			msg = strings.TrimSuffix(dial, `"`)
		}
		return fmt.Errorf("cannot reach the switch at %s: %s", c.opts.Address, msg)
	case codes.Canceled, codes.DeadlineExceeded:
		return fmt.Errorf("the switch at %s did not answer within %v (%s)", c.opts.Address, c.opts.Timeout, what)
	}
	return fmt.Errorf("the switch at %s refused to %s: %s", c.opts.Address, what, st.Message())
}

// receive reads the stream until it ends: digests (acknowledged once
// handled), PacketIn, and arbitration updates.
func (c *Client) receive() {
	defer close(c.done)
	for {
		m, err := c.stream.Recv()
		if err != nil {
			c.mu.Lock()
			if !c.closed {
				c.streamErr = c.callError("keep the stream open", err)
			}
			c.mu.Unlock()
			return
		}
		switch u := m.Update.(type) {
		case *p4v1.StreamMessageResponse_Digest:
			d := u.Digest
			c.mu.Lock()
			name := c.digests[d.DigestId]
			c.mu.Unlock()
			if c.opts.OnDigest != nil {
				c.opts.OnDigest(DigestList{Name: name, ID: d.DigestId, ListID: d.ListId, Values: digestValues(d.Data), Timestamp: d.Timestamp})
			}
			c.send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_DigestAck{
				DigestAck: &p4v1.DigestListAck{DigestId: d.DigestId, ListId: d.ListId}}})
		case *p4v1.StreamMessageResponse_Packet:
			if c.opts.OnPacket != nil {
				c.opts.OnPacket(PacketIn{Payload: u.Packet.Payload, Metadata: c.packetMetadata(u.Packet.Metadata)})
			}
		case *p4v1.StreamMessageResponse_Arbitration:
			if st := u.Arbitration.Status; st != nil && codes.Code(st.Code) != codes.OK {
				c.mu.Lock()
				c.streamErr = fmt.Errorf("the switch at %s made another controller primary: %s", c.opts.Address, st.Message)
				c.mu.Unlock()
			}
		case *p4v1.StreamMessageResponse_Error:
			c.mu.Lock()
			c.streamErr = fmt.Errorf("the switch at %s reported: %s", c.opts.Address, u.Error.Message)
			c.mu.Unlock()
		}
	}
}

// send sends one message on the stream.
func (c *Client) send(m *p4v1.StreamMessageRequest) error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	return c.stream.Send(m)
}

// Err returns why the stream ended, or a later arbitration demoted this
// client; nil while it is the primary.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streamErr
}

// digestValues decodes a digest list's entries: structs (or tuples) of
// bit strings, or a single bit string.
func digestValues(data []*p4v1.P4Data) [][]uint64 {
	out := make([][]uint64, 0, len(data))
	for _, d := range data {
		var members []*p4v1.P4Data
		switch x := d.Data.(type) {
		case *p4v1.P4Data_Struct:
			members = x.Struct.Members
		case *p4v1.P4Data_Tuple:
			members = x.Tuple.Members
		default:
			members = []*p4v1.P4Data{d}
		}
		vals := make([]uint64, len(members))
		for i, m := range members {
			if b, ok := m.Data.(*p4v1.P4Data_Bitstring); ok {
				vals[i] = Uint(b.Bitstring)
			}
		}
		out = append(out, vals)
	}
	return out
}

func (c *Client) timeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), c.opts.Timeout)
}

// Close removes what the client installed (in the reverse order), ends
// the stream and the connection. The first error of a removal is
// returned; the others are attempted all the same.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	inst := c.installed
	c.installed = nil
	c.mu.Unlock()
	var first error
	for i := len(inst) - 1; i >= 0; i-- {
		if err := c.write(p4v1.Update_DELETE, inst[i]); err != nil && first == nil {
			first = err
		}
	}
	c.sendMu.Lock()
	c.stream.CloseSend()
	c.sendMu.Unlock()
	c.cancel()
	<-c.done
	c.conn.Close()
	return first
}

// Installed returns how many entities the client inserted and has not
// removed.
func (c *Client) Installed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.installed)
}

var errNoPipeline = errors.New("no pipeline pushed yet")
