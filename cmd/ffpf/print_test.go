package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

// printable selects what --print decodes as tcpdump does: no application
// protocol tcpdump decodes (DNS, NTP, HTTP, SMTP), no ICMP but echo, no
// IPv6 extension header; with and without a VLAN tag.
const printable = `(not port 53 and not port 123 and not port 80 and not port 8080 and not port 25 and ` +
	`not (icmp and icmp[0] != 0 and icmp[0] != 8) and ` +
	`not (ip6 and ip6[6] != 6 and ip6[6] != 17 and ip6[6] != 58) and not (icmp6 and ip6[40] != 128 and ip6[40] != 129))`

// --print writes tcpdump's line for each packet: the oracle is
// tcpdump -n -S on the same file with the same filter.
func TestPrintLikeTcpdump(t *testing.T) {
	td, err := exec.LookPath("tcpdump")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("tcpdump, the oracle, is not installed (make deps installs it)")
		}
		t.Skip("tcpdump is not installed")
	}
	trace := filepath.Join(t.TempDir(), "t.pcap")
	if r := ffpf(t, "gen", "-o", trace, "--packets", "5000", "--seed", "3", "--vlan", "0.1", "--ipv6", "0.3"); r.code != 0 {
		t.Fatalf("gen: %s", r.stderr)
	}
	// An untagged frame is IP or ARP at the untagged offsets; libpcap's
	// "vlan" moves the offsets of everything after it.
	filter := "((ip or ip6 or arp) and " + printable + ") or (vlan and (ip or ip6 or arp) and " + printable + ")"
	cmd := exec.Command(td, "-n", "-S", "-r", trace, filter)
	cmd.Env = append(os.Environ(), "TZ=Asia/Kolkata") // a zone offset of half an hour: local time it is
	want, err := cmd.Output()
	if err != nil {
		t.Fatalf("tcpdump: %v", err)
	}
	run := exec.Command(ffpfBin, "run", "-r", trace, "--print", `(bpf,"`+filter+`")`)
	run.Env = cmd.Env
	var out, stderr bytes.Buffer
	run.Stdout, run.Stderr = &out, &stderr
	if err := run.Run(); err != nil {
		t.Fatalf("ffpf run --print: %v: %s", err, stderr.String())
	}
	got, wantLines := strings.Split(out.String(), "\n"), strings.Split(string(want), "\n")
	if len(wantLines) < 3000 {
		t.Fatalf("the filter kept only %d packets", len(wantLines))
	}
	for i := range max(len(got), len(wantLines)) {
		if i >= len(got) || i >= len(wantLines) || got[i] != wantLines[i] {
			g, w := "(none)", "(none)"
			if i < len(got) {
				g = got[i]
			}
			if i < len(wantLines) {
				w = wantLines[i]
			}
			t.Fatalf("line %d:\n got %s\nwant %s", i+1, g, w)
		}
	}
	// The counters go to standard error, as tcpdump's statistics do.
	if !strings.Contains(stderr.String(), "print#1") || strings.Contains(out.String(), "FUNCTION") {
		t.Errorf("the counters are not on standard error alone:\n%s", stderr.String())
	}
}

// The printer allocates nothing per packet.
func TestPrintAllocs(t *testing.T) {
	frames := [][]byte{
		// Ethernet, IPv4, TCP SYN with options
		append(append([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x08, 0x00,
			0x45, 0, 0, 60, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2},
			0x04, 0xd2, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0xa0, 0x02, 0xfa, 0xf0, 0, 0, 0, 0),
			2, 4, 5, 0xb4, 1, 3, 3, 7, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0),
		// Ethernet, ARP request
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 1, 2, 3, 4, 5, 0x08, 0x06,
			0, 1, 8, 0, 6, 4, 0, 1, 0, 1, 2, 3, 4, 5, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2},
	}
	pb := buffers.NewPBuf(len(frames), 256)
	b := buffers.NewBatch(pb, 0, len(frames), 0)
	for _, f := range frames {
		b.Append(f, uint32(len(f)), 1e9)
	}
	var out bytes.Buffer
	p := newPrinter(&out, functions.LinkEthernet)
	n := b.N
	p.Process(b)
	if want := "IP 10.0.0.1.1234 > 10.0.0.2.80: Flags [S], seq 1, win 64240, options [mss 1460,nop,wscale 7,sackOK,TS val 1 ecr 0], length 0\n"; !strings.Contains(out.String(), want) {
		t.Errorf("printed %q, want a line ending %q", out.String(), want)
	}
	if want := "ARP, Request who-has 10.0.0.2 tell 10.0.0.1, length 28\n"; !strings.HasSuffix(out.String(), want) {
		t.Errorf("printed %q, want a line ending %q", out.String(), want)
	}
	p.w.Reset(discard{})
	if a := testing.AllocsPerRun(100, func() { b.N = n; p.Process(b) }); a != 0 {
		t.Errorf("Process allocates %.1f times per batch", a)
	}
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

func TestFormatRate(t *testing.T) {
	for _, c := range []struct {
		n    uint64
		el   time.Duration
		want string
	}{{3, time.Second, "3 pps"}, {4500, 2 * time.Second, "2.25 kpps"}, {5e6, time.Second, "5.00 Mpps"}, {7, 0, "0 pps"}} {
		if got := formatRate(c.n, c.el); got != c.want {
			t.Errorf("formatRate(%d, %v) = %q, want %q", c.n, c.el, got, c.want)
		}
	}
}

