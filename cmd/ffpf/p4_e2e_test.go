package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	p4 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ffpf-go/ffpf/internal/netnstest"
)

// These tests run ffpf as the P4Runtime controller of the PISA model
// (ffpf p4 switch) and compare what the switch's functions report with
// what the same functions report in userspace on the frames the switch
// received. With root, the switch's ports are veth interfaces in a
// network namespace, fed by ffpf gen -i, its uplink cabled to the NIC of
// the host's XDP flowspace; without, the switch replays a capture file
// into its port and sends up through its CPU port.

// swProc is an ffpf p4 switch running in the background.
type swProc struct {
	cmd  *exec.Cmd
	addr string
	mu   sync.Mutex
	log  bytes.Buffer
	done chan struct{}
}

var servingRE = regexp.MustCompile(`serving P4Runtime on ([0-9.]+:[0-9]+);`)

// runSwitch starts ffpf p4 switch (in namespace ns unless "") with
// args, serving on a free loopback port, and returns once it serves.
func runSwitch(t *testing.T, ns string, args ...string) *swProc {
	t.Helper()
	argv := append([]string{ffpfBin, "p4", "switch", "--p4runtime", "127.0.0.1:0"}, args...)
	if ns != "" {
		argv = append([]string{"ip", "netns", "exec", ns}, argv...)
	}
	s := &swProc{cmd: exec.Command(argv[0], argv[1:]...), done: make(chan struct{})}
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			s.cmd.Process.Kill()
			s.cmd.Wait()
		}
	})
	addr := make(chan string, 1)
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			s.mu.Lock()
			s.log.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if m := servingRE.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case s.addr = <-addr:
	case <-time.After(30 * time.Second):
		t.Fatalf("ffpf p4 switch does not serve: %s", s.logged())
	}
	return s
}

func (s *swProc) logged() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// waitLog waits until the switch logged a line containing what.
func (s *swProc) waitLog(t *testing.T, what string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(s.logged(), what); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the switch never said %q:\n%s", what, s.logged())
		}
	}
}

func (s *swProc) stop(t *testing.T) {
	t.Helper()
	s.cmd.Process.Signal(os.Interrupt)
	s.cmd.Wait()
	<-s.done
}

// p4Expr is the graph of the end-to-end tests: a filter, counters and
// sketches on the switch, and an export above it, which receives what
// the switch sends up.
const p4Expr = `(bpf,"tcp") > (pktcount) > (bytecount) > [(cms,key=5tuple) > (hll,key=dstip) | (export,file=%s)]`

// checkSwitchRun compares the run with the switch (sw) against the same
// graph in userspace on sent, the frames the switch received.
func checkSwitchRun(t *testing.T, dir, sent string, sw runJSON, swExport string) {
	t.Helper()
	userExport := filepath.Join(dir, "user-up.pcap")
	ref := parseRun(t, ffpf(t, "run", "--json", "-r", sent, fmt.Sprintf(p4Expr, userExport)))
	onSwitch := map[string]bool{}
	for _, f := range sw.Functions {
		onSwitch[f.Class] = f.Flowspace == "tor"
	}
	for _, c := range []string{"dev", "bpf", "pktcount", "bytecount"} {
		if !onSwitch[c] {
			t.Errorf("%s does not run on the switch", c)
		}
	}
	for _, f := range sw.Functions {
		if f.Class == "dev" {
			if f.Out != ref.Packets {
				t.Errorf("the switch's port received %d frames, the trace holds %d", f.Out, ref.Packets)
			}
			continue
		}
		i := ref.byClass(f.Class)
		if len(i) != 1 {
			t.Fatalf("no %s in the userspace run", f.Class)
		}
		r := ref.Functions[i[0]]
		if f.In != r.In || f.Out != r.Out || f.Filtered != r.Filtered || f.Dropped != r.Dropped {
			t.Errorf("%s on %s: in %d out %d filtered %d dropped %d; in userspace %d %d %d %d",
				f.ID, f.Flowspace, f.In, f.Out, f.Filtered, f.Dropped, r.In, r.Out, r.Filtered, r.Dropped)
		}
		switch f.Class {
		case "pktcount", "bytecount", "bpf":
			if fmt.Sprint(f.State) != fmt.Sprint(r.State) {
				t.Errorf("%s: state %v on %s, %v in userspace", f.ID, f.State, f.Flowspace, r.State)
			}
		case "cms":
			if f.State["total"] != r.State["total"] || f.State["nokey"] != r.State["nokey"] {
				t.Errorf("cms: total %v nokey %v on %s, %v and %v in userspace", f.State["total"], f.State["nokey"], f.Flowspace, r.State["total"], r.State["nokey"])
			}
		case "hll":
			exact := distinctDst(t, userExport)
			est := f.State["estimate"].(float64)
			m := f.State["registers"].(float64)
			if bound := 3 * 1.04 / math.Sqrt(m); math.Abs(est-float64(exact))/float64(exact) > bound {
				t.Errorf("hll on %s estimates %v distinct destinations, exactly %d (bound %.3f)", f.Flowspace, est, exact, bound)
			}
		}
	}
	// The funnel: what the switch sent up is what its filter passed, the
	// frames libpcap's verdict keeps, each once and unchanged.
	got, want := pcapFrames(t, swExport), pcapFrames(t, userExport)
	if len(got) != len(want) {
		t.Fatalf("the switch sent up %d frames, the filter passes %d of the trace", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("frame %d sent up differs from the trace's", i)
		}
	}
	if i := sw.byClass("bpf"); len(i) == 1 && sw.Functions[i[0]].Out != uint64(len(got)) {
		t.Errorf("the filter passed %d, %d went up", sw.Functions[i[0]].Out, len(got))
	}
}

