package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	p4 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ffpf-go/ffpf/internal/netnstest"
)

// p4NetJSON is ffpf p4 net --json.
type p4NetJSON struct {
	Switches []struct {
		Name      string `json:"switch"`
		Role      string `json:"role"`
		Copies    uint64 `json:"copies"`
		Functions []struct {
			ID    string         `json:"id"`
			Label string         `json:"label"`
			In    uint64         `json:"in"`
			Out   uint64         `json:"out"`
			State map[string]any `json:"state"`
		} `json:"functions"`
		Ports []struct {
			Port    uint16 `json:"port"`
			In, Out uint64
		} `json:"ports"`
	} `json:"switches"`
}

func parseP4Net(t *testing.T, r cliResult) p4NetJSON {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("ffpf p4 net: exit %d: %s", r.code, r.stderr)
	}
	var doc p4NetJSON
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	return doc
}

// A path of three ffpf p4 switch processes in a network namespace, s1:2
// cabled to s2:1 and s2:2 to s3:1 by veth pairs, s1's port 1 replaying a
// generated trace at its own pace, s3's port 2 recording: ffpf p4 net
// with a file that names their addresses pushes each its role's section
// of postcards and of trajectory, and finds what the same program finds
// on the same trace in its own path of model switches, in everything
// that does not depend on timing: the packets out of the path, the
// copies of each switch (postcards grouped by the switch id in their
// ToS), every function's in, out and state, the port counters.
func TestP4NetProcesses(t *testing.T) {
	ns := netnstest.Alone(t, "p4np", "a path of ffpf p4 switch processes on veths")
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	// A VLAN-tagged frame of 1,518 bytes is more than a veth of MTU
	// 1,500 sends.
	for _, pair := range [][2]string{{"s12", "s21"}, {"s23", "s32"}} {
		ip("link", "add", pair[0], "mtu", "9000", "type", "veth", "peer", "name", pair[1], "mtu", "9000")
		for _, i := range pair {
			exec.Command("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf."+i+".disable_ipv6=1").Run()
			ip("link", "set", i, "up")
		}
	}
	for _, i := range []string{"s12", "s21", "s23", "s32"} {
		netnstest.WaitUp(t, ns, i)
	}
	dir := t.TempDir()
	trace := filepath.Join(dir, "trace.pcap")
	// 3,000 packets of 50 flows, 3,000 a second: s1 replays them over a
	// second, which neither the veths nor the controller fall behind.
	const packets = 3000
	if r := ffpf(t, "gen", "-o", trace, "--packets", fmt.Sprint(packets), "--flows", "50", "--pps", "3000", "--seed", "21"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	if d := pcapSpan(t, trace); d < 999*time.Millisecond || d > time.Second {
		t.Fatalf("the trace of %d packets at 3,000 a second spans %v", packets, d)
	}
	// Room for trajectory's first hop as ffpf compiles it (examples/mafia:
	// resources), on every switch and in the file that describes them.
	res := filepath.Join(dir, "resources.yaml")
	writeFile(t, res, "stages: 48\nstateful_alus: 16\n")
	const room = "resources: {stages: 48, stateful_alus: 16}, "
	for _, c := range []struct{ program, collected string }{
		{"postcards.mafia", "postcards.pcap"},
		{"trajectory.mafia", "trajectories.pcap"},
	} {
		t.Run(strings.TrimSuffix(c.program, ".mafia"), func(t *testing.T) {
			program, err := filepath.Abs(filepath.Join("../../examples/mafia", c.program))
			if err != nil {
				t.Fatal(err)
			}
			// The same program in ffpf p4 net's own path.
			local := filepath.Join(dir, "local", c.program)
			os.MkdirAll(local, 0o755)
			writeFile(t, filepath.Join(local, "path.yaml"), fmt.Sprintf(`program: %[1]s
switches:
  - {%[3]sname: s1, role: first_hop}
  - {%[3]sname: s2, role: intermediate}
  - {%[3]sname: s3, role: last_hop}
links: ["s1:2 s2:1", "s2:2 s3:1"]
ports: {"s1:1": "in:%[2]s", "s3:2": "out:out.pcap"}
routes: {s1: {1: 2}, s2: {1: 2}, s3: {1: 2}}
`, program, trace, room))
			want := parseP4Net(t, ffpf(t, "p4", "net", "--json", filepath.Join(local, "path.yaml")))

			procs := filepath.Join(dir, "procs", c.program)
			os.MkdirAll(procs, 0o755)
			out := filepath.Join(procs, "out.pcap")
			s1 := runSwitch(t, ns, "--device-id", "1", "--port", "1=file:"+trace, "--port", "2=s12", "--pace", "--resources", res)
			s2 := runSwitch(t, ns, "--device-id", "2", "--port", "1=s21", "--port", "2=s23", "--resources", res)
			s3 := runSwitch(t, ns, "--device-id", "3", "--port", "1=s32", "--port", "2=out:"+out, "--resources", res)
			writeFile(t, filepath.Join(procs, "path.yaml"), fmt.Sprintf(`program: %[1]s
switches:
  - {%[5]sname: s1, role: first_hop, p4runtime: %[2]s, device_id: 1}
  - {%[5]sname: s2, role: intermediate, p4runtime: %[3]s, device_id: 2}
  - {%[5]sname: s3, role: last_hop, p4runtime: %[4]s, device_id: 3}
routes: {s1: {1: 2}, s2: {1: 2}, s3: {1: 2}}
`, program, s1.addr, s2.addr, s3.addr, room))
			cmd := exec.Command("ip", "netns", "exec", ns, ffpfBin, "p4", "net", "--json", filepath.Join(procs, "path.yaml"))
			r := runCmd(t, cmd, []string{"p4", "net"})
			got := parseP4Net(t, r)
			if !strings.Contains(r.stderr, "run their programs; the run ends when their ports have been quiet for 1s") {
				t.Errorf("ffpf p4 net does not say what it waits for: %q", r.stderr)
			}
			// Each ran the pipeline (p4net's TestRunElsewhere: the last
			// hop's first) and lost no frame on a veth.
			for _, s := range []*swProc{s1, s2, s3} {
				s.stop(t)
				if !strings.Contains(s.logged(), "pipeline ffpf_path committed") {
					t.Fatalf("no pipeline committed:\n%s", s.logged())
				}
				for _, iface := range []string{"s12", "s21", "s23", "s32"} {
					if strings.Contains(s.logged(), "("+iface+")") && !regexp.MustCompile(`\(`+iface+`\): \d+ frames read, 0 lost while its socket's buffer was full, 0 longer than 64 KiB; 0 refused on sending`).MatchString(s.logged()) {
						t.Errorf("port %s lost or refused frames:\n%s", iface, s.logged())
					}
				}
			}
			if !strings.Contains(s1.logged(), fmt.Sprintf("%d frames in (0 before a pipeline, 0 failed), %d out, %d to the CPU, 0 dropped", packets, packets, want.Switches[0].Copies)) {
				t.Errorf("s1 did not take the trace whole:\n%s", s1.logged())
			}

			if len(got.Switches) != 3 || len(want.Switches) != 3 {
				t.Fatalf("%d switches, %d in the process", len(got.Switches), len(want.Switches))
			}
			for i, g := range got.Switches {
				w := want.Switches[i]
				if g.Name != w.Name || g.Role != w.Role || g.Copies != w.Copies || len(g.Functions) != len(w.Functions) {
					t.Fatalf("%s (%s): %d copies, %d functions; in the process %s (%s): %d, %d",
						g.Name, g.Role, g.Copies, len(g.Functions), w.Name, w.Role, w.Copies, len(w.Functions))
				}
				for j, f := range g.Functions {
					if wf := w.Functions[j]; f.ID != wf.ID || f.In != wf.In || f.Out != wf.Out || !reflect.DeepEqual(f.State, wf.State) {
						t.Errorf("%s %s: in %d out %d state %v; in the process %s: %d %d %v", g.Name, f.ID, f.In, f.Out, f.State, wf.ID, wf.In, wf.Out, wf.State)
					}
				}
				// Every frame entered by port 1 and left by port 2, a copy
				// of those the program collects to the CPU port.
				var ports []string
				for _, p := range g.Ports {
					ports = append(ports, fmt.Sprintf("%d:%d/%d", p.Port, p.In, p.Out))
				}
				wantPorts := fmt.Sprintf("1:%d/0 2:0/%d", packets, packets)
				if g.Copies > 0 {
					wantPorts += fmt.Sprintf(" 255:0/%d", g.Copies)
				}
				if strings.Join(ports, " ") != wantPorts {
					t.Errorf("%s's ports counted %s, want %s", g.Name, strings.Join(ports, " "), wantPorts)
				}
			}
			if f := got.Switches[0].Functions; len(f) == 0 || f[0].In != packets {
				t.Errorf("s1's first function saw %+v of %d packets", f, packets)
			}
			gotOut, wantOut := pcapFrames(t, out), pcapFrames(t, filepath.Join(local, "out.pcap"))
			if len(gotOut) != packets || !reflect.DeepEqual(gotOut, wantOut) {
				t.Errorf("%d frames left the path of processes, %d the path in the process (of %d), not the same", len(gotOut), len(wantOut), packets)
			}
			gotC, wantC := bySwitchID(t, filepath.Join(procs, c.collected)), bySwitchID(t, filepath.Join(local, c.collected))
			if len(wantC) == 0 {
				t.Fatalf("the process collected nothing in %s", c.collected)
			}
			for id, w := range wantC {
				if g := gotC[id]; !reflect.DeepEqual(g, w) {
					t.Errorf("%s: switch %d's %d copies differ from the %d of the process", c.collected, id, len(g), len(w))
				}
			}
			if len(gotC) != len(wantC) {
				t.Errorf("%s: copies from %d switches, %d in the process", c.collected, len(gotC), len(wantC))
			}
		})
	}
}

// bySwitchID groups the frames of a collector's file by the switch id
// the programs tag in their IPv4 ToS, in the order each switch sent them.
func bySwitchID(t *testing.T, file string) map[int][][]byte {
	t.Helper()
	m := map[int][][]byte{}
	for _, f := range pcapFrames(t, file) {
		if at := ipv4At(f); at >= 0 {
			m[int(f[at+1])] = append(m[int(f[at+1])], f)
		}
	}
	return m
}

// ipv4At returns the offset of a frame's IPv4 header behind its VLAN tags,
// -1 when it has none.
func ipv4At(f []byte) int {
	at := 12
	for at+2 <= len(f) {
		switch {
		case f[at] == 0x81 && f[at+1] == 0x00, f[at] == 0x88 && f[at+1] == 0xa8:
			at += 4
		case f[at] == 0x08 && f[at+1] == 0x00 && at+2+20 <= len(f):
			return at + 2
		default:
			return -1
		}
	}
	return -1
}

// Switches that cannot be reached, answer as another device or refuse
// the program: ffpf p4 net exits 1 with the switch's sentence, and no
// switch is left with the path's pipeline or an entry of it; a file that
// mixes switches in the process with switches elsewhere, or cables
// switches that run elsewhere, exits 2.
func TestP4NetElsewhereBadInput(t *testing.T) {
	dir := t.TempDir()
	sent := filepath.Join(dir, "sent.pcap")
	if r := ffpf(t, "gen", "-o", sent, "--packets", "10"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	// One stage: postcards' tags need two.
	small := filepath.Join(dir, "one-stage.yaml")
	writeFile(t, small, "stages: 1\n")
	s1 := runSwitch(t, "", "--device-id", "1", "--port", "1=file:"+sent, "--port", "2=out:"+filepath.Join(dir, "o1.pcap"))
	s2 := runSwitch(t, "", "--device-id", "2", "--port", "1=file:"+sent, "--port", "2=out:"+filepath.Join(dir, "o2.pcap"))
	s3 := runSwitch(t, "", "--device-id", "3", "--port", "1=file:"+sent, "--port", "2=out:"+filepath.Join(dir, "o3.pcap"), "--resources", small)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	program, err := filepath.Abs("../../examples/mafia/postcards.mafia")
	if err != nil {
		t.Fatal(err)
	}
	file := func(name, a2 string, d2 int, extra string) string {
		f := filepath.Join(dir, name+".yaml")
		writeFile(t, f, fmt.Sprintf(`program: %s
switches:
  - {name: s1, role: first_hop, p4runtime: %s, device_id: 1}
  - {name: s2, role: intermediate, p4runtime: %s, device_id: %d}
  - {name: s3, role: last_hop, p4runtime: %s, device_id: 3}
routes: {s1: {1: 2}, s2: {1: 2}, s3: {1: 2}}
%s`, program, s1.addr, a2, d2, s3.addr, extra))
		return f
	}
	for _, c := range []struct {
		file string
		code int
		want string
	}{
		{file("closed", closed, 2, ""), 1, "ffpf: switch s2: cannot reach the switch at " + closed},
		{file("device", s2.addr, 7, ""), 1, "ffpf: switch s2: the switch at " + s2.addr + " refused to arbitrate: no device 7 (this is device 2)"},
		{file("refused", s2.addr, 2, ""), 1, "ffpf: switch s3: the switch at " + s3.addr + " refused to take the pipeline: the pipeline cannot be realized: the program does not fit the switch"},
		{file("links", s2.addr, 2, `links: ["s1:2 s2:1"]`), 2, "links: the switches run elsewhere"},
		{file("ports", s2.addr, 2, `ports: {"s1:1": "in:t.pcap"}`), 2, "ports: the switches run elsewhere"},
		{file("changes", s2.addr, 2, "changes: [{at: 1ms, switch: s1, routes: {1: 3}}]"), 2, "changes: are made at times of the trace"},
	} {
		r := ffpf(t, "p4", "net", "--quiet", "100ms", c.file)
		if r.code != c.code || !strings.HasPrefix(r.stderr, c.want) && !strings.Contains(r.stderr, c.want) || c.code == 1 && strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%s: exit %d, %q; want %d and %q", filepath.Base(c.file), r.code, r.stderr, c.code, c.want)
		}
	}
	mixed := filepath.Join(dir, "mixed.yaml")
	writeFile(t, mixed, fmt.Sprintf("program: %s\nswitches:\n  - {name: s1}\n  - {name: s2, p4runtime: %s}\n", program, s2.addr))
	if r := ffpf(t, "p4", "net", mixed); r.code != 2 || !strings.Contains(r.stderr, "switch s2 runs elsewhere (p4runtime: "+s2.addr+") and s1 in this process") {
		t.Errorf("a mixed network: exit %d, %q", r.code, r.stderr)
	}
	inProcess := filepath.Join(dir, "in-process.yaml")
	writeFile(t, inProcess, fmt.Sprintf("program: %s\nswitches: [{name: s1}]\n", program))
	if r := ffpf(t, "p4", "net", "--quiet", "2s", inProcess); r.code != 2 || !strings.Contains(r.stderr, "--quiet is for switches that run elsewhere") {
		t.Errorf("--quiet in the process: exit %d, %q", r.code, r.stderr)
	}
	if r := ffpf(t, "p4", "net", "--quiet", "0s", file("zero", s2.addr, 2, "")); r.code != 2 || !strings.Contains(r.stderr, "--quiet 0s") {
		t.Errorf("--quiet 0s: exit %d, %q", r.code, r.stderr)
	}
	// s1 and s2 took the program (saved) before s3 refused it: neither
	// runs it, nor holds its routes or clone session.
	for _, s := range []*swProc{s1, s2, s3} {
		if cfg := pipelineOfDevice(t, s.addr, deviceOf(s)); cfg.GetP4Info() != nil {
			t.Errorf("the switch at %s runs the path's pipeline after a refusal: %d tables", s.addr, len(cfg.GetP4Info().GetTables()))
		}
		if n := entriesOf(t, s.addr, deviceOf(s)); n != 0 {
			t.Errorf("the switch at %s holds %d entries after a refusal", s.addr, n)
		}
	}
	for _, s := range []*swProc{s1, s2, s3} {
		s.stop(t)
		if strings.Contains(s.logged(), "committed") || !strings.Contains(s.logged(), "0 frames in (0 before a pipeline") {
			t.Errorf("a switch ran a pipeline:\n%s", s.logged())
		}
	}
}

var deviceRE = regexp.MustCompile(`device (\d+) serving`)

func deviceOf(s *swProc) uint64 {
	var d uint64
	fmt.Sscan(deviceRE.FindStringSubmatch(s.logged())[1], &d)
	return d
}

// entriesOf counts the table entries the switch's pipeline (the one
// saved, or committed) holds.
func entriesOf(t *testing.T, addr string, device uint64) int {
	t.Helper()
	c, ctx := p4rtClient(t, addr)
	rc, err := c.Read(ctx, &p4.ReadRequest{DeviceId: device,
		Entities: []*p4.Entity{{Entity: &p4.Entity_TableEntry{TableEntry: &p4.TableEntry{}}}}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		r, err := rc.Recv()
		if err == io.EOF {
			return n
		}
		if status.Code(err) == codes.FailedPrecondition { // no pipeline: no tables
			return 0
		}
		if err != nil {
			t.Fatalf("reading the entries of %s: %v", addr, err)
		}
		n += len(r.GetEntities())
	}
}

// SIGINT ends a run with switches elsewhere at once, however long they
// would take to go quiet: what they measured so far is printed, exit 0.
func TestP4NetElsewhereInterrupt(t *testing.T) {
	dir := t.TempDir()
	sw := runSwitch(t, "", "--device-id", "4", "--port", "2=out:"+filepath.Join(dir, "o.pcap"))
	program, err := filepath.Abs("../../examples/mafia/postcards.mafia")
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "one.yaml")
	writeFile(t, f, fmt.Sprintf("program: %s\nswitches: [{name: s1, p4runtime: %s, device_id: 4}]\nroutes: {s1: {1: 2}}\n", program, sw.addr))
	cmd := exec.Command(ffpfBin, "p4", "net", "--quiet", "10ms", f)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	select {
	case l := <-lines:
		if !strings.Contains(l, "run their programs") {
			t.Fatalf("ffpf p4 net: %s", l)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("ffpf p4 net does not say it runs")
	}
	select {
	case l, ok := <-lines:
		t.Fatalf("the run ended without packets (%v): %s", ok, l)
	case <-time.After(300 * time.Millisecond): // quiet 30 times over: no packet, no end
	}
	cmd.Process.Signal(os.Interrupt)
	for l := range lines {
		t.Errorf("after SIGINT: %s", l)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("after SIGINT: %v", err)
	}
	want := "s1: 0 frames in, 0 out, 0 to the CPU\ns1: 0 copies to the controller\n  tag#1: 0 in, 0 out\n"
	if !strings.HasPrefix(stdout.String(), want) {
		t.Errorf("after SIGINT:\n%s\nwant\n%s", stdout.String(), want)
	}
	sw.stop(t)
	if !strings.Contains(sw.logged(), "pipeline ffpf_path committed") {
		t.Errorf("the switch ran no pipeline:\n%s", sw.logged())
	}
}

// pcapSpan is the time from a capture's first record to its last.
func pcapSpan(t *testing.T, file string) time.Duration {
	t.Helper()
	var first, last time.Time
	eachPcap(t, file, func(_ []byte, ci gopacket.CaptureInfo) {
		if first.IsZero() {
			first = ci.Timestamp
		}
		last = ci.Timestamp
	})
	return last.Sub(first)
}
