package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// leanBin is ffpf built without gRPC (-tags nogrpc), as make build's
// bin/ffpf, built once: ffpfBin itself under FFPF_TEST_NOGRPC.
var (
	leanOnce sync.Once
	leanPath string
	leanErr  error
)

func leanBin(t *testing.T) string {
	t.Helper()
	leanOnce.Do(func() {
		if os.Getenv("FFPF_TEST_NOGRPC") != "" {
			leanPath = ffpfBin
			return
		}
		leanPath = filepath.Join(testDir, "nogrpc", "ffpf")
		leanErr = buildFFPF(leanPath, "-tags", "nogrpc")
	})
	if leanErr != nil {
		t.Fatal(leanErr)
	}
	return leanPath
}

// timings are what differs between two runs of one command.
var timings = regexp.MustCompile(`[0-9.]+ ?(ns|µs|ms|s|[kMG]?pps)\b`)

// TestGRPCDispatch: the lean build (-tags nogrpc) runs ffpf-grpc, beside
// it, with the same arguments and environment, for exactly the commands
// that need what it leaves out (ffpf serve, ffpf dta collect --http, ffpf
// p4 build and switch, a plugin directory, a hierarchy with a p4
// flowspace), and runs every other
// command itself, the daemon's clients included, with the whole build's
// output and status.
func TestGRPCDispatch(t *testing.T) {
	dir := t.TempDir()
	lean := filepath.Join(dir, "ffpf")
	if err := os.Link(leanBin(t), lean); err != nil {
		t.Fatal(err)
	}
	// A stand-in for ffpf-grpc that shows how it was run.
	script := "#!/bin/sh\nprintf 'ffpf-grpc'; for a in \"$@\"; do printf ' [%s]' \"$a\"; done; echo; echo \"FFPF_PLUGINS=$FFPF_PLUGINS\"; exit 42\n"
	if err := os.WriteFile(filepath.Join(dir, grpcSibling), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	one := filepath.Join(dir, "one.pcap")
	if r := ffpf(t, "gen", "-o", one, "--packets", "3", "--seed", "1"); r.code != 0 {
		t.Fatalf("gen: %s", r.stderr)
	}
	plugins := t.TempDir()
	tor, _ := filepath.Abs("../../examples/hierarchy/tor.yaml")
	nics, _ := filepath.Abs("../../examples/hierarchy/two-nics.yaml")
	p4file, _ := filepath.Abs("../../functions/p4gen/testdata/bpf.p4")
	expr := `(bpf,"tcp") > [(pktcount)|(bytecount)]`
	nosock := filepath.Join(dir, "no.sock") // no daemon: the clients say so
	run := func(bin string, env []string, args []string) cliResult {
		return runCLI(t, bin, "", nil, append([]string{}, env...), args...)
	}
	for _, tc := range []struct {
		env      []string
		args     []string
		elsewere bool
	}{
		{nil, []string{"p4", "build", "--hierarchy", tor, "-i", "swp1", "-o", filepath.Join(dir, "out"), expr}, true},
		{nil, []string{"p4", "build", "-h"}, true},
		{nil, []string{"p4", "switch", "-h"}, true},
		{nil, []string{"p4", "net", "-h"}, true},
		{nil, []string{"p4", "switch", "--p4runtime", "127.0.0.1:0", "--port", "1=file:" + one}, true},
		{nil, []string{"run", "-r", one, "--plugins", plugins, expr}, true},
		{[]string{"FFPF_PLUGINS=" + plugins}, []string{"run", "-r", one, expr}, true},
		{[]string{"FFPF_PLUGINS=" + plugins}, []string{"check", "-r", one, expr}, true},
		{nil, []string{"place", "--plugins", plugins + ":" + plugins, expr}, true},
		{nil, []string{"classes", "--plugins", plugins, "--json"}, true},
		{nil, []string{"hierarchy", "--hierarchy", tor}, true},
		{nil, []string{"place", "--hierarchy", tor, "-i", "swp1", expr}, true},
		{nil, []string{"check", "--hierarchy", tor, "-i", "swp1", expr}, true},
		{nil, []string{"run", "--hierarchy", tor, "-r", one, expr}, true},
		{nil, []string{"serve", "-h"}, true},
		{nil, []string{"serve", "--socket", nosock, "--http", "127.0.0.1:0"}, true},
		{nil, []string{"serve", "--no-such-flag"}, true},
		{nil, []string{"dta", "collect", "--listen", "127.0.0.1:0", "--keywrite", "slots=1000", "--http", "127.0.0.1:0"}, true},

		{nil, []string{"run", "-r", one, expr}, false},
		{nil, []string{"run", "-r", one, "--plugin-sums", "SUMS", expr}, false}, // no plugin named: a usage error
		{[]string{"FFPF_PLUGINS=:"}, []string{"run", "-r", one, expr}, false},
		{nil, []string{"run", "-r", one, "(pktcount"}, false},
		{nil, []string{"check", "-r", one, expr}, false},
		{nil, []string{"place", "--hierarchy", nics, "-i", "eth0", expr}, false},
		{nil, []string{"place", "--hierarchy", tor, "--no-such-flag", expr}, false}, // refused before the file is read
		{nil, []string{"hierarchy", "--hierarchy", nics, "--json"}, false},
		{nil, []string{"classes"}, false},
		{nil, []string{"p4"}, false},
		{nil, []string{"p4", "help"}, false},
		{nil, []string{"p4", "swich"}, false},
		{nil, []string{"p4", "check", p4file}, false},
		{nil, []string{"submit", "--socket", nosock, "-r", one, expr}, false},
		{nil, []string{"submit", "-h"}, false},
		{[]string{"FFPF_SOCKET=" + nosock}, []string{"ls", "--json"}, false},
		{nil, []string{"stat", "--socket", nosock, "--json", "1"}, false},
		{nil, []string{"call", "--socket", nosock, "1", "f", "h"}, false},
		{nil, []string{"read", "--socket", nosock, "--jsonl", "1"}, false},
		{nil, []string{"rm", "--socket", nosock, "1"}, false},
		{nil, []string{"rm"}, false},
		{nil, []string{"dta", "collect", "--listen", "127.0.0.1:0", "--sockets", "-1", "--http", "127.0.0.1:0"}, false},
		{nil, []string{"dta", "collect", "--http", "127.0.0.1:0"}, false}, // no --listen: a usage error
		{nil, []string{"dta", "collect", "--listen", "127.0.0.1:0", "--keywrite", "slots=x", "--http", "127.0.0.1:0"}, false},
		{nil, []string{"help"}, false},
		{nil, []string{"version"}, false},
	} {
		got := run(lean, tc.env, tc.args)
		if tc.elsewere {
			var b strings.Builder
			b.WriteString("ffpf-grpc")
			for _, a := range tc.args {
				b.WriteString(" [" + a + "]")
			}
			want := b.String() + "\n"
			for _, kv := range tc.env {
				want += kv + "\n"
			}
			if len(tc.env) == 0 {
				want += "FFPF_PLUGINS=" + os.Getenv("FFPF_PLUGINS") + "\n"
			}
			if got.code != 42 || got.stdout != want || got.stderr != "" {
				t.Errorf("ffpf %q did not run ffpf-grpc as it was run: status %d, %q, %q", tc.args, got.code, got.stdout, got.stderr)
			}
			continue
		}
		want := run(wholeBin, tc.env, tc.args)
		if got.code != want.code || timings.ReplaceAllString(got.stdout, "T") != timings.ReplaceAllString(want.stdout, "T") ||
			timings.ReplaceAllString(got.stderr, "T") != timings.ReplaceAllString(want.stderr, "T") {
			t.Errorf("ffpf %q without gRPC: status %d\n%s%s\nthe whole build: status %d\n%s%s", tc.args, got.code, got.stdout, got.stderr, want.code, want.stdout, want.stderr)
		}
		if strings.Contains(got.stdout+got.stderr, "ffpf-grpc") {
			t.Errorf("ffpf %q ran ffpf-grpc", tc.args)
		}
	}
	// Without ffpf-grpc beside it, it says so, naming the file.
	os.Remove(filepath.Join(dir, grpcSibling))
	got := run(lean, nil, []string{"hierarchy", "--hierarchy", tor})
	if got.code != 1 || !strings.Contains(got.stderr, "tor.yaml:28: a p4 flowspace: this ffpf was built without gRPC") ||
		!strings.Contains(got.stderr, filepath.Join(dir, grpcSibling)+", cannot be run: no such file or directory") {
		t.Errorf("without ffpf-grpc: status %d, %q", got.code, got.stderr)
	}
}