// vlanFrames counts the frames of a trace whose outermost EtherType is
// a VLAN tag's TPID.
func vlanFrames(t *testing.T, file string) int {
	t.Helper()
	n := 0
	for _, f := range pcapFrames(t, file) {
		if len(f) >= 14 && (f[12] == 0x81 && f[13] == 0x00 || f[12] == 0x88 && f[13] == 0xa8) {
			n++
		}
	}
	return n
}

// distinctDst counts the distinct destination addresses of the packets
// of a trace (IPv4 and IPv6).
func distinctDst(t *testing.T, file string) int {
	t.Helper()
	seen := map[string]bool{}
	for _, f := range pcapFrames(t, file) {
		p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
		if ip, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok {
			seen[ip.DstIP.String()] = true
		} else if ip, ok := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6); ok {
			seen[ip.DstIP.String()] = true
		}
	}
	return len(seen)
}

func pcapFrames(t *testing.T, file string) [][]byte {
	t.Helper()
	var out [][]byte
	eachPcap(t, file, func(data []byte, _ gopacket.CaptureInfo) { out = append(out, bytes.Clone(data)) })
	return out
}

// eachPcap calls f with each record of a capture file.
func eachPcap(t *testing.T, file string, f func([]byte, gopacket.CaptureInfo)) {
	t.Helper()
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	r, err := pcapgo.NewReader(fh)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	for {
		data, ci, err := r.ReadPacketData()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		f(data, ci)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitSentUp waits until the run with the switch exported (to up) as
// many frames as the filter passes of sent, in userspace.
func waitSentUp(t *testing.T, dir, sent, up string) {
	t.Helper()
	ref := filepath.Join(dir, "ref.pcap")
	if r := ffpf(t, "run", "-r", sent, fmt.Sprintf(`(bpf,"tcp") > (export,file=%s)`, ref)); r.code != 0 {
		t.Fatal(r.stderr)
	}
	waitRecords(t, up, len(pcapFrames(t, ref)))
}

// waitRecords waits until a capture file holds n records.
func waitRecords(t *testing.T, file string, n int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); pcapRecords(file) < uint64(n); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %d records, want %d", file, pcapRecords(file), n)
		}
	}
}

