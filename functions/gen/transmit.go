package gen

import (
	"errors"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// Transmit sends the packets of cfg out of the interface through an
// AF_PACKET socket, each as the bytes it has (a truncated frame goes out
// short), paced at pps packets per second (0: as fast as the socket takes
// them). Frames the interface refuses (longer than its MTU allows, shorter
// than an Ethernet header) are skipped and counted. sent, when not nil,
// gets each frame that went out, with the time it was sent, so that the
// traffic can be recorded for an oracle. Root or CAP_NET_RAW is needed.
func Transmit(iface string, cfg Config, pps float64, sent func(frame []byte, ts time.Time) error) (n, skipped int64, err error) {
	ifc, err := net.InterfaceByName(iface)
	if err != nil {
		return 0, 0, fmt.Errorf("cannot transmit on %s: %v", iface, err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0) // protocol 0: it receives nothing
	if err != nil {
		return 0, 0, fmt.Errorf("cannot open a packet socket: %v (root or CAP_NET_RAW is needed)", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifc.Index}); err != nil {
		return 0, 0, fmt.Errorf("cannot bind to %s: %v", iface, err)
	}
	g := New(cfg)
	buf := make([]byte, MaxFrameLen)
	start := time.Now()
	for {
		c, _, _, ok := g.Next(buf)
		if !ok {
			return n, skipped, nil
		}
		if pps > 0 {
			if d := time.Duration(float64(n+skipped) / pps * 1e9); time.Since(start) < d {
				time.Sleep(d - time.Since(start))
			}
		}
		for {
			_, err = unix.Write(fd, buf[:c])
			if !errors.Is(err, unix.ENOBUFS) && !errors.Is(err, unix.EAGAIN) {
				break
			}
			time.Sleep(50 * time.Microsecond) // the device queue is full: wait, lose nothing
		}
		switch {
		case err == nil:
			n++
			if sent != nil {
				if err := sent(buf[:c], time.Now()); err != nil {
					return n, skipped, err
				}
			}
		case errors.Is(err, unix.EMSGSIZE), errors.Is(err, unix.EINVAL):
			skipped++
		default:
			return n, skipped, fmt.Errorf("sending on %s: %v", iface, err)
		}
	}
}
