package annotate_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/gopacket/pcapgo"

	_ "github.com/ffpf-go/ffpf/functions/export"
)

// readPcap returns the frames of a pcap file.
func readPcap(t *testing.T, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for {
		data, _, err := r.ReadPacketData()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, append([]byte(nil), data...))
	}
}

// expect is an independent model of a copy: the field set with plain
// arithmetic on an Ethernet frame, and the IPv4 header checksum computed
// anew over the whole header.
func expect(frame []byte, field string, v int) ([]byte, bool) {
	p := append([]byte(nil), frame...)
	off, et, vlan := 12, 0, -1
	if len(p) < 14 {
		return p, false
	}
	et = int(binary.BigEndian.Uint16(p[12:]))
	for et == 0x8100 || et == 0x88a8 || et == 0x9100 {
		if vlan < 0 && len(p) >= off+4 {
			vlan = off + 2
		}
		if len(p) < off+6 {
			et = 0
			break
		}
		off += 4
		et = int(binary.BigEndian.Uint16(p[off:]))
	}
	h := p[off+2:]
	family := field[:strings.IndexByte(field, '.')]
	name := field[len(family)+1:]
	switch {
	case family == "vlan":
		if vlan < 0 {
			return p, false
		}
		tci := int(binary.BigEndian.Uint16(p[vlan:]))
		if name == "id" {
			tci = tci&^0xfff | v
		} else {
			tci = tci&0x1fff | v<<13
		}
		binary.BigEndian.PutUint16(p[vlan:], uint16(tci))
		return p, true
	case et == 0x0800 && (family == "ipv4" || family == "ip") && len(h) >= 20 && h[0]>>4 == 4 && h[0]&15 >= 5:
		switch name {
		case "tos":
			h[1] = byte(v)
		case "dscp":
			h[1] = h[1]&3 | byte(v<<2)
		case "ecn":
			h[1] = h[1]&^3 | byte(v)
		case "ttl":
			h[8] = byte(v)
		case "id":
			binary.BigEndian.PutUint16(h[4:], uint16(v))
		}
		// The checksum: see checksumKept.
		return p, true
	case et == 0x86dd && (family == "ipv6" || family == "ip") && len(h) >= 40 && h[0]>>4 == 6:
		tc := int(h[0]&15)<<4 | int(h[1]>>4)
		switch name {
		case "tc":
			tc = v
		case "dscp":
			tc = tc&3 | v<<2
		case "ecn":
			tc = tc&^3 | v
		case "hlim":
			h[7] = byte(v)
		}
		h[0] = h[0]&0xf0 | byte(tc>>4)
		h[1] = h[1]&0x0f | byte(tc<<4)
		return p, true
	}
	return p, false
}

// ipv4Checksum is the offset of the IPv4 header checksum of an Ethernet
// frame that has one (onesSum ≥ 0).
func ipv4Checksum(frame []byte) int {
	off := 12
	for et := binary.BigEndian.Uint16(frame[12:]); et == 0x8100 || et == 0x88a8 || et == 0x9100; et = binary.BigEndian.Uint16(frame[off:]) {
		off += 4
	}
	return off + 2 + 10
}

// onesSum is the one's complement sum of the IPv4 header of an Ethernet
// frame (the checksum included; of its first 20 bytes when it is cut
// short), or -1 when the frame has none.
func onesSum(frame []byte) int {
	off, et := 12, 0
	if len(frame) < 14 {
		return -1
	}
	et = int(binary.BigEndian.Uint16(frame[12:]))
	for et == 0x8100 || et == 0x88a8 || et == 0x9100 {
		if len(frame) < off+6 {
			return -1
		}
		off += 4
		et = int(binary.BigEndian.Uint16(frame[off:]))
	}
	h := frame[off+2:]
	if et != 0x0800 || len(h) < 20 || h[0]>>4 != 4 || h[0]&15 < 5 {
		return -1
	}
	n := int(h[0]&15) * 4
	if len(h) < n {
		n = 20 // cut short: the sum of what holds the field and the checksum
	}
	var sum uint32
	for i := 0; i < n; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return int(sum)
}

