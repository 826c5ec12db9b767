package main

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
)

// TestUserspaceOnly checks which runs skip the discovery of the flowspaces
// beneath userspace: only those whose sources all run in userspace.
func TestUserspaceOnly(t *testing.T) {
	for _, tc := range []struct {
		exprs []string
		want  bool
	}{
		{[]string{`(pcap,file="t.pcap")`, `(bpf,"tcp") > (pktcount)`}, true},
		{[]string{"", `(gen) > [(bpf,"tcp")|(bpf,"udp")] > (pktcount)`}, true},
		{[]string{"", `[(pcap,a.pcap)|(gen)] > (pktcount); x:(pcap,b.pcap) > (bytecount)`}, true},
		{[]string{`(dev,expr="eth0")`, `(bpf,"tcp") > (pktcount)`}, false},
		{[]string{"", `[(pcap,a.pcap)|(dev,eth0)] > (pktcount)`}, false},
		{[]string{"", `(bpf,"tcp") > (pktcount)`}, false},  // no source: discovered as always
		{[]string{"", `(pcap,a.pcap) > (pktcnt)`}, false},  // unknown class
		{[]string{"", `(pcap,a.pcap) > (pktcount`}, false}, // syntax error
	} {
		if got := userspaceOnly(functions.Default, tc.exprs); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.exprs, got, tc.want)
		}
	}
}

// The start-up of a run is a cost every run pays, a one-packet replay
// almost nothing else: ffpf must start as fast as tcpdump (make bench
// measures it against tcpdump in paired runs). Wall time on a shared
// machine is no test, so these check what made it slow instead, none of
// which depends on the load: the packages every process initialises, the
// libraries every process maps, and the memory the initialisation builds.

// slowInits are packages whose initialisation alone cost a one-packet run
// more than tcpdump's whole run, or close to it, with what replaced them.
var slowInits = map[string]string{
	"github.com/google/gopacket/layers": "its init fills protocol tables of 65,536 entries (21 ms): --print decodes itself, internal/libpcap binds libpcap, gen writes pcap itself",
	"github.com/google/gopacket/pcap":   "it imports gopacket/layers: internal/libpcap binds the calls ffpf makes",
	"github.com/google/gopacket/pcapgo": "it imports gopacket/layers: gen.PcapWriter writes pcap",
	"github.com/prometheus/client_golang/prometheus": "it and protobuf initialise registries, and protobuf hashes the executable at init: " +
		"the collector writes the text format itself",
	"google.golang.org/protobuf/proto": "protobuf hashes the executable at init (internal/detrand)",
	"github.com/cilium/ebpf/rlimit":    "its init creates a BPF map in every process: hierarchy lifts RLIMIT_MEMLOCK with setrlimit",
}

// TestStartupLinksNoSlowInit: no package the binary links (they all
// initialise, whatever the command) is one of slowInits.
func TestStartupLinksNoSlowInit(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 || !slices.Contains(deps, "github.com/ffpf-go/ffpf/functions/builtin") {
		t.Fatalf("go list -deps gave %d packages, not ffpf's", len(deps))
	}
	for _, p := range deps {
		if why, slow := slowInits[p]; slow {
			t.Errorf("ffpf links %s, which every process initialises: %s", p, why)
		}
	}
}

// TestStartupMapsNoLibpcap: the binary does not need the shared libpcap
// to start (internal/libpcap compiles filters with a copy linked
// statically and opens the shared one for live captures), so that a run
// of files does not map it and the eight libraries it needs.
func TestStartupMapsNoLibpcap(t *testing.T) {
	f, err := elf.Open(ffpfBin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(libs, func(l string) bool { return strings.HasPrefix(l, "libc.so") }) {
		t.Fatalf("ffpf needs %v: not a dynamically linked cgo binary, the test sees nothing", libs)
	}
	for _, l := range libs {
		if strings.HasPrefix(l, "libpcap") {
			t.Errorf("ffpf needs %s at start-up: every process maps it and the eight libraries it needs", l)
		}
	}
}

// TestStartupInitMemory: the packages' initialisation of a run allocates
// under initBudget (GODEBUG=inittrace=1 reports each package's allocations,
// the same on every run), and no package more than a tenth of it: a table
// built at init costs every process, and is built lazily or by the first
// function that needs it instead. Before this was checked, a run's
// packages allocated 951 KB at init, 467 KB of them gopacket/layers'.
func TestStartupInitMemory(t *testing.T) {
	const initBudget = 400 << 10
	trace := filepath.Join(t.TempDir(), "one.pcap")
	if r := ffpf(t, "gen", "-o", trace, "--packets", "1"); r.code != 0 {
		t.Fatalf("gen: %s", r.stderr)
	}
	cmd := exec.Command(ffpfBin, "run", "-r", trace, `(bpf,"tcp") > [(pktcount)|(bytecount)]`)
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("ffpf run: %v: %s", err, stderr.String())
	}
	total, inits := 0, 0
	for _, line := range strings.Split(stderr.String(), "\n") {
		// init internal/bytealg @0.008 ms, 0 ms clock, 0 bytes, 0 allocs
		f := strings.Fields(line)
		if len(f) < 11 || f[0] != "init" || f[8] != "bytes," {
			continue
		}
		n, err := strconv.Atoi(f[7])
		if err != nil {
			t.Fatalf("inittrace line %q: %v", line, err)
		}
		if why, slow := slowInits[f[1]]; slow {
			t.Errorf("%s initialised: %s", f[1], why)
		}
		if n > initBudget/10 {
			t.Errorf("%s allocates %d bytes at init, more than %d", f[1], n, initBudget/10)
		}
		total += n
		inits++
	}
	if inits < 50 {
		t.Fatalf("only %d packages in GODEBUG=inittrace=1's output: %s", inits, stderr.String())
	}
	t.Logf("%d packages allocate %d bytes at init", inits, total)
	if total > initBudget {
		t.Errorf("the packages allocate %d bytes at init, more than %d", total, initBudget)
	}
}
