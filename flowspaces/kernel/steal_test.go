package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/flowspaces/hierarchy"
	"github.com/ffpf-go/ffpf/functions"
	_ "github.com/ffpf-go/ffpf/functions/builtin"
	"github.com/ffpf-go/ffpf/functions/gen"
)

// errStopped ends a transmission the test no longer needs.
var errStopped = errors.New("stopped")

// TestAddRequestWhileStealing: on a running flowgraph whose capture
// steals through AF_XDP, a request added and removed while traffic flows
// restarts the reader (Connect on an active flowspace): the packets the
// first request's filter passes must still come up, or be counted as the
// bridge's dropped. The veth pairs live in this process's namespace: the
// flowgraph runs in the test (through the embedding API).
func TestAddRequestWhileStealing(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("needs root (AF_XDP sockets, XDP programs, veth pairs)")
		}
		t.Skip("needs root (AF_XDP sockets, XDP programs, veth pairs)")
	}
	dir := t.TempDir()
	for k, bridge := range []string{"copy-once", "zero-copy"} {
		t.Run(bridge, func(t *testing.T) {
			// A veth pair of its own: a queue once bound stays bound in
			// this process (see bridges/afxdp TestSocketCloseReleasesQueue).
			tag := fmt.Sprintf("ffr%d%d", os.Getpid()%10000, k)
			ifA, ifB := tag+"a", tag+"b"
			if out, err := exec.Command("ip", "link", "add", ifA, "type", "veth", "peer", "name", ifB).CombinedOutput(); err != nil {
				t.Fatalf("ip link: %v: %s", err, out)
			}
			t.Cleanup(func() { exec.Command("ip", "link", "del", ifA).Run() })
			for _, i := range []string{ifA, ifB} {
				exec.Command("sysctl", "-qw", "net.ipv6.conf."+i+".disable_ipv6=1").Run()
				exec.Command("ip", "link", "set", i, "up").Run()
			}
			h := filepath.Join(dir, bridge+".yaml")
			os.WriteFile(h, []byte("children:\n  - kind: kernel\n    bridge: "+bridge+"\n    children:\n"+
				"      - {kind: xdp, interface: "+ifB+", bridge: "+bridge+"}\n"), 0o644)
			root, err := hierarchy.Load(h, functions.Default)
			if err != nil {
				t.Fatal(err)
			}
			rt := flowgraph.New(flowgraph.Config{Hierarchy: root})
			defer rt.Close()
			if _, err := rt.Populate(fmt.Sprintf(`(dev,%s,steal=true) > (bpf,"ip or ip6 or arp or vlan or less 2000") > (export,file=%s)`,
				ifB, filepath.Join(dir, bridge+"-all.pcap")), flowgraph.RequestOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := rt.Instantiate(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if err := rt.Activate(ctx); err != nil {
				t.Fatal(err)
			}
			// ffpf gen -i ifA --pps 50000 --seed 95, until stopped.
			var quit atomic.Bool
			sending := make(chan error, 1)
			go func() {
				cfg := gen.Config{Seed: 95, Packets: 100000000, VLAN: 0.05, IPv6: 0.2, Flows: 10000}
				_, _, err := gen.Transmit(ifA, cfg, 50000, func([]byte, time.Time) error {
					if quit.Load() {
						return errStopped
					}
					return nil
				})
				sending <- err
			}()
			stopGen := func() {
				if !quit.Swap(true) {
					if err := <-sending; err != errStopped {
						t.Errorf("transmitting on %s: %v", ifA, err)
					}
				}
			}
			defer stopGen()
			time.Sleep(300 * time.Millisecond)
			timed := func(what string, f func() error) bool {
				done := make(chan error, 1)
				go func() { done <- f() }()
				select {
				case err := <-done:
					if err != nil {
						t.Fatalf("%s: %v", what, err)
					}
					return true
				case <-time.After(3 * time.Second):
					t.Errorf("%s does not return (waited 3 s); stopping the run", what)
					stopGen()
					cancel() // the flowspaces stop, the bridge closes: what hung can go on
					select {
					case <-done:
					case <-time.After(5 * time.Second):
						t.Fatalf("%s does not return even after the run stopped", what)
					}
					return false
				}
			}
			for i := range 2 {
				req, err := rt.Populate(fmt.Sprintf(`(dev,%s,steal=true) > (bpf,"udp") > (export,file=%s)`,
					ifB, filepath.Join(dir, fmt.Sprint(bridge, "-udp", i, ".pcap"))), flowgraph.RequestOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if !timed("Instantiate", rt.Instantiate) {
					break
				}
				time.Sleep(200 * time.Millisecond)
				if !timed("Remove", func() error { return rt.Remove(req) }) {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			stopGen()
			time.Sleep(100 * time.Millisecond)
			rt.Stop()
			if err := rt.Wait(); err != nil {
				t.Errorf("the run reports: %v", err)
			}
			var passed, got uint64
			for _, f := range rt.Functions() {
				switch f.Class {
				case "bpf":
					passed = f.Out
				case "export":
					got = f.In
				}
			}
			var bin, bdropped uint64
			for _, b := range rt.Bridges() {
				bin += b.In
				bdropped += b.Dropped
			}
			t.Logf("attached: %v", rt.Attachments())
			if passed == 0 || passed != got+bdropped {
				t.Errorf("the first request's filter passed %d packets; its export got %d, the bridge took in %d and dropped %d: %d lost silently",
					passed, got, bin, bdropped, int64(passed)-int64(got+bdropped))
			}
		})
	}
}
