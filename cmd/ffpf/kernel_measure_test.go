package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestMeasurementsInEBPF: counter, cms, hll, pcsa, bloom and sample placed in
// XDP and at tc on live traffic through a veth (one queue: one CPU takes
// the packets in order) give the state (--json) the same requests give in
// userspace on the frames that were sent.
func TestMeasurementsInEBPF(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPair(t)
	dir := t.TempDir()
	_, kernel := reviewHier(t, dir)
	exprs := []string{
		`(bpf,"tcp or udp") > (counter,value=bytes)`,
		`(bpf,"tcp or udp") > (counter,key="srcip/24,dstport",size=4096)`,
		`(bpf,"tcp or udp") > (cms,key="5tuple",value=bytes,width=500,depth=3)`,
		`(bpf,"tcp or udp") > (hll,key="srcip,srcport",precision=10)`,
		`(bpf,"tcp or udp") > (bloom,key="dstip",bits=4096,hashes=3) > (pktcount)`,
		`(bpf,"tcp or udp") > (sample,every=3) > (bytecount)`,
		`(bpf,"tcp or udp") > (pcsa,key="dstip,dstport",bitmaps=64)`,
	}
	var reqs []string
	for _, x := range exprs {
		reqs = append(reqs, "-e", x)
	}
	classes := []string{"counter", "cms", "hll", "bloom", "pktcount", "sample", "bytecount", "pcsa"}
	x := startCapture(t, nsB, append([]string{"run", "--json", "-i", ifB}, reqs...)...)
	k := startCapture(t, nsB, append([]string{"run", "--json", "-i", ifB, "--hierarchy", kernel}, reqs...)...)
	waitPrograms(t, 4) // each at its ingress and egress
	sent := filepath.Join(dir, "sent.pcap")
	sendTrace(t, nsA, ifA, sent, 20000, 11)
	settle(t)
	file := parseRun(t, ffpf(t, append([]string{"run", "--json", "-r", sent}, reqs...)...))
	for _, c := range []struct {
		doc   runJSON
		place string
	}{{x.stop(t), "xdp"}, {k.stop(t), "kernel"}} {
		for _, class := range classes {
			got, want := c.doc.byClass(class), file.byClass(class)
			if len(got) != len(want) || len(got) == 0 {
				t.Fatalf("%s: %d functions of class %s, %d from the file", c.place, len(got), class, len(want))
			}
			for i := range got {
				g, w := c.doc.Functions[got[i]], file.Functions[want[i]]
				if w.In < 1000 {
					t.Fatalf("%s#%d saw %d packets of the file: the test measures nothing", class, i+1, w.In)
				}
				if !strings.HasPrefix(g.Flowspace, c.place) {
					t.Errorf("%s#%d runs in %s, not %s", class, i+1, g.Flowspace, c.place)
				}
				if fmt.Sprint(g.State) != fmt.Sprint(w.State) || g.In != w.In || g.Out != w.Out {
					t.Errorf("%s#%d %v in %s: in %d out %d state %v;\n from the file: in %d out %d state %v",
						class, i+1, g.Params, c.place, g.In, g.Out, g.State, w.In, w.Out, w.State)
				}
			}
		}
	}
	waitPrograms(t, 0)
}
