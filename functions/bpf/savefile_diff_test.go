package bpf

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
)

// The differential tests of this file write capture files of their own and
// compare, for every (file, expression), the packets `tcpdump -r` selects
// with those a filter compiled from the file's Capture passes: libpcap
// compiles for a savefile otherwise than for a live capture (DLT_NULL's
// address families and byte order, "inbound", "ip broadcast"), and link
// types above 255 must compile at all.

// record is one packet of a capture file.
type record struct {
	data []byte
	wire uint32
}

// capFile is a capture file the tests write: its header's fields and its
// records.
type capFile struct {
	name    string
	order   binary.ByteOrder
	snaplen uint32
	field   uint32 // link-type field, FCS bits included
	recs    []record
}

func (f *capFile) capture() functions.Capture {
	return functions.Capture{File: true, LinkTypeField: f.field, Snaplen: f.snaplen,
		Swapped: f.order.Uint16([]byte{1, 0}) != binary.NativeEndian.Uint16([]byte{1, 0})}
}

// write writes f as a classic pcap file (pcap-savefile(5)) in its byte
// order.
func (f *capFile) write(t *testing.T, path string) {
	t.Helper()
	o := f.order
	b := make([]byte, 24)
	o.PutUint32(b[0:], 0xa1b2c3d4)
	o.PutUint16(b[4:], 2)
	o.PutUint16(b[6:], 4)
	o.PutUint32(b[16:], f.snaplen)
	o.PutUint32(b[20:], f.field)
	for i, r := range f.recs {
		var h [16]byte
		o.PutUint32(h[0:], 1700000000+uint32(i))
		o.PutUint32(h[8:], uint32(len(r.data)))
		o.PutUint32(h[12:], r.wire)
		b = append(append(b, h[:]...), r.data...)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// readRecords reads the records of a classic pcap file in either byte
// order: what tcpdump -w wrote.
func readRecords(t *testing.T, path string) []record {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 24 {
		t.Fatalf("%s: %d bytes, no pcap header", path, len(b))
	}
	var o binary.ByteOrder = binary.LittleEndian
	switch {
	case o.Uint32(b) == 0xa1b2c3d4 || o.Uint32(b) == 0xa1b23c4d:
	case binary.BigEndian.Uint32(b) == 0xa1b2c3d4 || binary.BigEndian.Uint32(b) == 0xa1b23c4d:
		o = binary.BigEndian
	default:
		t.Fatalf("%s: not a pcap file (magic %x)", path, b[:4])
	}
	var recs []record
	for p := 24; p < len(b); {
		if p+16 > len(b) {
			t.Fatalf("%s: truncated record header at %d", path, p)
		}
		incl, wire := int(o.Uint32(b[p+8:])), o.Uint32(b[p+12:])
		if p+16+incl > len(b) {
			t.Fatalf("%s: truncated record at %d", path, p)
		}
		recs = append(recs, record{b[p+16 : p+16+incl], wire})
		p += 16 + incl
	}
	return recs
}

// Packets of the network layer, which the link types below wrap.

var (
	sfIP4A   = [4]byte{10, 0, 0, 1}
	sfIP4B   = [4]byte{192, 168, 1, 2}
	sfIP4Bc  = [4]byte{255, 255, 255, 255}
	sfIP6A   = [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}
	sfIP6B   = [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 2}
	sfPadded = make([]byte, 200)
)

func transport(proto byte, payload []byte) []byte {
	var h []byte
	switch proto {
	case 6: // TCP, SYN to port 80
		h = []byte{0x30, 0x39, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0}
	case 17: // UDP to 443 (QUIC)
		h = []byte{0x30, 0x39, 0x01, 0xbb, 0, 0, 0, 0}
		binary.BigEndian.PutUint16(h[4:], uint16(8+len(payload)))
	case 1, 58: // ICMP / ICMPv6 echo request
		h = []byte{8, 0, 0, 0, 0, 1, 0, 1}
		if proto == 58 {
			h[0] = 128
		}
	}
	return append(h, payload...)
}

func ipv4(src, dst [4]byte, proto byte, payload []byte) []byte {
	l4 := transport(proto, payload)
	h := []byte{0x45, 0, 0, 0, 0, 1, 0, 0, 64, proto, 0, 0}
	binary.BigEndian.PutUint16(h[2:], uint16(20+len(l4)))
	h = append(append(h, src[:]...), dst[:]...)
	return append(h, l4...)
}

func ipv6(src, dst [16]byte, proto byte, payload []byte) []byte {
	l4 := transport(proto, payload)
	h := []byte{0x60, 0, 0, 0, 0, 0, proto, 64}
	binary.BigEndian.PutUint16(h[4:], uint16(len(l4)))
	h = append(append(h, src[:]...), dst[:]...)
	return append(h, l4...)
}

// l3 is a network-layer packet and its EtherType.
type l3 struct {
	etype uint16
	pkt   []byte
}

// mix is the traffic every link type carries: IPv4 and IPv6, TCP, UDP and
// ICMP, short and long, to and from 10.0.0.1, and an IPv4 broadcast.
func mix() []l3 {
	var m []l3
	for _, payload := range [][]byte{nil, sfPadded} {
		for _, proto := range []byte{6, 17, 1} {
			m = append(m, l3{0x0800, ipv4(sfIP4A, sfIP4B, proto, payload)}, l3{0x0800, ipv4(sfIP4B, sfIP4B, proto, payload)})
		}
		for _, proto := range []byte{6, 17, 58} {
			m = append(m, l3{0x86dd, ipv6(sfIP6A, sfIP6B, proto, payload)})
		}
	}
	return append(m, l3{0x0800, ipv4(sfIP4B, sfIP4Bc, 17, make([]byte, 20))})
}

func rec(data []byte) record { return record{data, uint32(len(data))} }

// loopback wraps the mix in DLT_NULL (family in the writer's byte order) or
// DLT_LOOP (family in network byte order) headers, IPv6 with each of the
// address families systems have used for it: Linux 10, BSD 24, FreeBSD 28,
// Darwin 30.
func loopback(order binary.ByteOrder, loop bool) []record {
	var recs []record
	for _, p := range mix() {
		fams := []uint32{2}
		if p.etype == 0x86dd {
			fams = []uint32{10, 24, 28, 30}
		}
		for _, fam := range fams {
			h := make([]byte, 4)
			if loop {
				binary.BigEndian.PutUint32(h, fam)
			} else {
				order.PutUint32(h, fam)
			}
			recs = append(recs, rec(append(h, p.pkt...)))
		}
	}
	return recs
}

// sll2 wraps the mix in LINUX_SLL2 headers, on interfaces 1 and 3, to this
// host (packet type 0) and outgoing (4).
func sll2() []record {
	var recs []record
	for i, p := range mix() {
		h := make([]byte, 20)
		binary.BigEndian.PutUint16(h[0:], p.etype)
		binary.BigEndian.PutUint32(h[4:], uint32(1+2*(i%2)))
		binary.BigEndian.PutUint16(h[8:], 1) // ARPHRD_ETHER
		h[10] = byte(4 * (i / 2 % 2))
		h[11] = 6
		copy(h[12:], []byte{2, 0, 0, 0, 0, byte(i)})
		recs = append(recs, rec(append(h, p.pkt...)))
	}
	return recs
}

// ethernet wraps the mix in Ethernet frames, one in four VLAN-tagged,
// the broadcast one to ff:ff:ff:ff:ff:ff; with fcs, each frame ends in
// four bytes of frame check sequence.
func ethernet(fcs bool) []record {
	var recs []record
	for i, p := range mix() {
		h := []byte{2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2}
		if p.pkt[0]>>4 == 4 && [4]byte(p.pkt[16:20]) == sfIP4Bc {
			copy(h, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
		}
		if i%4 == 1 {
			h = append(h, 0x81, 0x00, 0, 100)
		}
		h = binary.BigEndian.AppendUint16(h, p.etype)
		f := append(h, p.pkt...)
		if fcs {
			f = append(f, 0xde, 0xad, 0xbe, 0xef)
		}
		recs = append(recs, rec(f))
	}
	return recs
}

// dsaBrcm wraps the mix in Ethernet frames carrying a 4-byte Broadcom
// switch tag after the source address (DLT_DSA_TAG_BRCM).
func dsaBrcm() []record {
	var recs []record
	for _, p := range mix() {
		h := []byte{2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x20, 0, 0, 3}
		h = binary.BigEndian.AppendUint16(h, p.etype)
		recs = append(recs, rec(append(h, p.pkt...)))
	}
	return recs
}

// fcsField is the link-type field of an Ethernet file whose frames end in
// a 4-byte FCS (pcap-savefile(5): FCS length in the top 4 bits, flagged by
// bit 26).
const fcsField = 1 | 0x04000000 | 4<<28

func savefileCorpus() []*capFile {
	le, be := binary.LittleEndian, binary.BigEndian
	return []*capFile{
		{"null-le", le, 65535, 0, loopback(le, false)},
		{"null-be", be, 65535, 0, loopback(be, false)},
		{"loop-le", le, 65535, 108, loopback(le, true)},
		{"loop-be", be, 262144, 108, loopback(be, true)},
		{"sll2", le, 262144, 276, sll2()},
		{"sll2-be", be, 262144, 276, sll2()},
		{"dsa-brcm", le, 262144, 281, dsaBrcm()},
		{"en10mb-fcs", le, 262144, fcsField, ethernet(true)},
		{"en10mb-fcs-be", be, 262144, fcsField, ethernet(true)},
		{"en10mb-be", be, 1500, 1, ethernet(false)},
	}
}

var savefileExprs = []string{
	"ip", "ip6", "udp", "tcp", "icmp", "icmp6", "ip6 and udp", "ip broadcast", "inbound", "outbound",
	"ifindex 3", "vlan", "vlan 100 and tcp", "host 10.0.0.1", "len > 100", "greater 200", "",
}

func needTcpdump(t *testing.T) string {
	t.Helper()
	tcpdump, err := exec.LookPath("tcpdump")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("tcpdump is not installed (make deps installs it): cannot compare with tcpdump -r")
		}
		t.Skip("tcpdump is not installed: cannot compare with tcpdump -r")
	}
	return tcpdump
}

// tcpdumpSelect runs `tcpdump -r file -w out expr` and returns the records
// it selected, or its message if it refused the expression.
func tcpdumpSelect(t *testing.T, tcpdump, file, expr string) ([]record, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.pcap")
	args := []string{"-r", file, "-w", out}
	if expr != "" {
		args = append(args, expr)
	}
	cmd := exec.Command(tcpdump, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndex(msg, "\n"); i >= 0 {
			msg = msg[i+1:]
		}
		return nil, strings.TrimPrefix(msg, "tcpdump: ")
	}
	return readRecords(t, out), ""
}

// TestSavefileMatchesTcpdump: for each capture file and expression, the
// packets a filter compiled from the file's Capture passes are those
// `tcpdump -r` selects, the program is the one `tcpdump -r -d` prints, and
// an expression tcpdump refuses we refuse with libpcap's message.
func TestSavefileMatchesTcpdump(t *testing.T) {
	tcpdump := needTcpdump(t)
	dir := t.TempDir()
	for _, f := range savefileCorpus() {
		path := filepath.Join(dir, f.name+".pcap")
		f.write(t, path)
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			compareWithTcpdump(t, tcpdump, f, path)
		})
	}
}

