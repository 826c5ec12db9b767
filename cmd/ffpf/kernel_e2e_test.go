package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/google/gopacket/pcapgo"
	"github.com/vishvananda/netlink"

	"github.com/ffpf-go/ffpf/flowspaces/kernel"
	"github.com/ffpf-go/ffpf/internal/netnstest"
)

// These tests put functions in the kernel (tc) and XDP flowspaces of a
// veth interface in a network namespace they create, transmit a generated
// trace into it from another namespace, and compare what each placement
// counted with each other and with libpcap's verdicts on the frames that
// went out. They need root, ip(8) and tcpdump; under CI=true they must
// run, elsewhere they skip when something is missing.

// netnsPair creates two namespaces joined by a veth pair, removed at the
// end (netnstest.Pair).
func netnsPair(t *testing.T) (nsA, nsB, ifA, ifB string) {
	t.Helper()
	return netnsPairQueues(t, 1)
}

// netnsPairQueues is netnsPair with veth interfaces of several queues.
func netnsPairQueues(t *testing.T, queues int) (nsA, nsB, ifA, ifB string) {
	t.Helper()
	nsA, nsB, ifA, ifB = netnstest.Pair(t, "ffk", "the eBPF flowspaces", queues)
	pairs.Store(t.Name(), [2]string{nsB, ifB})
	t.Cleanup(func() { pairs.Delete(t.Name()) })
	return nsA, nsB, ifA, ifB
}

// pairs maps a test's name to the namespace and interface its runs
// capture on (the receiving end of its pair): what waitPrograms and
// rxPackets look at, so that other tests and other test binaries running
// at the same time do not count.
var pairs sync.Map

// testIface returns the receiving namespace and interface of t's pair (or
// of its parent's, for a subtest).
func testIface(t *testing.T) (ns, ifname string) {
	t.Helper()
	for name := t.Name(); ; {
		if v, ok := pairs.Load(name); ok {
			p := v.([2]string)
			return p[0], p[1]
		}
		i := strings.LastIndex(name, "/")
		if i < 0 {
			t.Fatal("the test has no netnsPair")
		}
		name = name[:i]
	}
}

// capture is an ffpf run in a namespace, stopped by SIGINT.
type capture struct {
	cmd      *exec.Cmd
	out, err bytes.Buffer
}

func startCapture(t *testing.T, ns string, args ...string) *capture {
	t.Helper()
	c := &capture{cmd: exec.Command("ip", append([]string{"netns", "exec", ns, ffpfBin}, args...)...)}
	if ns == "" { // this namespace
		c.cmd = exec.Command(ffpfBin, args...)
	}
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.err
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A test that fails before it stops the run must not leave it running
	// (and its programs counted by the next test).
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			c.cmd.Process.Kill()
			c.cmd.Wait()
		}
	})
	return c
}

func (c *capture) stop(t *testing.T) runJSON {
	t.Helper()
	c.cmd.Process.Signal(os.Interrupt)
	return c.wait(t)
}

// wait waits for a run interrupted (once: a second signal kills it) to
// end, and returns its --json document.
func (c *capture) wait(t *testing.T) runJSON {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%v: %v: %s", c.cmd.Args, err, c.err.String())
		}
	case <-time.After(time.Minute):
		c.cmd.Process.Kill()
		t.Fatalf("%v does not stop on SIGINT", c.cmd.Args)
	}
	return parseRun(t, cliResult{c.out.String(), c.err.String(), 0})
}

// waitFile waits until a run has created the file (its export exists, so
// its sources, opened first, are capturing).
func waitFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not created", path)
		}
	}
}

// ffpfPrograms counts the eBPF programs attached to the test's own
// interface: XDP, TCX (both directions) and clsact filters. Programs of
// other runs on the machine are not counted, nor the placeholder that
// holds an XDP hook until its run starts (kernel.HoldName).
func ffpfPrograms(t *testing.T) int {
	t.Helper()
	ns, ifname := testIface(t)
	n := 0
	netnstest.In(t, ns, func() {
		l, err := netlink.LinkByName(ifname)
		if err != nil {
			t.Fatalf("%s in %s: %v", ifname, ns, err)
		}
		if x := l.Attrs().Xdp; x != nil && x.Attached && !holding(x.ProgId) {
			n++
		}
		for _, a := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
			if r, err := link.QueryPrograms(link.QueryOptions{Target: l.Attrs().Index, Attach: a}); err == nil {
				n += len(r.Programs)
			}
		}
		for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
			fs, _ := netlink.FilterList(l, parent)
			for _, f := range fs {
				if _, ok := f.(*netlink.BpfFilter); ok {
					n++
				}
			}
		}
	})
	return n
}

