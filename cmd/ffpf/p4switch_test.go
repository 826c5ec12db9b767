package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	p4cfg "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4 "github.com/p4lang/p4runtime/go/p4/v1"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ffpf-go/ffpf/flowspaces/p4/server/p4infotest"
	"github.com/ffpf-go/ffpf/functions/p4gen"
	"github.com/ffpf-go/ffpf/internal/netnstest"
)

// p4Switch is a running `ffpf p4 switch` and a P4Runtime client of it.
type p4Switch struct {
	t      *testing.T
	cmd    *exec.Cmd
	addr   string
	mu     sync.Mutex
	stderr strings.Builder
	lines  chan string
	c      p4.P4RuntimeClient
	stream p4.P4Runtime_StreamChannelClient
	msgs   chan *p4.StreamMessageResponse
	held   []*p4.StreamMessageResponse // received, not yet asked for
	info   *p4cfg.P4Info
}

func startSwitch(t *testing.T, args ...string) *p4Switch {
	t.Helper()
	s := &p4Switch{t: t, lines: make(chan string, 100), msgs: make(chan *p4.StreamMessageResponse, 100)}
	s.cmd = exec.Command(ffpfBin, append([]string{"p4", "switch", "--p4runtime", "127.0.0.1:0"}, args...)...)
	errPipe, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.cmd.Process.Kill(); s.cmd.Wait() })
	sc := bufio.NewScanner(errPipe)
	if !sc.Scan() {
		t.Fatalf("the switch printed nothing: %v", sc.Err())
	}
	first := sc.Text()
	m := regexp.MustCompile(`serving P4Runtime on (\S+);.*no pipeline yet: forwarding nothing`).FindStringSubmatch(first)
	if m == nil {
		t.Fatalf("first line: %q", first)
	}
	s.addr = m[1]
	go func() {
		for sc.Scan() {
			s.mu.Lock()
			s.stderr.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	s.c = p4.NewP4RuntimeClient(conn)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if s.stream, err = s.c.StreamChannel(ctx); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			m, err := s.stream.Recv()
			if err != nil {
				return
			}
			s.msgs <- m
		}
	}()
	if err := s.stream.Send(&p4.StreamMessageRequest{Update: &p4.StreamMessageRequest_Arbitration{
		Arbitration: &p4.MasterArbitrationUpdate{DeviceId: 1, ElectionId: &p4.Uint128{Low: 1}}}}); err != nil {
		t.Fatal(err)
	}
	if m := s.next(func(m *p4.StreamMessageResponse) bool { return m.GetArbitration() != nil }); m.GetArbitration().GetStatus().GetCode() != 0 {
		t.Fatalf("not the primary: %v", m)
	}
	return s
}

// next returns the first stream message that pick takes; the others
// stay for later calls.
func (s *p4Switch) next(pick func(*p4.StreamMessageResponse) bool) *p4.StreamMessageResponse {
	s.t.Helper()
	for i, m := range s.held {
		if pick(m) {
			s.held = append(s.held[:i], s.held[i+1:]...)
			return m
		}
	}
	deadline := time.After(20 * time.Second)
	for {
		select {
		case m := <-s.msgs:
			if pick(m) {
				return m
			}
			s.held = append(s.held, m)
		case <-deadline:
			s.t.Fatal("no stream message within 20 s")
		}
	}
}

// waitLine waits for a line of stderr containing sub.
func (s *p4Switch) waitLine(sub string) {
	s.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				s.t.Fatalf("the switch ended without saying %q", sub)
			}
			if strings.Contains(l, sub) {
				return
			}
		case <-deadline:
			s.t.Fatalf("the switch did not say %q within 20 s", sub)
		}
	}
}

