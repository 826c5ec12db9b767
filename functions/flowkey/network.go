package flowkey

import "github.com/ffpf-go/ffpf/functions"

// Network returns where a packet's network layer starts and its IP version
// (4 or 6), as Extract finds them: after the link header of lt and up to
// MaxVLANTags tags. ver is 0 for a packet without an IP layer (or one
// whose link header is cut short). A class that reads more of the IP and
// transport headers than a key holds (Trumpet's TCP variables) starts
// there, so every class agrees on what the link layer is.
func Network(lt functions.LinkType, pkt []byte) (off int, ver uint8) {
	l, ok := link(lt, pkt)
	if !ok || l.linkOnly {
		return 0, 0
	}
	return l.l3, l.ver
}