// holding reports whether program id is the placeholder that holds an XDP
// hook until its run starts.
func holding(id uint32) bool {
	p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
	if err != nil {
		return false
	}
	defer p.Close()
	info, err := p.Info()
	return err == nil && info.Name == kernel.HoldName
}

// waitPrograms waits until the test's interface holds want eBPF programs.
func waitPrograms(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for ffpfPrograms(t) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d eBPF programs attached to the test's interface, want %d", ffpfPrograms(t), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rxPackets is the receive counter of the test's interface (for veth
// with XDP, the frames its NAPI poll has taken: the eBPF programs have
// run on them).
func rxPackets(t *testing.T) uint64 {
	t.Helper()
	ns, ifname := testIface(t)
	var n uint64
	netnstest.In(t, ns, func() {
		l, err := netlink.LinkByName(ifname)
		if err != nil {
			t.Fatalf("%s in %s: %v", ifname, ns, err)
		}
		if s := l.Attrs().Statistics; s != nil {
			n = s.RxPackets
		}
	})
	return n
}

// pcapRecords counts the whole records of a capture file that may still
// be being written (0 if it cannot be read yet).
func pcapRecords(path string) uint64 {
	var c recordCounter
	return c.count(path)
}

// recordCounter counts the records of a growing capture file, reading
// only what was added since its last count: a file of tens of thousands of
// packets is polled without being read again each time.
type recordCounter struct {
	off   int64 // where the next record begins
	n     uint64
	order binary.ByteOrder
}

func (c *recordCounter) count(path string) uint64 {
	f, err := os.Open(path)
	if err != nil {
		return c.n
	}
	defer f.Close()
	if c.order == nil {
		var h [24]byte
		if _, err := io.ReadFull(f, h[:]); err != nil {
			return 0
		}
		switch binary.LittleEndian.Uint32(h[:]) {
		case 0xa1b2c3d4, 0xa1b23c4d:
			c.order = binary.LittleEndian
		default:
			c.order = binary.BigEndian
		}
		c.off = 24
	}
	if _, err := f.Seek(c.off, io.SeekStart); err != nil {
		return c.n
	}
	r := bufio.NewReaderSize(f, 1<<16)
	var h [16]byte
	for {
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return c.n
		}
		incl := int64(c.order.Uint32(h[8:]))
		if k, _ := r.Discard(int(incl)); int64(k) < incl {
			return c.n
		}
		c.off += 16 + incl
		c.n++
	}
}

// await waits until count reaches want or, when it does not (the test's
// assertions then say what is missing), until it has stopped growing for
// quiet; at most a minute. It replaces a fixed pause after sending: on a
// loaded machine the reader may be far behind.
func await(t *testing.T, want uint64, quiet time.Duration, count func() uint64) {
	t.Helper()
	last, since := count(), time.Now()
	for deadline := time.Now().Add(time.Minute); last < want && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		if n := count(); n != last {
			last, since = n, time.Now()
		} else if time.Since(since) > quiet {
			return
		}
	}
}

// awaitFile waits until the capture file holds want records (or stops
// growing for a few seconds).
func awaitFile(t *testing.T, path string, want uint64) {
	t.Helper()
	var c recordCounter
	await(t, want, 3*time.Second, func() uint64 { return c.count(path) })
}

// settle waits until the receive counter of the test's interface has
// stopped for a second: the frames sent have been taken off the veth's
// queues, and the eBPF programs on it have run on them. (veth counts a
// frame at transmission and again when XDP takes it, so the counter's
// value says nothing exact; that it stops does.)
func settle(t *testing.T) {
	t.Helper()
	await(t, ^uint64(0), time.Second, func() uint64 { return rxPackets(t) })
}

