package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/vishvananda/netlink"

	"github.com/ffpf-go/ffpf/flowgraph/daemon/client"
	"github.com/ffpf-go/ffpf/internal/netnstest"
)

// The daemon end to end: ffpf serve, and the client commands run as
// users run them.

// served is an ffpf serve process.
type served struct {
	cmd      *exec.Cmd
	socket   string
	stderr   *syncBuffer
	httpAddr string
}

// syncBuffer is a buffer written by a process and read by the test.
type syncBuffer struct {
	mu chan struct{}
	b  bytes.Buffer
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{mu: make(chan struct{}, 1)} }

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu <- struct{}{}
	defer func() { <-s.mu }()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu <- struct{}{}
	defer func() { <-s.mu }()
	return s.b.String()
}

// serve starts ffpf serve (in network namespace ns unless ""), with env
// added, and waits until it answers on its socket.
func serve(t *testing.T, ns string, env []string, args ...string) *served {
	t.Helper()
	s := &served{stderr: newSyncBuffer()}
	for i, a := range args {
		if a == "--socket" {
			s.socket = args[i+1]
		}
	}
	if s.socket == "" {
		s.socket = filepath.Join(t.TempDir(), "ffpf.sock")
		args = append(args, "--socket", s.socket)
	}
	argv := append([]string{ffpfBin, "serve"}, args...)
	if ns != "" {
		argv = append([]string{"ip", "netns", "exec", ns}, argv...)
	}
	s.cmd = exec.Command(argv[0], argv[1:]...)
	s.cmd.Env = append(os.Environ(), env...)
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			s.cmd.Process.Signal(syscall.SIGTERM)
			s.wait(t)
		}
	})
	re := regexp.MustCompile(`HTTP on http://([^/]+)/`)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if strings.Contains(s.stderr.String(), "serving on") {
			if m := re.FindStringSubmatch(s.stderr.String()); m != nil {
				s.httpAddr = m[1]
			}
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("ffpf serve did not start: %s", s.stderr.String())
		}
	}
}

// wait waits for the daemon to end (after a signal).
func (s *served) wait(t *testing.T) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		s.cmd.Process.Kill()
		<-done
		t.Errorf("ffpf serve did not end on SIGTERM: %s", s.stderr.String())
	}
}

// as runs an ffpf client command as the user uid (0: as the test),
// against the daemon s.
func (s *served) as(t *testing.T, uid int, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(ffpfBin, args...)
	cmd.Env = append(os.Environ(), "FFPF_SOCKET="+s.socket)
	if uid != 0 {
		cmd.Path = sharedBin(t)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	return runCmd(t, cmd, args)
}

var sharedBinPath string

// sharedBin is a copy of the binary that other users may run (the test
// binary's directory is the test's own).
func sharedBin(t *testing.T) string {
	t.Helper()
	if sharedBinPath != "" {
		return sharedBinPath
	}
	dir, err := os.MkdirTemp("", "ffpf-shared")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	b, err := os.ReadFile(ffpfBin)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "ffpf")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	sharedBinPath = p
	return p
}

// needRoot skips (or, under CI=true, fails) a test that needs root.
func needRoot(t *testing.T, what string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("cannot test %s: it needs root", what)
	}
	t.Skip("needs root")
}

// publicTrace writes a trace of n packets that every user may read.
func publicTrace(t *testing.T, n int) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ffpf-public")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	p := filepath.Join(dir, "t.pcap")
	if r := ffpf(t, "gen", "-o", p, "--packets", fmt.Sprint(n)); r.code != 0 {
		t.Fatal(r.stderr)
	}
	os.Chmod(p, 0o644)
	return p
}

func decode[T any](t *testing.T, r cliResult) T {
	t.Helper()
	var v T
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	return v
}

