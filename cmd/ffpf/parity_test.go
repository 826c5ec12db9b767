package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// parityPacket builds an IPv4 or IPv6 datagram of protocol proto (6 TCP,
// 17 UDP) with an 8-byte payload; v4 goes to 255.255.255.255 when bcast.
func parityPacket(v6 bool, proto byte, bcast bool) []byte {
	l4 := make([]byte, 8+8)
	binary.BigEndian.PutUint16(l4[0:], 1234)
	binary.BigEndian.PutUint16(l4[2:], 53)
	if proto == 6 {
		l4 = make([]byte, 20+8)
		binary.BigEndian.PutUint16(l4[0:], 1234)
		binary.BigEndian.PutUint16(l4[2:], 80)
		l4[12] = 5 << 4
	} else {
		binary.BigEndian.PutUint16(l4[4:], uint16(len(l4)))
	}
	if v6 {
		ip := make([]byte, 40, 40+len(l4))
		ip[0] = 6 << 4
		binary.BigEndian.PutUint16(ip[4:], uint16(len(l4)))
		ip[6], ip[7] = proto, 64
		ip[8], ip[9], ip[23] = 0x20, 0x01, 1
		ip[24], ip[25], ip[39] = 0x20, 0x01, 2
		return append(ip, l4...)
	}
	ip := make([]byte, 20, 20+len(l4))
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(l4)))
	ip[8], ip[9] = 64, proto
	copy(ip[12:], []byte{10, 0, 0, 1})
	copy(ip[16:], []byte{10, 0, 0, 2})
	if bcast {
		copy(ip[16:], []byte{255, 255, 255, 255})
	}
	return append(ip, l4...)
}

// TestFiltersOnForeignCapturesMatchTcpdump runs ffpf on captures written on
// other systems (BSD loopback in both byte orders, with all of the BSDs'
// IPv6 address families; Linux cooked v2 as "tcpdump -i any" writes it) and
// checks every filter selects what tcpdump -r selects, and that an
// expression tcpdump refuses for a file is refused with libpcap's words.
func TestFiltersOnForeignCapturesMatchTcpdump(t *testing.T) {
	tcpdump := tcpdumpOrSkip(t)
	dir := t.TempDir()
	var loop []precord
	for i, af := range []uint32{2, 24, 28, 30, 10, 2, 24} {
		for _, proto := range []byte{6, 17} {
			v6 := af != 2
			p := parityPacket(v6, proto, i == 5)
			loop = append(loop, precord{sec: uint32(i), incl: uint32(4 + len(p)), orig: uint32(4 + len(p)), data: append(make([]byte, 4), p...)})
			loop[len(loop)-1].data[0] = byte(af) // patched per byte order below
		}
	}
	withAF := func(o binary.ByteOrder) []precord {
		out := make([]precord, len(loop))
		for i, r := range loop {
			d := append([]byte(nil), r.data...)
			o.PutUint32(d, uint32(r.data[0]))
			r.data = d
			out[i] = r
		}
		return out
	}
	var sll2 []precord
	for i, v6 := range []bool{false, true, false, true} {
		p := parityPacket(v6, byte(6+11*(i%2)), false)
		h := make([]byte, 20, 20+len(p))
		binary.BigEndian.PutUint16(h[0:], 0x0800)
		if v6 {
			binary.BigEndian.PutUint16(h[0:], 0x86dd)
		}
		binary.BigEndian.PutUint32(h[4:], 3) // interface index
		binary.BigEndian.PutUint16(h[8:], 1) // ARPHRD_ETHER
		h[10], h[11] = byte(i%2*4), 6        // packet type (incoming, outgoing), address length
		d := append(h, p...)
		sll2 = append(sll2, precord{sec: uint32(i), incl: uint32(len(d)), orig: uint32(len(d)), data: d})
	}
	files := []struct {
		name string
		o    binary.ByteOrder
		link uint32
		recs []precord
	}{
		{"null-be.pcap", binary.BigEndian, 0, withAF(binary.BigEndian)},
		{"null-le.pcap", binary.LittleEndian, 0, withAF(binary.LittleEndian)},
		{"loop-be.pcap", binary.BigEndian, 108, withAF(binary.BigEndian)},
		{"sll2.pcap", binary.LittleEndian, 276, sll2},
	}
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		if dbg := os.Getenv("PARITY_KEEP"); dbg != "" {
			path = filepath.Join(dbg, f.name)
		}
		writeClassic(t, path, f.o, false, 65535, f.link, f.recs)
		for _, expr := range []string{"ip", "ip6", "udp", "tcp port 80", "ip broadcast", "inbound", "ifindex 3", "len > 60"} {
			cmd := exec.Command(tcpdump, "-nn", "-r", path, expr)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			o, err := cmd.Output()
			r := ffpf(t, "run", "-r", path, "--json", fmt.Sprintf(`(bpf,%q) > (pktcount)`, expr))
			if err != nil {
				// tcpdump refuses: ffpf must refuse too, in libpcap's words.
				lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
				msg := strings.TrimPrefix(lines[len(lines)-1], "tcpdump: ")
				if r.code != 2 || !strings.Contains(r.stderr, msg) {
					t.Errorf("%s %q: tcpdump refuses (%s); ffpf exit %d: %s", f.name, expr, msg, r.code, r.stderr)
				}
				continue
			}
			var want uint64 // a packet's line; tcpdump indents the hex dump of one it cannot decode
			for _, l := range strings.Split(string(o), "\n") {
				if l != "" && l[0] != '\t' && l[0] != ' ' {
					want++
				}
			}
			if r.code != 0 {
				t.Errorf("%s %q: ffpf exit %d: %s", f.name, expr, r.code, r.stderr)
				continue
			}
			doc := parseRun(t, r)
			got := stateNum(t, doc.Functions[doc.byClass("pktcount")[0]].State["packets"])
			if got != want {
				t.Errorf("%s %q: ffpf selects %d packets, tcpdump -r %d", f.name, expr, got, want)
			}
		}
	}
}