func TestPlacementsGiveLibpcapVerdicts(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPair(t)
	if n := ffpfPrograms(t); n != 0 {
		t.Fatalf("%d ffpf programs in the kernel before the test", n)
	}
	dir := t.TempDir()
	hier := map[string]string{"user": "children: []\n", "kernel": "children:\n  - kind: kernel\n", "xdp": ""}
	for name, body := range hier {
		if body != "" {
			os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(body), 0o644)
		}
	}
	exprs := []string{
		`(bpf,"tcp and dst port 80") > [(pktcount)|(bytecount)]`,
		`(bpf,"vlan and udp") > [(pktcount)|(bytecount)]`,
		`(bpf,"tcp[tcpflags] & tcp-syn != 0 or ip6 and udp") > [(pktcount)|(bytecount)]`,
		`(bpf,"arp or icmp or less 80") > [(pktcount)|(bytecount)]`,
	}
	for i, expr := range exprs {
		arrived := filepath.Join(dir, fmt.Sprintf("arrived%d.pcap", i))
		var caps []*capture
		for _, place := range []string{"user", "kernel", "xdp"} {
			args := []string{"run", "--json", "-i", ifB}
			if place != "xdp" { // the default hierarchy puts it in XDP
				args = append(args, "--hierarchy", filepath.Join(dir, place+".yaml"))
			}
			args = append(args, "-e", expr)
			if place == "user" {
				// What reached the stack, as libpcap captured it.
				args = append(args, "-e", "(export,file="+arrived+")")
			}
			caps = append(caps, startCapture(t, nsB, args...))
		}
		waitPrograms(t, 4)   // tc and XDP attached, each with tc egress
		waitFile(t, arrived) // and libpcap's socket open: sources open before the export
		sent := filepath.Join(dir, fmt.Sprintf("sent%d.pcap", i))
		// Paced (as sendTracePaced says why): the user run's libpcap
		// socket is the oracle of the tc placement, and must lose nothing.
		if out, err := exec.Command("ip", "netns", "exec", nsA, ffpfBin, "gen", "-i", ifA, "--packets", "20000",
			"--seed", fmt.Sprint(i+1), "--malformed", "0.02", "--pps", "20000", "-o", sent).CombinedOutput(); err != nil {
			t.Fatalf("gen: %v: %s", err, out)
		}
		settle(t)
		awaitFile(t, arrived, selected(t, sent, stackTakes))
		filter := expr[strings.Index(expr, `"`)+1 : strings.LastIndex(expr, `"`)]
		docs := make([]runJSON, len(caps))
		for j, c := range caps {
			docs[j] = c.stop(t)
		}
		for j, doc := range docs {
			place := []string{"user", "kernel", "xdp"}[j]
			// XDP sees every frame that arrives; the tc hook and libpcap
			// only those the stack takes (not, say, a frame too short to
			// be Ethernet).
			oracle := arrived
			if place == "xdp" {
				oracle = sent
			}
			want, wantBytes := libpcapSelect(t, oracle, filter)
			went, _ := libpcapSelect(t, oracle, "")
			pc, bc := doc.Functions[doc.byClass("pktcount")[0]], doc.Functions[doc.byClass("bytecount")[0]]
			src := doc.Functions[doc.byClass("dev")[0]]
			if !strings.HasPrefix(pc.Flowspace, place) {
				t.Errorf("%s: pktcount ran in %s, want %s", expr, pc.Flowspace, place)
			}
			if src.Out != went {
				t.Errorf("%s in %s: the source saw %d packets, %d arrived", expr, place, src.Out, went)
			}
			if got := stateNum(t, pc.State["packets"]); got != want {
				t.Errorf("%s in %s: %d packets, libpcap says %d", expr, place, got, want)
			}
			if got := stateNum(t, bc.State["bytes"]); got != wantBytes {
				t.Errorf("%s in %s: %d bytes, libpcap's selection has %d", expr, place, got, wantBytes)
			}
		}
		if n, _ := libpcapSelect(t, arrived, ""); n < 19000 {
			t.Errorf("only %d of 20000 frames arrived", n)
		}
	}
	waitPrograms(t, 0) // nothing stays attached
}

// stackTakes selects the frames the kernel stack takes from a veth: all
// but a VLAN ethertype with no room for the tag (XDP sees those, the stack
// drops them).
const stackTakes = "not ((ether[12:2] = 0x8100 or ether[12:2] = 0x88a8) and len < 18)"

// selected is the number of packets of file libpcap's filter expr selects.
func selected(t *testing.T, file, expr string) uint64 {
	t.Helper()
	n, _ := libpcapSelect(t, file, expr)
	return n
}

// libpcapSelect is the oracle: the packets of file that libpcap's filter
// expr selects (tcpdump -w), and their bytes.
func libpcapSelect(t *testing.T, file, expr string) (packets, bytes uint64) {
	t.Helper()
	sel := filepath.Join(t.TempDir(), "sel.pcap")
	args := []string{"-r", file, "-w", sel}
	if expr != "" {
		args = append(args, expr)
	}
	if out, err := exec.Command("tcpdump", args...).CombinedOutput(); err != nil {
		t.Fatalf("tcpdump %v: %v: %s", args, err, out)
	}
	f, err := os.Open(sel)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	for {
		_, ci, err := r.ReadPacketData()
		if err != nil {
			return packets, bytes
		}
		packets++
		bytes += uint64(ci.Length)
	}
}

