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
// What make build installs as bin/ffpf is the lean build (-tags nogrpc,
// see grpc.go); the whole build (go build ./cmd/ffpf, make build's
// bin/ffpf-grpc) links gRPC, protobuf and P4Runtime's types, and the
// daemon with Prometheus's client library, but none of the rest.

// slowInit is a package whose initialisation alone cost a one-packet run
// more than tcpdump's whole run, or a good part of it, with what replaced
// it; grpc says that the whole build may link it (the lean build may
// not).
type slowInit struct {
	why  string
	grpc bool
}

var slowInits = map[string]slowInit{
	"github.com/google/gopacket/layers": {why: "its init fills protocol tables of 65,536 entries (21 ms): --print decodes itself, internal/libpcap binds libpcap, gen and the switch's file ports write pcap themselves, functions/pcap reads it"},
	"github.com/google/gopacket/pcap":   {why: "it imports gopacket/layers: internal/libpcap binds the calls ffpf makes"},
	"github.com/google/gopacket/pcapgo": {why: "it imports gopacket/layers: gen.PcapWriter writes pcap, functions/pcap reads it"},
	"github.com/prometheus/client_golang/prometheus": {grpc: true, why: "it and protobuf initialise registries, and protobuf hashes the executable at init: " +
		"the daemon, which serves /metrics with it, runs in the whole build (ffpf serve)"},
	"github.com/prometheus/client_model/go": {grpc: true, why: "its generated protobuf types build their file descriptors at init"},
	"github.com/cilium/ebpf/rlimit":         {why: "its init creates a BPF map in every process: hierarchy lifts RLIMIT_MEMLOCK with setrlimit"},
	"github.com/hashicorp/go-plugin": {why: "it links gRPC's reflection and health services, protodesc, net/rpc and gob (2.6 ms of a one-packet run, 0.2 to 0.4 of tcpdump's, at a load of 11 to 16): " +
		"functions/plugin speaks go-plugin's client protocol itself; plugins link it (functions/plugin/sdk)"},
	"google.golang.org/grpc/reflection":            {why: "go-plugin's: protodesc builds descriptor.proto's descriptors at init (200 KB)"},
	"google.golang.org/protobuf/reflect/protodesc": {why: "it unmarshals descriptor.proto at init"},
	"net/rpc": {why: "go-plugin's net/rpc protocol: its init parses an HTML template, and it links gob"},
	"github.com/p4lang/p4runtime/go/p4/config/v1": {grpc: true, why: "P4Runtime's generated types build their file descriptors at init: p4gen/p4info alone writes P4Info, and only the p4 flowspace and ffpf p4 need it"},
	"github.com/p4lang/p4runtime/go/p4/v1":        {grpc: true, why: "P4Runtime's generated types build their file descriptors at init"},
	"google.golang.org/protobuf/proto":            {grpc: true, why: "protobuf hashes the executable at init (internal/detrand)"},
	"google.golang.org/grpc":                      {grpc: true, why: "its init compiles regular expressions, registers codecs and balancers, and links golang.org/x/net/trace and html/template"},
}

// TestStartupLinksNoSlowInit: no package the build without gRPC links
// (they all initialise, whatever the command) is one of slowInits, and
// the whole build links only those slowInits says it may.
func TestStartupLinksNoSlowInit(t *testing.T) {
	for _, build := range []struct {
		name string
		grpc bool
	}{{"-tags nogrpc", false}, {"the whole build", true}} {
		args := []string{"list", "-deps", "-f", "{{.ImportPath}}", "."}
		if !build.grpc {
			args = []string{"list", "-tags", "nogrpc", "-deps", "-f", "{{.ImportPath}}", "."}
		}
		out, err := exec.Command("go", args...).Output()
		if err != nil {
			t.Fatalf("go list: %v", err)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 100 || !slices.Contains(deps, "github.com/ffpf-go/ffpf/functions/builtin") {
			t.Fatalf("go list -deps gave %d packages, not ffpf's", len(deps))
		}
		// Each build links what it must: the whole build the p4
		// flowspace, the plugins' host and the daemon, the other none
		// of them (but the daemon's client).
		if !slices.Contains(deps, "github.com/ffpf-go/ffpf/flowgraph/daemon/client") {
			t.Errorf("%s does not link the daemon's client", build.name)
		}
		for _, p := range []string{"github.com/ffpf-go/ffpf/flowspaces/p4", "github.com/ffpf-go/ffpf/functions/plugin", "github.com/ffpf-go/ffpf/flowgraph/daemon"} {
			if slices.Contains(deps, p) != build.grpc {
				t.Errorf("%s links %s: %v", build.name, p, !build.grpc)
			}
		}
		for _, p := range deps {
			if s, slow := slowInits[p]; slow && !(build.grpc && s.grpc) {
				t.Errorf("%s links %s, which every process initialises: %s", build.name, p, s.why)
			}
		}
	}
}

// TestStartupMapsNoLibpcap: the binary does not need the shared libpcap
// to start (internal/libpcap compiles filters with a copy linked
// statically and opens the shared one for live captures), so that a run
// of files does not map it and the eight libraries it needs.
func TestStartupMapsNoLibpcap(t *testing.T) {
	for _, bin := range []string{leanBin(t), wholeBin} {
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		libs, err := f.ImportedLibraries()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(libs, func(l string) bool { return strings.HasPrefix(l, "libc.so") }) {
			t.Fatalf("%s needs %v: not a dynamically linked cgo binary, the test sees nothing", bin, libs)
		}
		for _, l := range libs {
			if strings.HasPrefix(l, "libpcap") {
				t.Errorf("%s needs %s at start-up: every process maps it and the eight libraries it needs", bin, l)
			}
		}
	}
}

// TestStartupInitMemory: the packages' initialisation of a run of the
// build without gRPC allocates under initBudget (GODEBUG=inittrace=1
// reports each package's allocations, the same on every run), and no
// package more than a tenth of it: a table built at init costs every
// process, and is built lazily or by the first function that needs it
// instead. Before this was checked, a run's packages allocated 951 KB at
// init, 467 KB of them gopacket/layers'; the budget was 400 KB then, and
// is 300 KB since the build without gRPC allocates 210 KB (the whole
// build, 505 KB: P4Runtime's types 144 KB, gRPC with golang.org/x/net and
// html/template 135 KB, protobuf 24 KB).
func TestStartupInitMemory(t *testing.T) {
	const initBudget = 300 << 10
	trace := filepath.Join(t.TempDir(), "one.pcap")
	if r := ffpf(t, "gen", "-o", trace, "--packets", "1"); r.code != 0 {
		t.Fatalf("gen: %s", r.stderr)
	}
	cmd := exec.Command(leanBin(t), "run", "-r", trace, `(bpf,"tcp") > [(pktcount)|(bytecount)]`)
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
		if s, slow := slowInits[f[1]]; slow {
			t.Errorf("%s initialised: %s", f[1], s.why)
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
