package p4net_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ffpf-go/ffpf/flowspaces/p4/p4net"
	_ "github.com/ffpf-go/ffpf/functions/builtin"
	"github.com/ffpf-go/ffpf/functions/gen"
	"github.com/ffpf-go/ffpf/lang/mafia"
)

// RunElsewhere controls switches it did not start: here those of a
// network in the test, replayed by the test once their pipelines run.
// The programs are committed last hop first; the run ends once the
// ports stood still after packets crossed them, with what Run finds on
// the same network, and the port counters; without packets it waits
// until Stop.
func TestRunElsewhere(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "trace.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	if err := gen.WritePcap(f, gen.Config{Packets: 300, Flows: 10, Seed: 3}, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	src, err := os.ReadFile("../../../examples/mafia/postcards.mafia")
	if err != nil {
		t.Fatal(err)
	}
	prog, err := mafia.Parse(string(src))
	if err != nil {
		t.Fatal(err)
	}
	comp, err := mafia.Compile(prog, mafia.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var secs []p4net.Section
	for _, r := range comp.Requests {
		secs = append(secs, p4net.Section{Role: r.Role, Req: r.Req, Copies: r.Copies})
	}
	local, err := p4net.Parse([]byte(strings.Replace(good[:strings.Index(good, "changes:")], ", rates: {2: 500000}", "", 1)), filepath.Join(dir, "path.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var log strings.Builder
	n, err := p4net.Start(local, func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(&log, format+"\n", args...)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	remote := fmt.Sprintf(`switches:
  - {name: s1, role: first_hop, p4runtime: %s, device_id: 1}
  - {name: s2, role: intermediate, p4runtime: %s, device_id: 2}
  - {name: s3, role: last_hop, p4runtime: %s, device_id: 3}
routes: {s1: {1: 2}, s2: {1: 2}, s3: {1: 2}}
`, n.Switch("s1").Addr, n.Switch("s2").Addr, n.Switch("s3").Addr)
	there := filepath.Join(dir, "there")
	os.Mkdir(there, 0o755)
	cfg, err := p4net.Parse([]byte(remote), filepath.Join(there, "path.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	progs, err := p4net.Programs(cfg, secs, nil)
	if err != nil {
		t.Fatal(err)
	}
	type ran struct {
		res *p4net.Result
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := p4net.RunElsewhere(cfg, progs, p4net.RunOptions{Quiet: 200 * time.Millisecond})
		done <- ran{res, err}
	}()
	for deadline := time.Now().Add(20 * time.Second); !n.Switch("s1").Dev.Loaded(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("s1 runs no pipeline after 20 s")
		}
	}
	mu.Lock()
	order := log.String()
	mu.Unlock()
	if i3, i2, i1 := strings.Index(order, "s3: pipeline ffpf_path committed"), strings.Index(order, "s2: pipeline ffpf_path committed"),
		strings.Index(order, "s1: pipeline ffpf_path committed"); i3 < 0 || i3 > i2 || i2 > i1 {
		t.Errorf("not committed last hop first:\n%s", order)
	}
	if err := n.Replay(p4net.Hooks{}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, s := range r.res.Switches {
		if s.Copies != 300 || len(s.Functions) != 3 || s.Functions[0].In != 300 || s.Functions[2].Out != 300 {
			t.Errorf("%s: %d copies, %+v", s.Name, s.Copies, s.Functions[0])
		}
	}
	want := "s2: 300 frames in, 300 out, 300 to the CPU (ports 1: 300 in, 0 out; 2: 0 in, 300 out; 255: 0 in, 300 out)\n"
	if st := r.res.PortStats(); !strings.Contains(st, want) {
		t.Errorf("port stats:\n%s\nwant %s", st, want)
	}
	if st := n.Stats(); !strings.HasPrefix(st, "s1: 300 frames in (0 before a pipeline), 300 out, 300 to the CPU") {
		t.Errorf("the network's own count:\n%s", st)
	}

	// No packet: the run waits, however quiet, until Stop.
	stop := make(chan struct{})
	go func() {
		res, err := p4net.RunElsewhere(cfg, progs, p4net.RunOptions{Quiet: 10 * time.Millisecond, Stop: stop})
		done <- ran{res, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("a run without packets ended before Stop: %v", r.err)
	case <-time.After(300 * time.Millisecond):
	}
	close(stop)
	if r := <-done; r.err != nil || r.res.Switches[0].Functions[0].In != 0 || len(r.res.Switches[0].Ports) != 0 {
		t.Errorf("stopped: %v, %+v", r.err, r.res)
	}
}