// TestOnlyMatchingPacketsReachUserspace: a userspace function after an XDP
// filter gets exactly the filtered packets, byte for byte, through the
// ring buffer; killing ffpf leaves no program attached.
func TestOnlyMatchingPacketsReachUserspace(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPair(t)
	dir := t.TempDir()
	out, sent := filepath.Join(dir, "out.pcap"), filepath.Join(dir, "sent.pcap")
	c := startCapture(t, nsB, "run", "--json", "-i", ifB, `(bpf,"udp and not vlan") > (export,file=`+out+`)`)
	waitPrograms(t, 2) // ingress and egress
	if o, err := exec.Command("ip", "netns", "exec", nsA, ffpfBin, "gen", "-i", ifA, "--packets", "20000", "-o", sent).CombinedOutput(); err != nil {
		t.Fatalf("gen: %v: %s", err, o)
	}
	want, _ := libpcapSelect(t, sent, "udp and not vlan")
	awaitFile(t, out, want)
	doc := c.stop(t)
	f := doc.Functions[doc.byClass("bpf")[0]]
	e := doc.Functions[doc.byClass("export")[0]]
	if !strings.HasPrefix(f.Flowspace, "xdp:") || e.Flowspace != "user" {
		t.Fatalf("bpf ran in %s, export in %s", f.Flowspace, e.Flowspace)
	}
	if e.In != want || f.Out != want {
		t.Errorf("userspace got %d packets, the filter passed %d, libpcap says %d", e.In, f.Out, want)
	}
	a, _ := exec.Command("tcpdump", "-r", sent, "-nn", "-x", "udp and not vlan").Output()
	b, _ := exec.Command("tcpdump", "-r", out, "-nn", "-x").Output()
	if strip(a) != strip(b) {
		t.Error("the packets that reached userspace differ from libpcap's selection of what was sent")
	}

	// A crash (SIGKILL) leaves nothing attached: the links die with the
	// process.
	k := startCapture(t, nsB, "run", "-i", ifB, `(bpf,"tcp") > (pktcount)`)
	waitPrograms(t, 2) // ingress and egress
	k.cmd.Process.Signal(syscall.SIGKILL)
	var ee *exec.ExitError
	if err := k.cmd.Wait(); !errors.As(err, &ee) {
		t.Fatalf("killed ffpf: %v", err)
	}
	waitPrograms(t, 0)
}

// strip drops tcpdump's timestamps, keeping the packets' descriptions and bytes.
func strip(b []byte) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if i := strings.Index(l, " "); i > 0 && strings.Count(l[:i], ":") == 2 {
			l = l[i:]
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// TestPlaceExplainsEBPFRefusals: a filter eBPF cannot express stays in
// userspace, and the plan says why.
func TestPlaceExplainsEBPFRefusals(t *testing.T) {
	_, nsB, _, ifB := netnsPair(t)
	out, err := exec.Command("ip", "netns", "exec", nsB, ffpfBin, "place", "-i", ifB, `(bpf,"ip protochain 6") > (pktcount)`).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, want := range []string{
		"dev#1  0x00ffffff  lowest flowspace with class dev at or above xdp:" + ifB,
		"not in xdp:" + ifB + ": the filter jumps backwards (protochain), and eBPF cannot loop",
		"pktcount#1  0xffffffff",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("place lacks %q:\n%s", want, out)
		}
	}
}