// program saves p4infotest.Switch, installs entries, a clone session to
// the CPU and the digest in it, then commits it all at once: route
// 10.0.0.3 to the CPU, everything else (the default) out of port 2.
func (s *p4Switch) program() {
	s.t.Helper()
	prog := p4infotest.Switch()
	s.info = p4infotest.P4Info(prog)
	dc, err := p4gen.EncodeJSON(prog)
	if err != nil {
		s.t.Fatal(err)
	}
	ctx := context.Background()
	id := &p4.Uint128{Low: 1}
	if _, err := s.c.SetForwardingPipelineConfig(ctx, &p4.SetForwardingPipelineConfigRequest{DeviceId: 1, ElectionId: id,
		Action: p4.SetForwardingPipelineConfigRequest_VERIFY_AND_SAVE, Config: &p4.ForwardingPipelineConfig{P4Info: s.info, P4DeviceConfig: dc}}); err != nil {
		s.t.Fatal(err)
	}
	name := func(kind string, n string) uint32 {
		var pre []*p4cfg.Preamble
		for _, t := range s.info.GetTables() {
			pre = append(pre, t.GetPreamble())
		}
		for _, a := range s.info.GetActions() {
			pre = append(pre, a.GetPreamble())
		}
		for _, p := range pre {
			if p.GetName() == "ffpf_ingress.sw_1_"+n {
				return p.GetId()
			}
		}
		s.t.Fatalf("no %s %s", kind, n)
		return 0
	}
	route := name("table", "route")
	fwd, cpu := name("action", "fwd"), name("action", "to_cpu")
	te := func(t p4.Update_Type, e *p4.TableEntry) *p4.Update {
		return &p4.Update{Type: t, Entity: &p4.Entity{Entity: &p4.Entity_TableEntry{TableEntry: e}}}
	}
	action := func(id uint32, params ...[]byte) *p4.TableAction {
		a := &p4.Action{ActionId: id}
		for i, v := range params {
			a.Params = append(a.Params, &p4.Action_Param{ParamId: uint32(i + 1), Value: v})
		}
		return &p4.TableAction{Type: &p4.TableAction_Action{Action: a}}
	}
	us := []*p4.Update{
		te(p4.Update_INSERT, &p4.TableEntry{TableId: route, Match: []*p4.FieldMatch{{FieldId: 1,
			FieldMatchType: &p4.FieldMatch_Exact_{Exact: &p4.FieldMatch_Exact{Value: []byte{10, 0, 0, 3}}}}}, Action: action(cpu)}),
		te(p4.Update_MODIFY, &p4.TableEntry{TableId: route, IsDefaultAction: true, Action: action(fwd, []byte{2})}),
		{Type: p4.Update_INSERT, Entity: &p4.Entity{Entity: &p4.Entity_PacketReplicationEngineEntry{PacketReplicationEngineEntry: &p4.PacketReplicationEngineEntry{
			Type: &p4.PacketReplicationEngineEntry_CloneSessionEntry{CloneSessionEntry: &p4.CloneSessionEntry{SessionId: 1,
				Replicas: []*p4.Replica{{PortKind: &p4.Replica_Port{Port: []byte{0xff, 0xff, 0xff, 0xfd}}}}}}}}}},
		{Type: p4.Update_INSERT, Entity: &p4.Entity{Entity: &p4.Entity_DigestEntry{DigestEntry: &p4.DigestEntry{
			DigestId: s.info.GetDigests()[0].GetPreamble().GetId(), Config: &p4.DigestEntry_Config{MaxListSize: 1}}}}},
	}
	if _, err := s.c.Write(ctx, &p4.WriteRequest{DeviceId: 1, ElectionId: id, Updates: us}); err != nil {
		s.t.Fatal(err)
	}
	if _, err := s.c.SetForwardingPipelineConfig(ctx, &p4.SetForwardingPipelineConfigRequest{DeviceId: 1, ElectionId: id,
		Action: p4.SetForwardingPipelineConfigRequest_COMMIT}); err != nil {
		s.t.Fatal(err)
	}
}

// counted reads the program's counter.
func (s *p4Switch) counted() int64 {
	s.t.Helper()
	rc, err := s.c.Read(context.Background(), &p4.ReadRequest{DeviceId: 1, Entities: []*p4.Entity{{Entity: &p4.Entity_CounterEntry{
		CounterEntry: &p4.CounterEntry{CounterId: s.info.GetCounters()[0].GetPreamble().GetId()}}}}})
	if err != nil {
		s.t.Fatal(err)
	}
	m, err := rc.Recv()
	if err != nil {
		s.t.Fatal(err)
	}
	return m.GetEntities()[0].GetCounterEntry().GetData().GetPacketCount()
}

