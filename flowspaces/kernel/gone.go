package kernel

// An interface deleted under a capture takes its hook with it: the
// program sees no more packets and nothing else tells. The sync loop
// looks for each interface by the index it had when the capture began;
// when one is gone the run ends with libpcap's words for it, as a
// capture through libpcap does.

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
)

// disappeared is libpcap's message for an interface deleted under a
// capture (PCAP_ERROR_IFACE_NOT_UP's text in pcap-linux.c), which
// tcpdump prints as "pcap_loop: The interface disappeared".
const disappeared = "The interface disappeared"

// gone returns the error of the captures on the first interface that has
// disappeared since it was first seen, or nil; fs.mu is held.
func (fs *Flowspace) gone() error {
	if fs.ifindex == nil {
		fs.ifindex = map[string]int{}
	}
	for key, a := range fs.attached {
		if a.link == nil {
			continue
		}
		iface, _ := splitHook(key) // its ingress and egress hooks go with it
		idx, seen := fs.ifindex[iface]
		if !seen {
			ifc, err := net.InterfaceByName(iface)
			if err != nil {
				return fs.disappeared(iface)
			}
			fs.ifindex[iface] = ifc.Index
			continue
		}
		var nf netlink.LinkNotFoundError
		if _, err := netlink.LinkByIndex(idx); errors.As(err, &nf) {
			return fs.disappeared(iface)
		}
	}
	return nil
}

// disappeared is the error of the captures on iface; fs.mu is held.
func (fs *Flowspace) disappeared(iface string) error {
	var errs []error
	for _, k := range fs.nodes {
		if k.iface == iface {
			errs = append(errs, fmt.Errorf("%s: capture on %s failed: %s", k.ID, iface, disappeared))
		}
	}
	if len(errs) == 0 {
		return fmt.Errorf("%s: capture on %s failed: %s", fs.Name(), iface, disappeared)
	}
	return errors.Join(errs...)
}