// TestStealThroughAFXDP: with (dev,IF,steal=true) the packets an XDP
// filter passes go up through an AF_XDP socket, byte for byte, and leave
// the kernel stack: a libpcap capture on the same interface no longer
// sees them, but still sees the rest.
func TestStealThroughAFXDP(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPair(t)
	dir := t.TempDir()
	users := filepath.Join(dir, "user.yaml")
	os.WriteFile(users, []byte("children: []\n"), 0o644)
	// zero-copy: the userspace flowspace refers to the frames in the UMEM.
	zc := filepath.Join(dir, "zc.yaml")
	os.WriteFile(zc, []byte("children:\n  - kind: kernel\n    bridge: zero-copy\n    children:\n"+
		"      - {kind: xdp, interface: "+ifB+", bridge: zero-copy}\n"), 0o644)
	for i, strategy := range []string{"copy-once", "zero-copy"} {
		out, sent := filepath.Join(dir, strategy+".pcap"), filepath.Join(dir, "sent-"+strategy+".pcap")
		args := []string{"run", "--json"}
		if strategy == "zero-copy" {
			args = append(args, "--hierarchy", zc)
		}
		x := startCapture(t, nsB, append(args, "(dev,"+ifB+",steal=true) > (bpf,\"udp and not vlan\") > (export,file="+out+")")...)
		seen := filepath.Join(dir, "seen-"+strategy+".pcap")
		// A buffer for the whole trace: on a loaded machine the reader
		// may not get the CPU while 50,000 frames arrive.
		u := startCapture(t, nsB, "run", "--json", "--hierarchy", users, "(dev,"+ifB+",buffer=128MB) > (pktcount) > (export,file="+seen+")")
		waitPrograms(t, 1)
		waitFile(t, seen)
		waitFile(t, out)
		// Paced: an AF_XDP socket holds 4,096 frames, which a reader
		// starved of the CPU would see overflow at full speed.
		if o, err := exec.Command("ip", "netns", "exec", nsA, ffpfBin, "gen", "-i", ifA, "--packets", "50000",
			"--pps", "25000", "--seed", fmt.Sprint(i+1), "-o", sent).CombinedOutput(); err != nil {
			t.Fatalf("gen: %v: %s", err, o)
		}
		want, _ := libpcapSelect(t, sent, "udp and not vlan")
		all, _ := libpcapSelect(t, sent, "")
		awaitFile(t, out, want)
		awaitFile(t, seen, all-want)
		xd, ud := x.stop(t), u.stop(t)
		e := xd.Functions[xd.byClass("export")[0]]
		if e.In != want {
			t.Errorf("%s: AF_XDP brought %d packets up, libpcap selects %d", strategy, e.In, want)
		}
		a, _ := exec.Command("tcpdump", "-r", sent, "-nn", "-x", "udp and not vlan").Output()
		b, _ := exec.Command("tcpdump", "-r", out, "-nn", "-x").Output()
		if strip(a) != strip(b) {
			t.Errorf("%s: the packets that came up through AF_XDP differ from libpcap's selection", strategy)
		}
		if seen := ud.Functions[ud.byClass("pktcount")[0]].In; seen != all-want {
			t.Errorf("%s: the stack still saw %d packets, want the %d not stolen", strategy, seen, all-want)
		}
		copied := uint64(xd.Bridges[0].(map[string]any)["copied"].(float64))
		if (strategy == "copy-once" && copied != want) || (strategy == "zero-copy" && copied != 0) {
			t.Errorf("%s: %d of %d packets copied", strategy, copied, want)
		}
		if used := xd.Bridges[0].(map[string]any)["strategy"]; used != strategy {
			t.Errorf("%s: the bridge says it was %v", strategy, used)
		}
		waitPrograms(t, 0)
	}
}

// TestClsactFallback: where the kernel has no TCX, the tc flowspace
// attaches a clsact filter instead (forced here with FFPF_NO_TCX), gives
// libpcap's verdicts, and removes the filter at the end.
func TestClsactFallback(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPair(t)
	dir := t.TempDir()
	kernel, sent := filepath.Join(dir, "kernel.yaml"), filepath.Join(dir, "sent.pcap")
	os.WriteFile(kernel, []byte("children:\n  - kind: kernel\n"), 0o644)
	c := &capture{cmd: exec.Command("ip", "netns", "exec", nsB, "env", "FFPF_NO_TCX=1", ffpfBin, "run", "--json",
		"--hierarchy", kernel, "-i", ifB, `(bpf,"vlan and udp") > [(pktcount)|(bytecount)]`)}
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.err
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitPrograms(t, 2) // ingress and egress
	if o, err := exec.Command("ip", "netns", "exec", nsA, ffpfBin, "gen", "-i", ifA, "--packets", "20000", "-o", sent).CombinedOutput(); err != nil {
		t.Fatalf("gen: %v: %s", err, o)
	}
	settle(t)
	doc := c.stop(t)
	want, wantBytes := libpcapSelect(t, sent, "vlan and udp")
	pc, bc := doc.Functions[doc.byClass("pktcount")[0]], doc.Functions[doc.byClass("bytecount")[0]]
	if pc.Flowspace != "kernel" || stateNum(t, pc.State["packets"]) != want || stateNum(t, bc.State["bytes"]) != wantBytes {
		t.Errorf("in %s: %v packets, %v bytes; libpcap says %d, %d", pc.Flowspace, pc.State["packets"], bc.State["bytes"], want, wantBytes)
	}
	waitPrograms(t, 0) // the filter is gone
}