// Cooked (-i any) and raw IP captures print the packet inside, as tcpdump
// does without -e.
func TestPrintLinkTypes(t *testing.T) {
	ipUDP := []byte{0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
		0x03, 0xe8, 0x07, 0xd0, 0, 8, 0, 0}
	sll := append([]byte{0, 0, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0, 0x08, 0x00}, ipUDP...)
	for _, c := range []struct {
		link  functions.LinkType
		frame []byte
	}{{functions.LinkLinuxSLL, sll}, {functions.LinkRaw, ipUDP}} {
		var out bytes.Buffer
		p := newPrinter(&out, c.link)
		pb := buffers.NewPBuf(1, 256)
		b := buffers.NewBatch(pb, 0, 1, 0)
		b.Append(c.frame, uint32(len(c.frame)), 0)
		p.Process(b)
		if want := " IP 10.0.0.1.1000 > 10.0.0.2.2000: UDP, length 0\n"; !strings.HasSuffix(out.String(), want) {
			t.Errorf("%v: printed %q, want a line ending %q", c.link, out.String(), want)
		}
	}
}

// IP in IP and IPv6 in IP print each header, as tcpdump does; the lines
// are tcpdump 4.99's (-n -S) for the same frames. Behind an IPv4 header
// of protocol 4 that does not decode, the line is the generic one.
func TestPrintTunnels(t *testing.T) {
	ip4 := func(src, dst byte, proto byte, payload []byte) []byte {
		h := []byte{0x45, 0, 0, 0, 0, 1, 0, 0, 64, proto, 0, 0, 10, 0, 0, src, 10, 0, 0, dst}
		binary.BigEndian.PutUint16(h[2:], uint16(20+len(payload)))
		return append(h, payload...)
	}
	ip6 := func(src, dst byte, next byte, payload []byte) []byte {
		h := make([]byte, 40)
		h[0], h[6], h[7] = 0x60, next, 64
		binary.BigEndian.PutUint16(h[4:], uint16(len(payload)))
		copy(h[8:], []byte{0x20, 1, 0xd, 0xb8})
		copy(h[24:], []byte{0x20, 1, 0xd, 0xb8})
		h[23], h[39] = src, dst
		return append(h, payload...)
	}
	tcp := []byte{0x04, 0xd2, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 2, 0, 0, 0, 0, 0}
	udp := []byte{0x03, 0xe8, 0x07, 0xd0, 0, 12, 0, 0, 'a', 'b', 'c', 'd'}
	for _, c := range []struct {
		frame []byte
		want  string
	}{
		{ip4(1, 2, 4, ip4(3, 4, 6, tcp)), "IP 10.0.0.1 > 10.0.0.2: IP 10.0.0.3.1234 > 10.0.0.4.80: Flags [S], seq 1, win 512, length 0"},
		{ip4(1, 2, 41, ip6(1, 2, 17, udp)), "IP 10.0.0.1 > 10.0.0.2: IP6 2001:db8::1.1000 > 2001:db8::2.2000: UDP, length 4"},
		{ip6(1, 2, 41, ip6(2, 1, 6, tcp)), "IP6 2001:db8::1 > 2001:db8::2: IP6 2001:db8::2.1234 > 2001:db8::1.80: Flags [S], seq 1, win 512, length 0"},
		{ip6(1, 2, 4, ip4(3, 4, 17, udp)), "IP6 2001:db8::1 > 2001:db8::2: IP 10.0.0.3.1000 > 10.0.0.4.2000: UDP, length 4"},
		{ip4(1, 2, 4, ip4(3, 4, 4, ip4(1, 4, 6, tcp))), "IP 10.0.0.1 > 10.0.0.2: IP 10.0.0.3 > 10.0.0.4: IP 10.0.0.1.1234 > 10.0.0.4.80: Flags [S], seq 1, win 512, length 0"},
		{ip4(1, 2, 4, nil), "IP 10.0.0.1 > 10.0.0.2: ip-proto-4 0"},
		{ip4(1, 2, 4, []byte{0x45, 0, 0}), "IP 10.0.0.1 > 10.0.0.2: ip-proto-4 3"},
	} {
		frame := append([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x08, 0x00}, c.frame...)
		if c.frame[0]>>4 == 6 {
			frame[12], frame[13] = 0x86, 0xdd
		}
		var out bytes.Buffer
		p := newPrinter(&out, functions.LinkEthernet)
		pb := buffers.NewPBuf(1, 256)
		b := buffers.NewBatch(pb, 0, 1, 0)
		b.Append(frame, uint32(len(frame)), 0)
		p.Process(b)
		if want := " " + c.want + "\n"; !strings.HasSuffix(out.String(), want) {
			t.Errorf("printed %q, want a line ending %q", out.String(), want)
		}
	}
}

// An ARP packet's hardware type is 16 bits: 0x0101 is not Ethernet's 1.
func TestPrintARPHardwareType(t *testing.T) {
	frame := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 1, 2, 3, 4, 5, 0x08, 0x06,
		1, 1, 8, 0, 6, 4, 0, 1, 0, 1, 2, 3, 4, 5, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2}
	var out bytes.Buffer
	p := newPrinter(&out, functions.LinkEthernet)
	b := buffers.NewBatch(buffers.NewPBuf(1, 256), 0, 1, 0)
	b.Append(frame, uint32(len(frame)), 0)
	p.Process(b)
	if want := " ARP, hardware type 257, length 28\n"; !strings.HasSuffix(out.String(), want) {
		t.Errorf("printed %q, want a line ending %q", out.String(), want)
	}
}
