package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/ffpf-go/ffpf/functions/dta/collector"
)

// dtaCollector is a running `ffpf dta collect`.
type dtaCollector struct {
	udp, http string
	cl        *collector.Client
	cmd       *exec.Cmd
	stdout    bytes.Buffer
	done      chan struct{}
	rest      bytes.Buffer
}

func startCollector(t *testing.T, args ...string) *dtaCollector {
	t.Helper()
	c := &dtaCollector{done: make(chan struct{})}
	c.cmd = exec.Command(ffpfBin, append([]string{"dta", "collect", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--sockets", "1"}, args...)...)
	c.cmd.Stdout = &c.stdout
	errPipe, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.cmd.Process.Kill(); c.cmd.Wait() })
	sc := bufio.NewScanner(errPipe)
	if !sc.Scan() {
		t.Fatalf("the collector printed nothing: %v", sc.Err())
	}
	m := regexp.MustCompile(`reports on udp (\S+), queries on http://(\S+);`).FindStringSubmatch(sc.Text())
	if m == nil {
		t.Fatalf("first line: %q", sc.Text())
	}
	go func() {
		for sc.Scan() {
			c.rest.WriteString(sc.Text() + "\n")
		}
		close(c.done)
	}()
	c.udp, c.http = m[1], m[2]
	c.cl = &collector.Client{Server: c.http}
	return c
}

// waitDatagrams waits until the collector has received n datagrams in all.
func (c *dtaCollector) waitDatagrams(t *testing.T, n uint64) *collector.Stats {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := c.cl.Stats(context.Background())
		if err == nil && st.Datagrams >= n {
			if st.Datagrams > n {
				t.Fatalf("the collector received %d datagrams, more than the %d sent", st.Datagrams, n)
			}
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("the collector did not receive %d datagrams: %+v %v", n, st, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop ends the collector with SIGINT and returns its final counters.
func (c *dtaCollector) stop(t *testing.T) collector.Stats {
	t.Helper()
	c.cmd.Process.Signal(syscall.SIGINT)
	<-c.done
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("the collector: %v: %s", err, c.rest.String())
	}
	var st collector.Stats
	if err := json.Unmarshal(c.stdout.Bytes(), &st); err != nil {
		t.Fatalf("the final counters: %v: %q", err, c.stdout.String())
	}
	return st
}

func (c *dtaCollector) query(t *testing.T, args ...string) string {
	t.Helper()
	r := ffpf(t, append([]string{"dta", "query", "--server", c.http}, args...)...)
	if r.code != 0 {
		t.Fatalf("query %v: exit %d: %s", args, r.code, r.stderr)
	}
	return r.stdout
}

// udpPacket is one packet of a test trace, and what the trace implies.
type udpPacket struct {
	src, dst     net.IP
	tos          uint8
	sport, dport uint16
	payload      int
	at           time.Duration // after the trace's start
	wireLen      int           // set by writeTrace
}

// writeTrace writes the packets as Ethernet/IPv4/UDP frames to a pcap file.
func writeTrace(t *testing.T, file string, pkts []udpPacket) {
	t.Helper()
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := pcapgo.NewWriter(f)
	w.WriteFileHeader(65535, layers.LinkTypeEthernet)
	start := time.Unix(1700000000, 0)
	for i := range pkts {
		p := &pkts[i]
		eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
		ip := &layers.IPv4{Version: 4, TTL: 64, TOS: p.tos, Protocol: layers.IPProtocolUDP, SrcIP: p.src, DstIP: p.dst}
		udp := &layers.UDP{SrcPort: layers.UDPPort(p.sport), DstPort: layers.UDPPort(p.dport)}
		udp.SetNetworkLayerForChecksum(ip)
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, udp, gopacket.Payload(make([]byte, p.payload))); err != nil {
			t.Fatal(err)
		}
		b := buf.Bytes()
		p.wireLen = len(b)
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: start.Add(p.at), CaptureLength: len(b), Length: len(b)}, b); err != nil {
			t.Fatal(err)
		}
	}
}

