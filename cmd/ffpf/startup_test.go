package main

import (
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
