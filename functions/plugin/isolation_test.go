package plugin_test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ffpf-go/ffpf/functions/plugin"
)

// TestAFailingPluginFailsOnlyItsFunctions: a plugin killed mid-run (kill
// -9), one that never answers, one that returns entries that were not in
// its batch, one that writes into the packet arena (read-only: it faults
// itself) and one whose Process panics each fail their function alone:
// its packets from the failure on count as dropped (the batch in flight
// too), the request without the plugin counts every packet, and the run
// reports how the plugin ended and its last lines on stderr.
func TestAFailingPluginFailsOnlyItsFunctions(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "dns.pcap")
	total, _, _, _ := dnsTrace(t, trace, 100)
	for _, tc := range []struct {
		mode string
		want []string
	}{
		{"kill", []string{"exited during a batch", "was killed by signal 9"}},
		{"hang", []string{"did not answer a batch within 300ms", "killed by ffpf"}},
		{"foreign", []string{"returned an entry that was not in its batch (packet", "killed by ffpf"}},
		{"write", []string{"exited during a batch", "exited with status 2", "unexpected fault address"}},
		{"panic", []string{"exited during a batch", "exited with status 2", `"panic in Process: faulty: misbehaving as asked"`}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			dir := pluginDir(t, "faulty")
			reg, _, log := load(t, dir, plugin.Options{})
			got, err := run(t, reg, trace, `(faulty,mode=`+tc.mode+`,after=3) > (pktcount)`, `(pktcount)`)
			if err == nil {
				t.Fatal("the run reported no failure")
			}
			for _, w := range append(tc.want, "plugin "+filepath.Join(dir, "faulty")) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the report lacks %q: %v", w, err)
				}
			}
			if !strings.Contains(log.String(), "its functions drop their packets from now on") {
				t.Errorf("the log does not say the plugin failed: %s", log)
			}
			f, after, other := got["faulty#1"], got["pktcount#1"], got["pktcount#2"]
			if f.Params["mode"] != tc.mode { // the ids follow the order of the requests
				f, after, other = got["faulty#1"], got["pktcount#2"], got["pktcount#1"]
			}
			if f.In != uint64(total) || f.Filtered != 0 || f.Out < 2*256 || f.Dropped < 1 {
				t.Errorf("faulty: in %d out %d filtered %d dropped %d of %d packets", f.In, f.Out, f.Filtered, f.Dropped, total)
			}
			if after.State["packets"] != f.Out || other.State["packets"] != uint64(total) {
				t.Errorf("after the plugin %v packets (it passed %d); the other request %v of %d", after.State["packets"], f.Out, other.State["packets"], total)
			}
		})
	}
}

// TestBadPluginsAreRefusedNamingTheFile: what a user can get wrong in a
// plugin directory ends the command (exit 2, plugin.Error) with a sentence
// that names the file; a malformed class refuses that plugin alone.
func TestBadPluginsAreRefusedNamingTheFile(t *testing.T) {
	script := func(dir, name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T) ([]string, plugin.Options)
		want  string
	}{
		{"missing directory", func(t *testing.T) ([]string, plugin.Options) {
			return []string{"/nonexistent/plugins"}, plugin.Options{}
		}, "plugin directory /nonexistent/plugins: no such file or directory"},
		{"not a plugin", func(t *testing.T) ([]string, plugin.Options) {
			d := t.TempDir()
			script(d, "hello", "echo hello")
			return []string{d}, plugin.Options{}
		}, `hello is not an ffpf plugin: it printed "hello", not a handshake`},
		{"exits at once", func(t *testing.T) ([]string, plugin.Options) {
			d := t.TempDir()
			script(d, "quits", "echo gone >&2; exit 3")
			return []string{d}, plugin.Options{}
		}, `quits is not an ffpf plugin: it exited with status 3`},
		{"wrong cookie", func(t *testing.T) ([]string, plugin.Options) {
			return []string{pluginDir(t, "othercookie")}, plugin.Options{}
		}, "othercookie is a plugin of another program: its handshake cookie is not ffpf's"},
		{"another protocol version", func(t *testing.T) ([]string, plugin.Options) {
			t.Setenv("FFPF_TEST_OTHER", "version")
			return []string{pluginDir(t, "othercookie")}, plugin.Options{}
		}, `othercookie speaks another version of ffpf's plugin protocol than 1 (its handshake: "1|2|unix|`},
		{"net/rpc", func(t *testing.T) ([]string, plugin.Options) {
			t.Setenv("FFPF_TEST_OTHER", "netrpc")
			return []string{pluginDir(t, "othercookie")}, plugin.Options{}
		}, `othercookie serves go-plugin's net/rpc, not its gRPC (its handshake: "1|1|unix|`},
		{"not executable by the kernel", func(t *testing.T) ([]string, plugin.Options) {
			d := t.TempDir()
			os.WriteFile(filepath.Join(d, "garbage"), []byte("\x00\x01 not a program"), 0o755)
			return []string{d}, plugin.Options{}
		}, "garbage cannot be run: exec format error"},
		{"checksum mismatch", func(t *testing.T) ([]string, plugin.Options) {
			d := pluginDir(t, "dnsname")
			sums := filepath.Join(t.TempDir(), "SHA256SUMS")
			os.WriteFile(sums, []byte(fmt.Sprintf("%x  dnsname\n", sha256.Sum256([]byte("another binary")))), 0o644)
			return []string{d}, plugin.Options{Sums: sums}
		}, "dnsname: its SHA-256 is not the one"},
		{"no checksum", func(t *testing.T) ([]string, plugin.Options) {
			d := pluginDir(t, "dnsname")
			sums := filepath.Join(t.TempDir(), "SHA256SUMS")
			os.WriteFile(sums, []byte(fmt.Sprintf("%x  other\n", sha256.Sum256(nil))), 0o644)
			return []string{d}, plugin.Options{Sums: sums}
		}, "dnsname has no checksum in"},
		{"clash with a built-in", func(t *testing.T) ([]string, plugin.Options) {
			t.Setenv("FFPF_TEST_CLASS", "pktcount")
			return []string{pluginDir(t, "faulty")}, plugin.Options{}
		}, "faulty serves class pktcount, which is a built-in class"},
		{"clash with another plugin", func(t *testing.T) ([]string, plugin.Options) {
			return []string{pluginDir(t, "dnsname"), pluginDir(t, "dnsname")}, plugin.Options{}
		}, "dnsname serves class dnsname, as plugin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dirs, opts := tc.setup(t)
			reg, _, _ := load(t, t.TempDir(), plugin.Options{}) // the built-ins
			opts.Log = &syncWriter{w: &strings.Builder{}}
			h, err := plugin.Load(dirs, reg, opts)
			var pe *plugin.Error
			if err == nil || !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load: %v, want a plugin.Error with %q", err, tc.want)
			}
			if h != nil {
				h.Close()
			}
			if _, ok := reg.Lookup("dnsname"); ok {
				t.Error("a failed load left a class registered")
			}
		})
	}
	t.Run("malformed schema", func(t *testing.T) {
		dir := pluginDir(t, "badschema", "dnsname")
		reg, h, _ := load(t, dir, plugin.Options{})
		if len(h.Refused) != 1 || !strings.Contains(h.Refused[0].Error(), "badschema refused: class badschema declares parameter \"x\" twice") {
			t.Errorf("refused: %v", h.Refused)
		}
		if _, ok := reg.Lookup("dnsname"); !ok {
			t.Error("the good plugin did not load beside the bad one")
		}
		if _, ok := reg.Lookup("badschema"); ok {
			t.Error("the malformed class was registered")
		}
	})
}

