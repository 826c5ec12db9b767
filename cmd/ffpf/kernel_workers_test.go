package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// sendFromCPUs sends a generated trace from each of the first two CPUs at
// once (pps packets per second each), so that the receiving veth's XDP
// program runs on both CPUs and its packets fill both receive queues;
// it returns the files of what each sent.
func sendFromCPUs(t *testing.T, nsA, ifA string, n, pps int) []string {
	t.Helper()
	if runtime.NumCPU() < 2 {
		if os.Getenv("CI") != "" {
			t.Fatalf("cannot test one interface on two workers: this machine has %d CPU", runtime.NumCPU())
		}
		t.Skip("needs two CPUs")
	}
	dir := t.TempDir()
	var files []string
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for cpu := range 2 {
		f := filepath.Join(dir, fmt.Sprintf("sent%d.pcap", cpu))
		files = append(files, f)
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := exec.Command("ip", "netns", "exec", nsA, "taskset", "-c", fmt.Sprint(cpu), ffpfBin, "gen", "-i", ifA,
				"--packets", fmt.Sprint(n), "--seed", fmt.Sprint(40+cpu), "--vlan", "0.1", "--pps", fmt.Sprint(pps), "-o", f).CombinedOutput()
			if err != nil {
				errs[cpu] = fmt.Errorf("gen on CPU %d: %v: %s", cpu, err, out)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// lanesOf returns the packets each lane of the bridge kernel > user
// carried.
func lanesOf(t *testing.T, doc runJSON) []uint64 {
	t.Helper()
	for _, b := range doc.Bridges {
		m, _ := b.(map[string]any)
		if m["from"] == "kernel" && m["to"] == "user" {
			var out []uint64
			ls, _ := m["lanes"].([]any)
			for _, l := range ls {
				v, _ := l.(float64)
				out = append(out, uint64(v))
			}
			return out
		}
	}
	t.Fatalf("no bridge kernel > user: %v", doc.Bridges)
	return nil
}

// TestOneInterfaceOnTwoWorkers: a veth of two receive queues, fed from two
// CPUs, is read by two workers, through a ring buffer per CPU and through
// an AF_XDP socket per queue: each lane of the way up carries packets,
// the counts of the functions above (a filter's, a counter's sharded over
// the workers) equal libpcap's verdicts on what was sent, nothing is lost,
// and -c stays exact.
func TestOneInterfaceOnTwoWorkers(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPairQueues(t, 2)
	const expr = "udp or tcp"
	for _, steal := range []bool{false, true} {
		name := map[bool]string{false: "ring buffer per CPU", true: "AF_XDP socket per queue"}[steal]
		t.Run(name, func(t *testing.T) {
			// match has no eBPF code: it and what follows run in
			// userspace, on the workers of the lanes.
			c := startCapture(t, nsB, "run", "--json", "--workers", "2", fmt.Sprintf(
				`(dev,%s,steal=%v) > (bpf,%q) > (match,"pkt.len > 0") > [(pktcount) | (bytecount)]`, ifB, steal, expr))
			waitPrograms(t, programsOf(steal))
			sent := sendFromCPUs(t, nsA, ifA, 6000, 20000)
			settle(t)
			doc := c.stop(t)
			waitPrograms(t, 0)
			var want, wantBytes uint64
			for _, f := range sent {
				p, b := libpcapSelect(t, f, expr)
				want, wantBytes = want+p, wantBytes+b
			}
			st := map[string]uint64{}
			for _, f := range doc.Functions {
				st[f.Class] = f.Out
				if v, ok := f.State["packets"].(float64); ok && f.Class == "pktcount" {
					st["packets"] = uint64(v)
				}
				if v, ok := f.State["bytes"].(float64); ok && f.Class == "bytecount" {
					st["bytes"] = uint64(v)
				}
				if f.In != f.Out+f.Filtered+f.Dropped {
					t.Errorf("%s: in %d != out %d + filtered %d + dropped %d", f.ID, f.In, f.Out, f.Filtered, f.Dropped)
				}
			}
			if st["bpf"] != want || st["packets"] != want || st["bytes"] != wantBytes {
				t.Errorf("bpf passed %d, pktcount %d packets, bytecount %d bytes; libpcap selects %d packets, %d bytes",
					st["bpf"], st["packets"], st["bytes"], want, wantBytes)
			}
			lanes := lanesOf(t, doc)
			if len(lanes) != 2 || lanes[0] == 0 || lanes[1] == 0 {
				t.Errorf("the way up carried %v packets per lane: want two lanes, both used", lanes)
			}
		})
	}
	t.Run("-c", func(t *testing.T) {
		c := startCapture(t, nsB, "run", "--json", "--workers", "2", "-c", "5000",
			fmt.Sprintf(`(dev,%s) > (match,"pkt.len > 0") > (pktcount)`, ifB))
		waitPrograms(t, programsOf(false))
		sendFromCPUs(t, nsA, ifA, 6000, 20000)
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("%v: %s", err, c.err.String())
		}
		doc := parseRun(t, cliResult{c.out.String(), c.err.String(), 0})
		for _, f := range doc.Functions {
			if f.Class == "pktcount" && f.State["packets"] != float64(5000) {
				t.Errorf("-c 5000 on two workers: pktcount counted %v", f.State["packets"])
			}
		}
		if lanes := lanesOf(t, doc); len(lanes) != 2 || lanes[0]+lanes[1] != 5000 {
			t.Errorf("-c 5000: the lanes carried %v packets", lanes)
		}
		waitPrograms(t, 0)
	})
	// Filtered above, the packets of each lane (ring buffer or AF_XDP
	// socket) give their units back: the run ends at the limit (held
	// units that never came back would keep it from ending).
	for _, steal := range []bool{false, true} {
		t.Run(fmt.Sprintf("-c filtered above, steal=%v", steal), func(t *testing.T) {
			c := startCapture(t, nsB, "run", "--json", "--workers", "2", "-c", "3000",
				fmt.Sprintf(`(dev,%s,steal=%v) > (match,"pkt.len %% 2 == 0") > (pktcount)`, ifB, steal))
			waitPrograms(t, programsOf(steal))
			sendFromCPUs(t, nsA, ifA, 6000, 20000)
			doc := c.endsWithin(t, 30*time.Second)
			for _, f := range doc.Functions {
				if f.Class == "pktcount" && f.State["packets"] != float64(3000) {
					t.Errorf("-c 3000 on two workers: pktcount counted %v", f.State["packets"])
				}
			}
			if lanes := lanesOf(t, doc); len(lanes) != 2 || lanes[0] == 0 || lanes[1] == 0 || lanes[0]+lanes[1] < 3000 {
				t.Errorf("-c 3000: the lanes carried %v packets", lanes)
			}
			waitPrograms(t, 0)
		})
	}
}

// endsWithin waits up to d for a run to end by itself (at its limit), and
// returns its --json document; one that does not is killed, and the test
// fails.
func (c *capture) endsWithin(t *testing.T, d time.Duration) runJSON {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%v: %v: %s", c.cmd.Args, err, c.err.String())
		}
	case <-time.After(d):
		c.cmd.Process.Kill()
		<-done
		t.Fatalf("%v did not end at its limit within %v", c.cmd.Args, d)
	}
	return parseRun(t, cliResult{c.out.String(), c.err.String(), 0})
}