func compareWithTcpdump(t *testing.T, tcpdump string, f *capFile, path string) {
	selected := map[string]int{}
	for _, expr := range savefileExprs {
		want, refused := tcpdumpSelect(t, tcpdump, path, expr)
		prog, err := CompileCapturesAndLoad(expr, functions.LinkType(f.field&0xffff), []functions.Capture{f.capture()}, 0)
		if refused != "" {
			if err == nil {
				t.Errorf("%s %q: tcpdump refuses it (%s), we compile it", f.name, expr, refused)
			} else if !strings.Contains(err.Error(), refused) {
				t.Errorf("%s %q: our message %q lacks tcpdump's %q", f.name, expr, err, refused)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %q: tcpdump compiles it, we fail: %v", f.name, expr, err)
			continue
		}
		var got []record
		for _, r := range f.recs {
			if prog.Run(r.data, r.wire) != 0 {
				got = append(got, r)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s %q: we pass %d packets, tcpdump -r selects %d", f.name, expr, len(got), len(want))
		} else {
			for i := range got {
				if string(got[i].data) != string(want[i].data) {
					t.Errorf("%s %q: packet %d we pass differs from tcpdump's", f.name, expr, i)
					break
				}
			}
		}
		selected[expr] = len(got)
		if expr == "" {
			continue
		}
		d, err := exec.Command(tcpdump, "-r", path, "-d", expr).Output()
		if err != nil {
			t.Errorf("tcpdump -r %s -d %q: %v", f.name, expr, err)
		} else if ours := Disassemble(prog.Instructions()); ours != string(d) {
			t.Errorf("%s %q:\nours:\n%s\ntcpdump -r -d:\n%s", f.name, expr, ours, d)
		}
	}
	t.Logf("%s (%d packets): %v", f.name, len(f.recs), selected)
}

// TestSavefileCases pins down, on top of the comparison, the cases for
// which compiling as for a live capture was wrong, so that a corpus or
// oracle that stopped exercising them would not go unnoticed.
func TestSavefileCases(t *testing.T) {
	le, be := binary.LittleEndian, binary.BigEndian
	count := func(f *capFile, expr string) (int, error) {
		prog, err := CompileCapturesAndLoad(expr, functions.LinkType(f.field&0xffff), []functions.Capture{f.capture()}, 0)
		if err != nil {
			return 0, err
		}
		n := 0
		for _, r := range f.recs {
			if prog.Run(r.data, r.wire) != 0 {
				n++
			}
		}
		return n, nil
	}
	// 6 IPv6 packets in the mix; on a file each is written with families
	// 10, 24, 28 and 30, and libpcap's savefile code matches the three
	// BSD ones in the file's byte order.
	for _, order := range []binary.ByteOrder{le, be} {
		for _, loop := range []bool{false, true} {
			f := &capFile{"loopback", order, 65535, 0, loopback(order, loop)}
			if loop {
				f.field = 108
			}
			if n, err := count(f, "ip6"); err != nil || n != 18 {
				t.Errorf("%s loop=%v: ip6 selects %d (%v), want 18", order, loop, n, err)
			}
			if n, err := count(f, "ip"); err != nil || n != 13 {
				t.Errorf("%s loop=%v: ip selects %d (%v), want 13", order, loop, n, err)
			}
		}
	}
	eth := &capFile{"en10mb", le, 262144, fcsField, ethernet(true)}
	for _, expr := range []string{"inbound", "ifindex 3"} {
		if _, err := count(eth, expr); err == nil || !strings.Contains(err.Error(), "when reading savefiles") {
			t.Errorf("%q on an Ethernet file: %v, want libpcap's refusal for savefiles", expr, err)
		}
	}
	if n, err := count(eth, "ip broadcast"); err != nil || n != 1 {
		t.Errorf("ip broadcast on an Ethernet file: %d (%v), want 1", n, err)
	}
	// Live, as before: netmask unknown, inbound compiled for the kernel.
	if _, err := Compile("ip broadcast", functions.LinkEthernet, 0); err == nil || !strings.Contains(err.Error(), "netmask not known") {
		t.Errorf("ip broadcast live: %v, want libpcap's netmask message", err)
	}
	if _, err := Compile("inbound", functions.LinkEthernet, 0); err != nil {
		t.Errorf("inbound live: %v", err)
	}
	sll := &capFile{"sll2", le, 262144, 276, sll2()}
	if n, err := count(sll, "ip"); err != nil || n != 13 {
		t.Errorf("ip on LINUX_SLL2: %d (%v), want 13", n, err)
	}
}

// TestCapturesJoined: one filter on packets of several captures compiles
// for each; where the programs differ it fails saying why.
func TestCapturesJoined(t *testing.T) {
	native := functions.Capture{File: true, LinkTypeField: 0, Snaplen: 65535}
	swapped := native
	swapped.Swapped = true
	live := functions.LiveCapture(functions.LinkNull)
	cases := []struct {
		expr string
		caps []functions.Capture
		want string // "" for success
	}{
		{"ip", []functions.Capture{native, swapped}, "the files were written in different byte orders"},
		{"ip6", []functions.Capture{native, live}, "one is a capture file and one a live capture"},
		{"len > 100", []functions.Capture{native, swapped, live}, ""},
		// Only the snap length, the value a passing packet returns, differs.
		{"ip", []functions.Capture{native, {File: true, Snaplen: 1500}}, ""},
		{"tcp", []functions.Capture{
			{File: true, LinkTypeField: 1, Snaplen: 1500},
			{File: true, LinkTypeField: fcsField, Swapped: true, Snaplen: 262144},
		}, ""},
	}
	for _, c := range cases {
		_, err := CompileCaptures(c.expr, functions.LinkType(c.caps[0].LinkTypeField&0xffff), c.caps, 0)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q on %+v: %v", c.expr, c.caps, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q on %+v: %v, want %q", c.expr, c.caps, err, c.want)
		}
	}
	// The class compiles for the captures in its context: Validate refuses
	// the join, New compiles for the file (the BSD IPv6 families of a
	// big-endian DLT_NULL file), and so does the eBPF hook.
	c, p := bind(t, functions.Arg{Value: functions.Raw{Kind: functions.RawWord, Text: "ip6"}})
	ctx := &functions.Context{Params: p, LinkType: functions.LinkNull, Snaplen: 2048, Captures: []functions.Capture{native, live}}
	if err := c.Validate(ctx); err == nil || !strings.Contains(err.Error(), "one is a capture file and one a live capture") {
		t.Errorf("Validate on a file and a live capture: %v", err)
	}
	f := &capFile{"null-be", binary.BigEndian, 65535, 0, loopback(binary.BigEndian, false)}
	ctx.Captures = []functions.Capture{f.capture()}
	if err := c.Validate(ctx); err != nil {
		t.Fatal(err)
	}
	fn, err := c.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range f.recs {
		if fn.(*Filter).Program().Run(r.data, r.wire) != 0 {
			n++
		}
	}
	if n != 18 {
		t.Errorf("the class's ip6 on a big-endian DLT_NULL file passes %d packets, want 18", n)
	}
	if _, err := c.EBPF(functions.TargetXDP, ctx); err != nil {
		t.Errorf("EBPF: %v", err)
	}
	ctx.Captures = []functions.Capture{native, swapped}
	if _, err := c.EBPF(functions.TargetXDP, ctx); err == nil {
		t.Error("the eBPF hook accepts a filter that differs between its captures")
	}
}

// TestCompileConcurrent: compiles from several goroutines (populates of
// concurrent requests) give the programs a lone compile gives.
func TestCompileConcurrent(t *testing.T) {
	caps := []functions.Capture{
		{File: true, LinkTypeField: 0, Snaplen: 65535, Swapped: true},
		{File: true, LinkTypeField: fcsField, Snaplen: 262144},
		functions.LiveCapture(functions.LinkSLL2),
		functions.LiveCapture(functions.LinkEthernet),
	}
	exprs := []string{"ip6 and udp", "tcp and dst port 80", "inbound", "ip broadcast", "vlan and tcp"}
	type key struct{ c, e int }
	want := map[key]string{}
	for i, c := range caps {
		for j, e := range exprs {
			insns, err := CompileFor(e, c, 0)
			want[key{i, j}] = fmt.Sprint(insns, err)
		}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 200 {
				k := key{(g + n) % len(caps), n % len(exprs)}
				insns, err := CompileFor(exprs[k.e], caps[k.c], 0)
				if got := fmt.Sprint(insns, err); got != want[k] {
					t.Errorf("%q for %+v: concurrently %s, alone %s", exprs[k.e], caps[k.c], got, want[k])
					return
				}
			}
		}()
	}
	wg.Wait()
}