func ip4(a, b, c, d byte) net.IP { return net.IP{a, b, c, d} }

// End to end over loopback UDP, for each primitive: `ffpf run` with the
// dta reporter sends a trace's reports to `ffpf dta collect`, and `ffpf
// dta query` answers what the trace implies, computed here from the
// packets.
func TestDTAEndToEnd(t *testing.T) {
	// Flows 10.0.0.1 … 10.0.0.8 of five packets each, hops 0..4 in
	// ipv4.tos; the last flow has three (a path shorter than B).
	var pkts []udpPacket
	for f := range 8 {
		hops := 5
		if f == 7 {
			hops = 3
		}
		for h := range hops {
			pkts = append(pkts, udpPacket{src: ip4(10, 0, 0, byte(f+1)), dst: ip4(10, 0, 1, byte(5+f%2)), tos: uint8(h),
				sport: 5000 + uint16(h), dport: 1000 + uint16(10*f+h), payload: 10 + 3*f + 7*h, at: time.Duration(len(pkts)) * time.Millisecond})
		}
	}
	trace := filepath.Join(t.TempDir(), "t.pcap")
	writeTrace(t, trace, pkts)

	c := startCollector(t, "--keywrite", "slots=100003,redundancy=2", "--append", "lists=4,size=1000",
		"--keyincrement", "slots=100003,redundancy=2", "--postcarding", "chunks=10007,hops=5")
	to := fmt.Sprintf("to=%q", c.udp)
	var sent uint64
	for _, expr := range []string{
		"(dta,op=keywrite,key=ipv4.src,data=pkt.len,redundancy=2," + to + ")",
		"(dta,op=append,list=3,data=udp.dport," + to + ")",
		"(dta,op=keyincrement,key=ipv4.dst,data=pkt.len,redundancy=2," + to + ")",
		"(dta,op=keyincrement,key=ipv4.src,redundancy=2," + to + ")",
		"(dta,op=postcarding,key=ipv4.src,hop=ipv4.tos,data=udp.dport," + to + ")",
	} {
		r := ffpf(t, "run", "-r", trace, "--json", expr)
		if r.code != 0 {
			t.Fatalf("%s: exit %d: %s", expr, r.code, r.stderr)
		}
		doc := parseRun(t, r)
		st := doc.Functions[len(doc.Functions)-1].State
		if st["reports"] != float64(len(pkts)) || st["sent"] != float64(len(pkts)) {
			t.Fatalf("%s: state %v, want %d reports sent", expr, st, len(pkts))
		}
		sent += uint64(len(pkts))
		c.waitDatagrams(t, sent)
	}

	// What the trace implies.
	lastLen := map[string]int{}   // Key-Write: the last report of a key wins
	count := map[string]int{}     // Key-Increment by source: packets
	bytesTo := map[string]int{}   // Key-Increment by destination: bytes
	path := map[string][]string{} // Postcarding: the dports by hop
	var dports []string           // Append: in order
	for _, p := range pkts {
		s := p.src.String()
		lastLen[s] = p.wireLen
		count[s]++
		bytesTo[p.dst.String()] += p.wireLen
		path[s] = append(path[s], fmt.Sprint(p.dport)) // the hops come in order 0, 1, …
		dports = append(dports, fmt.Sprint(p.dport))
	}
	for s, n := range lastLen {
		if got := c.query(t, "keywrite", s); got != fmt.Sprintln(n) {
			t.Errorf("keywrite %s: %q, want %d", s, got, n)
		}
		if got := c.query(t, "keyincrement", s); got != fmt.Sprintln(count[s]) {
			t.Errorf("keyincrement %s: %q, want %d", s, got, count[s])
		}
		if got, want := c.query(t, "postcarding", s), strings.Join(path[s], " ")+"\n"; got != want {
			t.Errorf("postcarding %s: %q, want %q", s, got, want)
		}
	}
	for d, n := range bytesTo {
		if got := c.query(t, "keyincrement", d); got != fmt.Sprintln(n) {
			t.Errorf("keyincrement %s: %q, want %d", d, got, n)
		}
	}
	if got, want := c.query(t, "append", "3", "1000"), strings.Join(dports, "\n")+"\n"; got != want {
		t.Errorf("append 3: %q, want %q", got, want)
	}
	for _, q := range [][]string{{"keywrite", "10.0.0.9"}, {"postcarding", "10.0.0.9"}} {
		if got := c.query(t, q...); got != "not found\n" {
			t.Errorf("%v: %q, want not found", q, got)
		}
	}
	if got := c.query(t, "keyincrement", "10.0.0.9"); got != "0\n" {
		t.Errorf("keyincrement of a key never written: %q", got)
	}
	st := c.stop(t)
	n := uint64(len(pkts))
	if st.Reports["keywrite"] != n || st.Reports["append"] != n || st.Reports["keyincrement"] != 2*n ||
		st.Reports["postcarding"] != n || st.Total() != 5*n {
		t.Errorf("final counters %+v", st)
	}
	for why, k := range st.Dropped {
		if k != 0 {
			t.Errorf("dropped %d for %s", k, why)
		}
	}
}