// TestTagCopy: tag with field= is a producer of copies of the packets it
// receives, each with the field set and the IPv4 header checksum right:
// the copies equal an independent model of them byte for byte, those
// without the field (counted) equal the packets, tcpdump reads them and
// finds no bad checksum, and libpcap selects them by the new value.
func TestTagCopy(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		field string
		value int
		pcap  string // libpcap's filter for a copy with the field set
	}{
		{"ipv4.tos", 0x5a, "ip[1] = 0x5a"},
		{"ipv4.dscp", 46, "ip[1] & 0xfc = 0xb8"},
		{"ipv4.ecn", 3, "ip[1] & 3 = 3"},
		{"ipv4.ttl", 7, "ip[8] = 7"},
		{"ipv4.id", 0x1234, "ip[4:2] = 0x1234"},
		{"ipv6.tc", 0xa5, "ip6[0:2] & 0x0ff0 = 0x0a50"},
		{"ipv6.ecn", 1, "ip6[1] & 0x30 = 0x10"},
		{"ipv6.hlim", 9, "ip6[7] = 9"},
		{"ip.dscp", 10, "(ip and ip[1] & 0xfc = 0x28) or (ip6 and ip6[0:2] & 0x0fc0 = 0x0280)"},
		{"vlan.id", 4000, "vlan 4000"},
		{"vlan.pcp", 5, "ether[14] & 0xe0 = 0xa0"},
	} {
		t.Run(tc.field, func(t *testing.T) {
			orig, cp := filepath.Join(dir, tc.field+".orig.pcap"), filepath.Join(dir, tc.field+".pcap")
			st := run(t, fmt.Sprintf(`(gen,packets=5000,vlan=0.3,ipv6=0.3,malformed=0.1) > [(export,file=%s) | (tag,field=%s,value=%d) > (export,file=%s)]`,
				orig, tc.field, tc.value, cp))
			if f := st["tag#1"]; f.In != 5000 || f.Filtered != 5000 || f.Records != 5000 || st["export#2"].In != 5000 {
				t.Fatalf("tag: in %d, filtered %d, records %d; the copies' export got %d", f.In, f.Filtered, f.Records, st["export#2"].In)
			}
			a, b := readPcap(t, orig), readPcap(t, cp)
			if len(a) != len(b) {
				t.Fatalf("%d packets, %d copies", len(a), len(b))
			}
			var nofield uint64
			seen := 0 // copies with the field where libpcap's filter looks (ip, ip6: untagged)
			for i := range a {
				want, has := expect(a[i], tc.field, tc.value)
				if !has {
					nofield++
				} else if et := binary.BigEndian.Uint16(a[i][12:]); strings.HasPrefix(tc.field, "vlan.") || et == 0x0800 || et == 0x86dd {
					seen++
				}
				// The IPv4 header checksum is updated so that the sum of
				// the header stays what it was: 0xffff when the packet's
				// checksum was right, as wrong as it was otherwise (as a
				// router updates it, RFC 1624).
				if s := onesSum(a[i]); s >= 0 {
					if got := onesSum(b[i]); got != s && !(s == 0xffff && got == 0) {
						t.Fatalf("copy %d: header sum %#x, the packet's %#x", i, got, s)
					}
					at := ipv4Checksum(a[i])
					want[at], want[at+1] = b[i][at], b[i][at+1]
				}
				if !bytes.Equal(want, b[i]) {
					t.Fatalf("copy %d:\n got  %x\n want %x", i, b[i], want)
				}
			}
			if got := st["tag#1"].State["nofield"]; fmt.Sprint(got) != fmt.Sprint(nofield) || nofield == 0 || nofield == 5000 {
				t.Errorf("nofield %v, want %d (some, not all)", got, nofield)
			}
			if _, err := exec.LookPath("tcpdump"); err != nil {
				return
			}
			bad := func(file string) int {
				out, _ := exec.Command("tcpdump", "-r", file, "-nn", "-vv").CombinedOutput()
				return bytes.Count(out, []byte("bad cksum"))
			}
			if o, c := bad(orig), bad(cp); o != c {
				t.Errorf("tcpdump finds %d bad IPv4 header checksums in the copies, %d in the packets", c, o)
			}
			if got := tcpdumpCount(t, cp, tc.pcap); got != seen || seen == 0 {
				t.Errorf("libpcap selects %d copies with %q, want the %d with the field it sees", got, tc.pcap, seen)
			}
		})
	}
}

// tcpdumpCount is the number of packets of file that libpcap's filter
// selects.
func tcpdumpCount(t *testing.T, file, filter string) int {
	t.Helper()
	sel := filepath.Join(t.TempDir(), "sel.pcap")
	if out, err := exec.Command("tcpdump", "-r", file, "-w", sel, filter).CombinedOutput(); err != nil {
		t.Fatalf("tcpdump %s: %v: %s", filter, err, out)
	}
	return len(readPcap(t, sel))
}