// TestDaemonUsersShareNothing: two users submit the same expression to
// one daemon (--flowgroup uid): each gets functions of its own, and sees
// nothing of the other's: not in ls, and stat, call, read and rm of the
// other's request answer as for a request that does not exist. Root sees
// both. A file the user may not read is refused, and a socket the user
// may not open says so.
func TestDaemonUsersShareNothing(t *testing.T) {
	needRoot(t, "flowgroups of different users")
	dir, err := os.MkdirTemp("", "ffpf-sock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755) // the users reach the socket
	s := serve(t, "", nil, "--socket-mode", "0666", "--socket", filepath.Join(dir, "ffpf.sock"))
	trace := publicTrace(t, 2000)
	expr := `(bpf,"tcp") > (pktcount)`
	a := s.as(t, 1000, "submit", "-r", trace, expr)
	b := s.as(t, 65534, "submit", "-r", trace, expr)
	if a.code != 0 || b.code != 0 {
		t.Fatalf("submit: %s %s", a.stderr, b.stderr)
	}
	idA, idB := strings.TrimSpace(a.stdout), strings.TrimSpace(b.stdout)
	all := decode[client.List](t, s.as(t, 0, "ls", "--json"))
	if len(all.Requests) != 2 || !all.All {
		t.Fatalf("root lists %+v", all.Requests)
	}
	groups := map[string]bool{}
	for _, r := range all.Requests {
		groups[r.Flowgroup] = true
	}
	if !groups["uid:1000"] || !groups["uid:65534"] {
		t.Errorf("flowgroups %v", groups)
	}
	bpfs := 0
	for _, f := range all.Functions {
		if f.Class == "bpf" {
			bpfs++
			if f.Refs != 1 {
				t.Errorf("%s is shared by %d requests of two users", f.ID, f.Refs)
			}
		}
	}
	if bpfs != 2 {
		t.Errorf("%d bpf functions for two users' requests, want 2", bpfs)
	}
	mine := decode[client.List](t, s.as(t, 1000, "ls", "--json"))
	if len(mine.Requests) != 1 || mine.Requests[0].ID != idA || mine.All {
		t.Errorf("uid 1000 lists %+v", mine.Requests)
	}
	if fs := mine.Functions; len(fs) != len(mine.Requests[0].Functions)+1 { // with its sink
		t.Errorf("uid 1000 sees %d functions, its request has %d", len(fs), len(mine.Requests[0].Functions)+1)
	}
	for _, c := range []func(id string) []string{
		func(id string) []string { return []string{"stat", id} },
		func(id string) []string { return []string{"rm", id} },
		func(id string) []string { return []string{"read", "-c", "1", id} },
		func(id string) []string { return []string{"call", id, "pktcount#2", "reset"} },
	} {
		ro, rn := s.as(t, 1000, c(idB)...), s.as(t, 1000, c("rffffff")...)
		if ro.code != 1 || rn.code != 1 || strings.Replace(ro.stderr, idB, "rffffff", 1) != rn.stderr {
			t.Errorf("%s of the other user's request: exit %d %q; of none: exit %d %q", c("")[0], ro.code, ro.stderr, rn.code, rn.stderr)
		}
	}
	if st := decode[client.Stat](t, s.as(t, 0, "stat", "--json", idB)); st.Request.ID != idB {
		t.Errorf("root's stat of %s: %+v", idB, st.Request)
	}
	// A file the user may not read.
	secret := filepath.Join(filepath.Dir(trace), "secret.pcap")
	b2, _ := os.ReadFile(trace)
	os.WriteFile(secret, b2, 0o600)
	if r := s.as(t, 1000, "submit", "-r", secret, expr); r.code != 1 || !strings.Contains(r.stderr, "may not") {
		t.Errorf("submit of a file uid 1000 may not read: exit %d %q", r.code, r.stderr)
	}
	if r := s.as(t, 0, "rm", idA, idB); r.code != 0 {
		t.Errorf("root's rm: %s", r.stderr)
	}
	// A socket the user may not open.
	p := serve(t, "", nil, "--socket-mode", "0600", "--socket", filepath.Join(dir, "private.sock"))
	if r := p.as(t, 1000, "ls"); r.code != 1 || !strings.Contains(r.stderr, "permission denied") {
		t.Errorf("ls on a socket of mode 0600 as uid 1000: exit %d %q", r.code, r.stderr)
	}
}

// TestDaemonTrumpetEventAdded: a Trumpet event added with ffpf call to a
// running request reports on the traffic that runs through it, read with
// ffpf read --jsonl.
func TestDaemonTrumpetEventAdded(t *testing.T) {
	s := serve(t, "", nil)
	r := s.as(t, 0, "submit", "--name", "mon", `(gen,packets=0) > tr:(trumpet,epoch=10ms)`)
	if r.code != 0 {
		t.Fatal(r.stderr)
	}
	read := exec.Command(ffpfBin, "read", "--jsonl", "-c", "5", "mon")
	read.Env = append(os.Environ(), "FFPF_SOCKET="+s.socket)
	var out, errb bytes.Buffer
	read.Stdout, read.Stderr = &out, &errb
	if err := read.Start(); err != nil {
		t.Fatal(err)
	}
	defer read.Process.Kill()
	// The reader is attached once stat lists it.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if st := decode[client.Stat](t, s.as(t, 0, "stat", "--json", "mon")); len(st.Readers) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reader did not attach")
		}
	}
	if c := s.as(t, 0, "call", "mon", "tr", "add", "perproto: *; count() >= 1; proto; 20ms"); c.code != 0 {
		t.Fatalf("call add: %s", c.stderr)
	}
	if c := s.as(t, 0, "call", "mon", "tr", "list"); c.code != 0 || !strings.Contains(c.stdout, "perproto") {
		t.Fatalf("call list: %q %s", c.stdout, c.stderr)
	}
	done := make(chan error, 1)
	go func() { done <- read.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("read: %v: %s", err, errb.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("no event reported: %q %s", out.String(), errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines: %q", len(lines), out.String())
	}
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if rec["event"] != "perproto" {
			t.Errorf("a record of %v, not of the added event: %s", rec["event"], l)
		}
	}
	if !strings.Contains(errb.String(), "5 packets read") {
		t.Errorf("read says %q", errb.String())
	}
}