// The pipeline: Trumpet events become Key-Write reports whose key
// is the event's bucket (granularity dstip: the destination address), and
// `ffpf dta query keywrite 0x0a000105` answers the event's value.
func TestDTATrumpetPipeline(t *testing.T) {
	dir := t.TempDir()
	// 10.0.1.5 receives 4 × 60 payload bytes in the first 10 ms (the
	// event fires: 240 > 100); 10.0.1.6 receives 50 (it does not); packets
	// to 10.0.2.1 (outside the filter) move the packet clock past the
	// interval's end.
	var pkts []udpPacket
	for i := range 4 {
		pkts = append(pkts, udpPacket{src: ip4(10, 0, 0, 1), dst: ip4(10, 0, 1, 5), sport: 4000, dport: 80, payload: 60, at: time.Duration(i) * time.Millisecond})
	}
	pkts = append(pkts, udpPacket{src: ip4(10, 0, 0, 2), dst: ip4(10, 0, 1, 6), sport: 4000, dport: 80, payload: 50, at: 5 * time.Millisecond})
	for i := range 5 {
		pkts = append(pkts, udpPacket{src: ip4(10, 0, 0, 3), dst: ip4(10, 0, 2, 1), sport: 4000, dport: 80, payload: 10, at: time.Duration(15+10*i) * time.Millisecond})
	}
	trace := filepath.Join(dir, "t.pcap")
	writeTrace(t, trace, pkts)
	want := 0
	for _, p := range pkts {
		if p.dst.Equal(ip4(10, 0, 1, 5)) && p.at < 10*time.Millisecond {
			want += p.payload // volume: the UDP payload
		}
	}
	ev := filepath.Join(dir, "ev.yaml")
	if err := os.WriteFile(ev, []byte("events:\n  - name: big\n    filter: dstip=10.0.1.0/24\n    predicate: sum(volume) > 100\n    granularity: dstip\n    interval: 10ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	c := startCollector(t, "--keywrite", "slots=4M,redundancy=2")
	expr := fmt.Sprintf("(trumpet,events=%s) > (dta,op=keywrite,key=key,data=value,redundancy=2,to=%q)", ev, c.udp)
	r := ffpf(t, "run", "-r", trace, "--json", expr)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	doc := parseRun(t, r)
	st := doc.Functions[len(doc.Functions)-1].State
	if st["reports"] != float64(1) || st["sent"] != float64(1) {
		t.Fatalf("the reporter's state %v: want one report of the one event", st)
	}
	c.waitDatagrams(t, 1)
	for q, want := range map[string]string{"0x0a000105": fmt.Sprintln(want), "10.0.1.5": fmt.Sprintln(want), "10.0.1.6": "not found\n"} {
		if got := c.query(t, "keywrite", q); got != want {
			t.Errorf("keywrite %s: %q, want %q", q, got, want)
		}
	}
	if fin := c.stop(t); fin.Reports["keywrite"] != 1 {
		t.Errorf("final counters %+v", fin)
	}
}