// TestPluginOutputIsRead: what a plugin writes to os.Stdout and os.Stderr
// (go-plugin sends both to ffpf over gRPC) reaches ffpf's log, each line
// with the plugin's name, however much it writes: unread, the pipe behind
// them would fill at 64 KB and block the plugin's Process past its
// deadline.
func TestPluginOutputIsRead(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "dns.pcap")
	total, _, _, _ := dnsTrace(t, trace, 100)
	reg, h, log := load(t, pluginDir(t, "faulty"), plugin.Options{})
	got, err := run(t, reg, trace, `(faulty,mode=chatty,after=1) > (pktcount)`)
	if err != nil {
		t.Fatal(err)
	}
	h.Close() // the log is whole once the plugin ended
	if f := got["faulty#1"]; f.Out != uint64(total) || f.Dropped != 0 {
		t.Errorf("faulty passed %d of %d packets, dropped %d", f.Out, total, f.Dropped)
	}
	for _, ch := range []string{"stdout", "stderr"} {
		n := strings.Count(log.String(), "plugin faulty: batch ") // both channels
		if want := fmt.Sprintf("plugin faulty: batch 1 %s 47 xxx", ch); !strings.Contains(log.String(), want) || n < 2*48 {
			t.Errorf("the log lacks %q (%d lines of batches)", want, n)
		}
	}
}

// TestPluginIsShutDown: Close asks the plugin to end (go-plugin's
// Shutdown), which its Serve returns from, and the process is gone
// afterwards.
func TestPluginIsShutDown(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "dns.pcap")
	dnsTrace(t, trace, 1)
	reg := registry()
	var log strings.Builder
	h, err := plugin.Load([]string{pluginDir(t, "faulty")}, reg, plugin.Options{Log: &syncWriter{w: &log}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, reg, trace, `(faulty,mode=none) > (pktcount)`); err != nil {
		t.Fatal(err)
	}
	h.Close()
	var pid int
	for _, l := range strings.Split(log.String(), "\n") {
		fmt.Sscanf(l, "plugin faulty: faulty %d: served until ffpf shut it down", &pid)
	}
	if pid == 0 {
		t.Fatalf("the plugin did not return from Serve: %s", log.String())
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the plugin's process %d is still there after Close: %v", pid, err)
	}
}

// TestPluginEnvironment: a plugin is started with ffpf's environment but
// none of go-plugin's variables that change its protocol: with
// PLUGIN_CLIENT_CERT set, a plugin would serve TLS, which ffpf does not
// speak. A checksum that matches loads the plugin.
func TestPluginEnvironment(t *testing.T) {
	t.Setenv("PLUGIN_CLIENT_CERT", "not a certificate")
	t.Setenv("PLUGIN_MULTIPLEX_GRPC", "true")
	dir := pluginDir(t, "dnsname")
	bin, err := os.ReadFile(filepath.Join(dir, "dnsname"))
	if err != nil {
		t.Fatal(err)
	}
	sums := filepath.Join(t.TempDir(), "SHA256SUMS")
	os.WriteFile(sums, []byte(fmt.Sprintf("%x  dnsname\n", sha256.Sum256(bin))), 0o644)
	reg, h, _ := load(t, dir, plugin.Options{Sums: sums})
	if _, ok := reg.Lookup("dnsname"); !ok || h.Plugin("dnsname") == "" {
		t.Fatal("dnsname did not load")
	}
}