// stop sends SIGINT and returns the exit status and what was printed.
func (s *p4Switch) stop() (int, string) {
	s.t.Helper()
	s.cmd.Process.Signal(syscall.SIGINT)
	err := s.cmd.Wait()
	for range s.lines {
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		s.t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return code, s.stderr.String()
}

// udpFrame is an Ethernet/IPv4/UDP frame to dst:dport.
func udpFrame(dst byte, sport, dport uint16) []byte {
	b := make([]byte, 14+20+8+4)
	copy(b, []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
	copy(ip[12:], []byte{10, 0, 0, 1, 10, 0, 0, dst})
	binary.BigEndian.PutUint16(ip[20:], sport)
	binary.BigEndian.PutUint16(ip[22:], dport)
	binary.BigEndian.PutUint16(ip[24:], 12)
	return b
}

// TestP4SwitchFilePorts: a capture file replayed into port 1 once the
// controller commits its pipeline, what leaves port 2 recorded; the
// controller gets the PacketIns and the digest and reads the counter;
// SIGINT ends the switch cleanly with its accounting.
func TestP4SwitchFilePorts(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.pcap"), filepath.Join(dir, "out.pcap")
	dns, toCPU, other := udpFrame(2, 1000, 53), udpFrame(3, 7, 80), udpFrame(9, 7, 80)
	f, err := os.Create(in)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriter(f)
	w.WriteFileHeader(65536, layers.LinkTypeEthernet)
	t0 := time.Unix(1700000000, 0)
	for i, fr := range [][]byte{dns, toCPU, other} {
		w.WritePacket(gopacket.CaptureInfo{Timestamp: t0.Add(time.Duration(i) * time.Millisecond), CaptureLength: len(fr), Length: len(fr)}, fr)
	}
	f.Close()

	s := startSwitch(t, "--port", "1=file:"+in, "--port", "2=out:"+out, "--rate", "2=1000")
	s.program()
	s.waitLine("the capture files are replayed")
	for i, want := range [][]byte{dns, toCPU} {
		m := s.next(func(m *p4.StreamMessageResponse) bool { return m.GetPacket() != nil })
		if string(m.GetPacket().GetPayload()) != string(want) || string(m.GetPacket().GetMetadata()[0].GetValue()) != "\x01" {
			t.Errorf("PacketIn %d: %x, %v", i, m.GetPacket().GetPayload(), m.GetPacket().GetMetadata())
		}
	}
	d := s.next(func(m *p4.StreamMessageResponse) bool { return m.GetDigest() != nil }).GetDigest()
	if ms := d.GetData()[0].GetStruct().GetMembers(); string(ms[0].GetBitstring()) != "\x03\xe8" || string(ms[1].GetBitstring()) != "\x01" {
		t.Errorf("digest %v", d)
	}
	if n := s.counted(); n != 1 {
		t.Errorf("counter: %d packets, want 1", n)
	}
	code, stderr := s.stop()
	if code != 0 || !strings.Contains(stderr, "3 frames in (0 before a pipeline, 0 failed), 2 out, 2 to the CPU") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	rf, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	r, err := pcapgo.NewReader(rf)
	if err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	for {
		data, _, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, data)
	}
	if len(got) != 2 || string(got[0]) != string(dns) || string(got[1]) != string(other) {
		t.Fatalf("port 2 recorded %d frames: %x", len(got), got)
	}
}

// TestP4SwitchUsage: bad flags and resources exit 2 with one sentence;
// a missing interface exits 1.
func TestP4SwitchUsage(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "r.yaml")
	os.WriteFile(bad, []byte("stages: 12\nsram_blocks: 0\n"), 0o644)
	unknown := filepath.Join(dir, "u.yaml")
	os.WriteFile(unknown, []byte("stagez: 12\n"), 0o644)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"p4", "switch", "--port", "1=out:x.pcap"}, 2, "needs --p4runtime ADDR"},
		{[]string{"p4", "switch", "--p4runtime", "127.0.0.1:0"}, 2, "at least one --port"},
		{[]string{"p4", "switch", "--p4runtime", "127.0.0.1:0", "--port", "511=eth0"}, 2, "N a port 0 to 510"},
		{[]string{"p4", "switch", "--p4runtime", "127.0.0.1:0", "--port", "255=eth0"}, 2, "is the CPU port"},
		{[]string{"p4", "switch", "--p4runtime", "127.0.0.1:0", "--port", "1=eth0", "--port", "1=eth1"}, 2, "given twice"},
		{[]string{"p4", "switch", "--p4runtime", "127.0.0.1:0", "--port", "1=eth0", "--rate", "1=-5"}, 2, "is not PORT=PPS"},
		{[]string{"p4", "switch", "--p4runtime", "127.0.0.1:0", "--port", "1=eth0", "--resources", bad}, 2, "resource sram_blocks: 0 is out of range"},
		{[]string{"p4", "switch", "--p4runtime", "127.0.0.1:0", "--port", "1=eth0", "--resources", unknown}, 2, "field stagez not found"},
		{[]string{"p4", "switch", "--p4runtime", "127.0.0.1:0", "--port", "1=ffpfnosuchif0"}, 1, "no network interface ffpfnosuchif0"},
		{[]string{"p4", "switch", "--p4runtime", "127.0.0.1:0", "--port", "1=file:" + filepath.Join(dir, "none.pcap")}, 1, "no such file"},
		{[]string{"p4", "frobnicate"}, 2, "unknown p4 command"},
	} {
		r := ffpf(t, c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 && c.code != 2 {
			t.Errorf("ffpf %v: exit %d, %q; want %d and %q", c.args, r.code, r.stderr, c.code, c.want)
		}
	}
}