// TestDaemonScrapeAgreesWithStat: /metrics parses with Prometheus's own
// parser, and its counters are those 'ffpf stat --json' gives.
func TestDaemonScrapeAgreesWithStat(t *testing.T) {
	s := serve(t, "", nil, "--http", "127.0.0.1:0")
	trace := publicTrace(t, 3000)
	id := strings.TrimSpace(s.as(t, 0, "submit", "-r", trace, `(bpf,"udp") > [(pktcount)|(bytecount)]`).stdout)
	var st client.Stat
	for deadline := time.Now().Add(time.Minute); st.Request.State != "ended"; time.Sleep(10 * time.Millisecond) {
		st = decode[client.Stat](t, s.as(t, 0, "stat", "--json", id))
		if time.Now().After(deadline) {
			t.Fatal("the request did not end")
		}
	}
	resp, err := http.Get("http://" + s.httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("Prometheus's parser: %v", err)
	}
	got := map[string]float64{}
	for _, m := range mfs["ffpf_packets_total"].Metric {
		l := map[string]string{}
		for _, lp := range m.Label {
			l[lp.GetName()] = lp.GetValue()
		}
		got[l["request"]+" "+l["function"]+" "+l["kind"]] = m.GetCounter().GetValue()
	}
	n := 0
	for _, f := range st.Functions {
		for kind, v := range map[string]uint64{"in": f.In, "out": f.Out, "filtered": f.Filtered, "dropped": f.Dropped} {
			if g := got[id+" "+f.ID+" "+kind]; g != float64(v) {
				t.Errorf("%s %s: scraped %v, stat %d", f.ID, kind, g, v)
			}
			n++
		}
	}
	if n != 20 || st.Packets != 3000 {
		t.Errorf("%d series compared, %d packets", n, st.Packets)
	}
	// The page and its API are there; writes without a token are not.
	if resp, err := http.Post("http://"+s.httpAddr+"/api/v1/submit", "application/json", strings.NewReader(`{"expr":"(gen) > (pktcount)"}`)); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("submit over HTTP without a token: %v %v", resp.StatusCode, err)
	}
	if resp, err := http.Get("http://" + s.httpAddr + "/"); err != nil || resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("the page: %v %v", resp, err)
	}
}

// clsactOn reports whether ifname in ns has a clsact qdisc.
func clsactOn(t *testing.T, ns, ifname string) bool {
	t.Helper()
	found := false
	netnstest.In(t, ns, func() {
		l, err := netlink.LinkByName(ifname)
		if err != nil {
			t.Fatal(err)
		}
		qs, _ := netlink.QdiscList(l)
		for _, q := range qs {
			if q.Type() == "clsact" {
				found = true
			}
		}
	})
	return found
}

// fdTargets lists what process pid's descriptors are.
func fdTargets(t *testing.T, pid int) []string {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
		out = append(out, l)
	}
	return out
}

