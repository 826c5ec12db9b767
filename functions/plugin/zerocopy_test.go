package plugin_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/ffpf-go/ffpf/examples/plugin/dnsname/dns"
	"github.com/ffpf-go/ffpf/examples/plugin/portcount/ports"
	"github.com/ffpf-go/ffpf/functions/plugin"
)

// TestRealSourcesCrossZeroCopy: the sources of real runs (gen, a capture
// file read through the ring, the default, or with read(2)) put their
// packets in shared memory when a plugin's function reads them, and every
// packet crosses to the plugin in place, none copied; a mapped file (its
// mapping is the file's) and a host told to copy (Options.CopyOnce, the
// baseline; so does $FFPF_PLUGIN_COPY) copy each once. Whichever way, the counters and states are
// the compiled-in class's.
func TestRealSourcesCrossZeroCopy(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "dns.pcap")
	total, _, matched, _ := dnsTrace(t, trace, 400) // larger than the first read buffer: read through the ring
	const genPackets = 20000
	dnsExpr := `(dnsname,suffix=".example.com") > (pktcount)`
	genExpr := `(gen,packets=20000,seed=7) > (portcount,ports="53,80,443") > (pktcount)`
	for _, c := range []struct {
		name, class, access, expr string
		copyOnce, zeroCopy        bool
	}{
		{"gen", "portcount", "", genExpr, false, true},
		{"gen/copy-once", "portcount", "", genExpr, true, false},
		{"ring", "dnsname", "ring", dnsExpr, false, true},
		{"read", "dnsname", "read", dnsExpr, false, true},
		{"mmap", "dnsname", "mmap", dnsExpr, false, false},
		{"ring/copy-once", "dnsname", "ring", dnsExpr, true, false},
		{"ring/FFPF_PLUGIN_COPY", "dnsname", "ring", dnsExpr, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("FFPF_PCAP_READ", c.access)
			if c.name == "ring/FFPF_PLUGIN_COPY" {
				t.Setenv("FFPF_PLUGIN_COPY", "1") // as Options.CopyOnce
			}
			reg, h, _ := load(t, pluginDir(t, c.class), plugin.Options{CopyOnce: c.copyOnce})
			in := registry(dns.Class, ports.Class)
			got, err := run(t, reg, trace, c.expr)
			if err != nil {
				t.Fatal(err)
			}
			want, err := run(t, in, trace, c.expr)
			if err != nil {
				t.Fatal(err)
			}
			id, n, out := c.class+"#1", uint64(total), uint64(matched)
			if c.class == "portcount" {
				n, out = genPackets, genPackets
			}
			if p := got[id]; p.In != n || p.Out != out || p.Dropped != 0 {
				t.Errorf("%s: in %d out %d dropped %d; want in %d out %d", id, p.In, p.Out, p.Dropped, n, out)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("out of process:\n%v\nin process:\n%v", got, want)
			}
			if c.class == "portcount" {
				var counted uint64
				for _, v := range want[id].State["packets"].([]any) {
					counted += v.(uint64)
				}
				if counted == 0 {
					t.Errorf("gen sent none of its packets to the ports counted: the test compares nothing (%v)", want[id].State)
				}
			}
			s := h.Stats(c.class)
			wantRef, wantCopy := n, uint64(0)
			if !c.zeroCopy {
				wantRef, wantCopy = 0, n
			}
			if s.Referred != wantRef || s.Copied != wantCopy {
				t.Errorf("%d packets crossed in place, %d copied; want %d and %d", s.Referred, s.Copied, wantRef, wantCopy)
			}
		})
	}
}