// TestP4SwitchVeth: the switch between two veth pairs in network
// namespaces: frames sent into port 1 leave port 2 unchanged and in
// order, one routed to the CPU comes to the controller as a PacketIn.
func TestP4SwitchVeth(t *testing.T) {
	nsA, nsB1, ifA, ifB1 := netnstest.Pair(t, "p4s", "the switch on veth ports", 1)
	nsA2, nsB, ifA2, ifB := netnstest.Pair(t, "p4t", "the switch on veth ports", 1)
	// The switch's two ends come to this process's namespace (its
	// loopback serves P4Runtime); removing the namespaces removes them.
	for _, x := range [][2]string{{nsB1, ifB1}, {nsA2, ifA2}} {
		if out, err := exec.Command("ip", "-n", x[0], "link", "set", x[1], "netns", fmt.Sprint(os.Getpid())).CombinedOutput(); err != nil {
			t.Fatalf("moving %s: %v: %s", x[1], err, out)
		}
		exec.Command("sysctl", "-qw", "net.ipv6.conf."+x[1]+".disable_ipv6=1").Run()
		if out, err := exec.Command("ip", "link", "set", x[1], "up").CombinedOutput(); err != nil {
			t.Fatalf("%s up: %v: %s", x[1], err, out)
		}
	}
	// What leaves port 2, read in the far namespace.
	var rfd int
	netnstest.In(t, nsB, func() { rfd = packetSocket(t, ifB) })
	defer unix.Close(rfd)
	s := startSwitch(t, "--port", "1="+ifB1, "--port", "2="+ifA2)
	s.program()
	var sent [][]byte
	for i := range 100 {
		sent = append(sent, udpFrame(9, uint16(2000+i), 80))
	}
	sent = append(sent, udpFrame(3, 7, 80))
	netnstest.In(t, nsA, func() {
		sfd := packetSocket(t, ifA)
		defer unix.Close(sfd)
		for _, f := range sent {
			if _, err := unix.Write(sfd, f); err != nil {
				t.Errorf("sending: %v", err)
			}
			time.Sleep(200 * time.Microsecond)
		}
	})
	var got [][]byte
	buf := make([]byte, 2048)
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < 100 && time.Now().Before(deadline) {
		n, from, err := unix.Recvfrom(rfd, buf, 0)
		if err != nil {
			continue
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		got = append(got, append([]byte(nil), buf[:n]...))
	}
	if len(got) != 100 {
		t.Fatalf("%d frames left port 2, want 100", len(got))
	}
	for i := range got {
		if string(got[i]) != string(sent[i]) {
			t.Fatalf("frame %d left as %x, sent %x", i, got[i], sent[i])
		}
	}
	m := s.next(func(m *p4.StreamMessageResponse) bool { return m.GetPacket() != nil })
	if string(m.GetPacket().GetPayload()) != string(sent[100]) {
		t.Errorf("PacketIn %x", m.GetPacket().GetPayload())
	}
	if code, stderr := s.stop(); code != 0 || !strings.Contains(stderr, "101 frames in (0 before a pipeline, 0 failed), 100 out, 1 to the CPU") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
}

// packetSocket opens an AF_PACKET socket on iface, reads timing out
// every 100 ms.
func packetSocket(t *testing.T, iface string) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(uint16(unix.ETH_P_ALL)<<8|uint16(unix.ETH_P_ALL)>>8))
	if err != nil {
		t.Fatal(err)
	}
	ifc, err := net.InterfaceByName(iface)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: uint16(unix.ETH_P_ALL)<<8 | uint16(unix.ETH_P_ALL)>>8, Ifindex: ifc.Index}); err != nil {
		t.Fatal(err)
	}
	tv := unix.Timeval{Usec: 100000}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	return fd
}