// bpfProgFDs counts the eBPF programs process pid holds.
func bpfProgFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name())); l == "anon_inode:bpf-prog" {
			n++
		}
	}
	return n
}

// TestDaemonKilledThenRestarted: a daemon killed with SIGKILL leaves its
// tc filters and clsact qdisc behind (kernels without TCX, as
// FFPF_NO_TCX makes this one), and the next daemon removes them when it
// starts; a daemon stopped by SIGTERM leaves nothing. Submitting and
// removing kernel requests leaks neither programs nor descriptors.
func TestDaemonKilledThenRestarted(t *testing.T) {
	_, nsB, _, ifB := netnsPair(t)
	dir := t.TempDir()
	_, kernel := reviewHier(t, dir)
	state := filepath.Join(dir, "state")
	sock := filepath.Join(dir, "ffpf.sock")
	env := []string{"FFPF_NO_TCX=1"}
	args := []string{"--hierarchy", kernel, "--state-dir", state, "--socket", sock}
	s := serve(t, nsB, env, args...)
	r := s.as(t, 0, "submit", "-i", ifB, `(bpf,"tcp") > (pktcount)`)
	if r.code != 0 {
		t.Fatal(r.stderr)
	}
	waitPrograms(t, 2) // tc ingress and egress
	if !clsactOn(t, nsB, ifB) {
		t.Fatal("no clsact qdisc: the test would not see it left behind")
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	if ffpfPrograms(t) != 2 || !clsactOn(t, nsB, ifB) {
		t.Fatalf("after SIGKILL: %d programs, clsact %v; want what the daemon left", ffpfPrograms(t), clsactOn(t, nsB, ifB))
	}
	s2 := serve(t, nsB, env, args...)
	if n := ffpfPrograms(t); n != 0 || clsactOn(t, nsB, ifB) {
		t.Fatalf("after a restart: %d programs, clsact %v: %s", n, clsactOn(t, nsB, ifB), s2.stderr.String())
	}
	if !strings.Contains(s2.stderr.String(), "the clsact qdisc on "+ifB) {
		t.Errorf("the restarted daemon does not say what it removed: %s", s2.stderr.String())
	}
	// Requests that come and go leave no program, descriptor or qdisc.
	pid := s2.cmd.Process.Pid
	cycle := func(i int) {
		r := s2.as(t, 0, "submit", "-i", ifB, fmt.Sprintf(`(bpf,"tcp port %d") > (pktcount)`, i))
		if r.code != 0 {
			t.Fatal(r.stderr)
		}
		if r := s2.as(t, 0, "rm", strings.TrimSpace(r.stdout)); r.code != 0 {
			t.Fatal(r.stderr)
		}
	}
	for i := range 5 { // what the kernel flowspace keeps from its first use on
		cycle(i)
	}
	fds0 := fdTargets(t, pid)
	cycles := 100 // make bench runs 1,000 (FFPF_DAEMON_CYCLES)
	if n, err := strconv.Atoi(os.Getenv("FFPF_DAEMON_CYCLES")); err == nil && n > 0 {
		cycles = n
	}
	for i := range cycles {
		cycle(i)
	}
	fds1 := fdTargets(t, pid)
	if n := ffpfPrograms(t); n != 0 || clsactOn(t, nsB, ifB) || bpfProgFDs(t, pid) != 0 || len(fds1) > len(fds0)+2 {
		t.Errorf("after %d submits and removals: %d programs attached, clsact %v, %d programs held, descriptors %d → %d: %v → %v",
			cycles, n, clsactOn(t, nsB, ifB), bpfProgFDs(t, pid), len(fds0), len(fds1), fds0, fds1)
	}
	s2.as(t, 0, "submit", "-i", ifB, `(bpf,"udp") > (pktcount)`)
	waitPrograms(t, 2)
	s2.cmd.Process.Signal(syscall.SIGTERM)
	s2.wait(t)
	if n := ffpfPrograms(t); n != 0 || clsactOn(t, nsB, ifB) {
		t.Errorf("after SIGTERM: %d programs, clsact %v", n, clsactOn(t, nsB, ifB))
	}
	if _, err := net.Dial("unix", sock); err == nil {
		t.Error("the socket still answers")
	}
}
