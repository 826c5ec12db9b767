package export

import (
	"fmt"
	"net"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/internal/udpsend"
)

// Sender is export with to=: each packet that reaches it leaves as one
// UDP datagram to a collector, its captured bytes the datagram's payload
// (MAFIA's collect to an endpoint), and is passed on. A packet the kernel
// does not take at once (a full send buffer) is counted as dropped and
// not passed on; one the collector's host refuses (an ICMP notice: no
// one listens) is counted, and Close reports the count.
type Sender struct {
	to string
	s  *udpsend.Sender
}

// checkTo checks to= at populate: HOST:PORT with an IPv4 address or a
// name.
func checkTo(to string) error {
	host, port, err := net.SplitHostPort(to)
	if err != nil || host == "" || port == "" {
		return fmt.Errorf("to=%s is not HOST:PORT", to)
	}
	return nil
}

// Dial opens a sender to to.
func Dial(to string) (*Sender, error) {
	s, err := udpsend.Dial(to)
	if err != nil {
		return nil, err
	}
	return &Sender{to: to, s: s}, nil
}

// Process sends the batch's packets and passes on those the kernel took.
func (x *Sender) Process(b *buffers.Batch) {
	before := x.s.Unsent
	x.s.Send(b, whole)
	if lost := int(x.s.Unsent - before); lost > 0 {
		// Datagrams go out in order: the ones not taken are the last.
		b.N -= lost
		b.Dropped += lost
	}
}

func whole(pkt []byte) []byte { return pkt }

// Close reports the packets that reached no collector.
func (x *Sender) Close() error {
	x.s.Drain()
	err := x.s.Close()
	if x.s.Refused > 0 {
		return fmt.Errorf("to=%s: %d packets reached no collector (ICMP unreachable)", x.to, x.s.Refused)
	}
	return err
}

var (
	_ functions.Function = (*Sender)(nil)
	_ functions.Closer   = (*Sender)(nil)
)