// The switch replays a generated trace into its port swp1 and sends up
// through its CPU port: no root needed.
func TestP4SwitchFromFile(t *testing.T) {
	dir := t.TempDir()
	sent := filepath.Join(dir, "sent.pcap")
	// No truncated frames: a switch receives a frame whole, and a
	// capture file replayed into its port gives it what was captured.
	// The switch replays the file as fast as it can, and its server
	// holds 1,024 messages for a slow controller: fewer go up.
	if r := ffpf(t, "gen", "-o", sent, "--packets", "1500", "--seed", "5"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	sw := runSwitch(t, "", "--device-id", "1", "--port", "2=file:"+sent)
	h := filepath.Join(dir, "h.yaml")
	writeFile(t, h, fmt.Sprintf("children:\n  - name: tor\n    kind: p4\n    p4runtime: %s\n    device_id: 1\n    uplink: cpu\n    interfaces: [{name: swp1, port: 2}]\n", sw.addr))
	up := filepath.Join(dir, "up.pcap")
	c := startCapture(t, "", "run", "--hierarchy", h, "-i", "swp1", "--json", fmt.Sprintf(p4Expr, up))
	sw.waitLog(t, "the capture files are replayed")
	waitSentUp(t, dir, sent, up)
	res := c.stop(t)
	sw.stop(t)
	checkSwitchRun(t, dir, sent, res, up)
}

// The switch in a network namespace, its ports veth interfaces: frames
// from ffpf gen -i enter at swp1, what passes goes up the link to the
// NIC of the host's XDP flowspace, where ffpf reads it.
func TestP4SwitchInNamespace(t *testing.T) {
	nsA, nsB, ifA, ifB := netnstest.Pair(t, "ffp4", "the P4 switch on veth ports", 1)
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	up, nic := ifB+"u", ifB+"n"
	ip("-n", nsB, "link", "add", up, "type", "veth", "peer", "name", nic)
	for _, i := range []string{up, nic, "lo"} {
		ip("-n", nsB, "link", "set", i, "up")
	}
	for _, i := range []string{up, nic} {
		exec.Command("ip", "netns", "exec", nsB, "sysctl", "-qw", "net.ipv6.conf."+i+".disable_ipv6=1").Run()
	}
	dir := t.TempDir()
	sw := runSwitch(t, nsB, "--device-id", "1", "--port", "2="+ifB, "--port", "1="+up)
	h := filepath.Join(dir, "h.yaml")
	writeFile(t, h, fmt.Sprintf(`children:
  - name: kernel
    kind: kernel
    children:
      - name: xdp:%s
        kind: xdp
        interface: %s
        children:
          - name: tor
            kind: p4
            p4runtime: %s
            device_id: 1
            uplink: 1
            interfaces: [{name: swp1, port: 2}]
`, nic, nic, sw.addr))
	upFile := filepath.Join(dir, "up.pcap")
	c := startCapture(t, nsB, "run", "--hierarchy", h, "-i", "swp1", "--json", fmt.Sprintf(p4Expr, upFile))
	sw.waitLog(t, "pipeline ffpf committed")
	waitFile(t, upFile)
	time.Sleep(300 * time.Millisecond) // the uplink's capture is open
	sent := filepath.Join(dir, "sent.pcap")
	// VLAN-tagged frames among them (gen's default share), which the
	// switch's port reads as they were on the wire, the tag the kernel
	// took off put back; 20,000 a second, which its socket's buffer
	// holds through a second of the switch falling behind.
	if o, err := exec.Command("ip", "netns", "exec", nsA, ffpfBin, "gen", "-i", ifA, "--packets", "4000", "--pps", "20000", "--seed", "5", "-o", sent).CombinedOutput(); err != nil {
		t.Fatalf("gen: %v: %s", err, o)
	}
	if n := vlanFrames(t, sent); n < 100 {
		t.Fatalf("the trace holds %d VLAN-tagged frames", n)
	}
	waitSentUp(t, dir, sent, upFile)
	res := c.stop(t)
	sw.stop(t)
	if !regexp.MustCompile(`port 2 \(`+ifB+`\): \d+ frames read, 0 lost while its socket's buffer was full, 0 longer than 64 KiB; 0 refused on sending`).MatchString(sw.logged()) ||
		!regexp.MustCompile(`port 1 \(`+up+`\): \d+ frames read, 0 lost .*; 0 refused on sending`).MatchString(sw.logged()) {
		t.Errorf("the switch's ports lost or refused frames:\n%s", sw.logged())
	}
	checkSwitchRun(t, dir, sent, res, upFile)
}

// A switch that cannot be reached, answers as another device or refuses
// the program: exit 1 with the switch's message; resources out of reason
// in the hierarchy: exit 2 naming the field.
func TestP4SwitchBadInput(t *testing.T) {
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	hier := func(name, addr, device, extra string) string {
		h := filepath.Join(dir, name+".yaml")
		writeFile(t, h, fmt.Sprintf("children:\n  - name: tor\n    kind: p4\n    p4runtime: %s\n    device_id: %s\n    uplink: cpu\n    interfaces: [{name: swp1, port: 2}]\n%s", addr, device, extra))
		return h
	}
	expr := `(pktcount) > (bytecount)`
	r := ffpf(t, "run", "--hierarchy", hier("closed", closed, "1", ""), "-i", "swp1", expr)
	if r.code != 1 || !strings.Contains(r.stderr, "cannot reach the switch at "+closed) || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("an unreachable switch: exit %d, %q", r.code, r.stderr)
	}
	sent := filepath.Join(dir, "sent.pcap")
	if r := ffpf(t, "gen", "-o", sent, "--packets", "10"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	sw := runSwitch(t, "", "--device-id", "1", "--port", "2=file:"+sent)
	r = ffpf(t, "run", "--hierarchy", hier("device", sw.addr, "7", ""), "-i", "swp1", expr)
	if r.code != 1 || !strings.Contains(r.stderr, "no device 7 (this is device 1)") {
		t.Errorf("another device: exit %d, %q", r.code, r.stderr)
	}
	// A switch of one stage, Tofino-1's otherwise, that the hierarchy
	// file says nothing of (so ffpf places for twelve stages): a
	// count-min sketch of 5 rows is 5 registers, each read-modify-written
	// by a stateful ALU of its own, and a stage has 4; no lowering fits it
	// into one stage, whatever it does with the rest of the program.
	res := filepath.Join(dir, "one-stage.yaml")
	writeFile(t, res, "stages: 1\n")
	small := runSwitch(t, "", "--device-id", "1", "--port", "2=file:"+sent, "--resources", res)
	wide := `(cms,key=5tuple,depth=5)`
	if r := ffpf(t, "place", "--hierarchy", hier("refused", small.addr, "1", ""), "-i", "swp1", wide); r.code != 0 || !strings.Contains(r.stdout, "cms#1 ") || !strings.Contains(r.stdout, "switch tor: dev#1, cms#1") {
		t.Fatalf("the sketch is not placed on a switch of twelve stages: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = ffpf(t, "run", "--hierarchy", hier("refused", small.addr, "1", ""), "-i", "swp1", wide)
	if r.code != 1 || !strings.Contains(r.stderr, "the switch at "+small.addr+" refused to take the pipeline: ") ||
		!strings.Contains(r.stderr, "does not fit the switch") || !strings.Contains(r.stderr, "the switch has 1 stages") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("a refused pipeline: exit %d, %q", r.code, r.stderr)
	}
	if strings.Contains(small.logged(), "committed") {
		t.Errorf("the refused pipeline was committed:\n%s", small.logged())
	}
	if cfg := pipelineOf(t, small.addr); cfg.GetP4Info() != nil || len(cfg.GetP4DeviceConfig()) != 0 {
		t.Errorf("the switch holds a pipeline after refusing it: %d tables", len(cfg.GetP4Info().GetTables()))
	}
	for _, c := range []struct{ extra, want string }{
		{"    resources: {stages: 0}\n", "resource stages: 0 is out of range"},
		{"    resources: {sram_blocks: 1000000}\n", "resource sram_blocks: 1000000 is out of range"},
	} {
		r = ffpf(t, "place", "--hierarchy", hier("absurd", sw.addr, "1", c.extra), "-i", "swp1", expr)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || !strings.Contains(r.stderr, "absurd.yaml:8: ") {
			t.Errorf("%s: exit %d, %q", strings.TrimSpace(c.extra), r.code, r.stderr)
		}
	}
	sw.stop(t)
	small.stop(t)
}

// pipelineOf asks the switch at addr (device 1) for the pipeline it has
// committed.
func pipelineOf(t *testing.T, addr string) *p4.ForwardingPipelineConfig {
	t.Helper()
	return pipelineOfDevice(t, addr, 1)
}

// pipelineOfDevice asks device at addr for the pipeline it has committed.
func pipelineOfDevice(t *testing.T, addr string, device uint64) *p4.ForwardingPipelineConfig {
	t.Helper()
	c, ctx := p4rtClient(t, addr)
	r, err := c.GetForwardingPipelineConfig(ctx, &p4.GetForwardingPipelineConfigRequest{DeviceId: device, ResponseType: p4.GetForwardingPipelineConfigRequest_ALL})
	if err != nil {
		t.Fatal(err)
	}
	return r.GetConfig()
}

// p4rtClient is a P4Runtime client of the switch at addr, and a context
// that bounds its calls, both ended with the test.
func p4rtClient(t *testing.T, addr string) (p4.P4RuntimeClient, context.Context) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return p4.NewP4RuntimeClient(conn), ctx
}
