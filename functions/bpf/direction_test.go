package bpf

import (
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
)

// TestDirectionOfACapture: libpcap's inbound and outbound select every or
// no packet of a capture of one direction, as the kernel's packet type
// would; on packets of both directions a userspace filter refuses to run,
// and one whose code runs at an eBPF hook is made (the hook knows).
func TestDirectionOfACapture(t *testing.T) {
	pkt := make([]byte, 60)
	pkt[12], pkt[13] = 0x08, 0x00
	for _, tc := range []struct {
		expr, dir string
		pass      bool
	}{
		{"inbound", "in", true}, {"inbound", "out", false},
		{"outbound", "in", false}, {"outbound", "out", true},
		{"outbound and ip", "out", true}, {"not inbound", "in", false},
	} {
		caps := []functions.Capture{{LinkTypeField: uint32(functions.LinkEthernet), Direction: tc.dir}}
		p, err := CompileCapturesAndLoad(tc.expr, functions.LinkEthernet, caps, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Run(pkt, uint32(len(pkt))) != 0; got != tc.pass {
			t.Errorf("%q on a capture -Q %s: %v, want %v", tc.expr, tc.dir, got, tc.pass)
		}
	}
	c, params := bind(t, functions.Arg{Value: functions.Raw{Kind: functions.RawString, Text: "inbound"}})
	for _, dir := range []string{"inout", ""} {
		ctx := &functions.Context{Params: params, LinkType: functions.LinkEthernet, Snaplen: 262144,
			Captures: []functions.Capture{{LinkTypeField: uint32(functions.LinkEthernet), Direction: dir}}}
		if _, err := c.New(ctx); err == nil || !strings.Contains(err.Error(), "need each packet's direction") {
			t.Errorf("inbound on a capture of direction %q in userspace: %v", dir, err)
		}
		ctx.Target = functions.TargetKernel
		if _, err := c.New(ctx); err != nil {
			t.Errorf("inbound at an eBPF hook: %v", err)
		}
	}
	// Two captures of different directions: the packets' direction is not
	// known either.
	ctx := &functions.Context{Params: params, LinkType: functions.LinkEthernet, Snaplen: 262144,
		Captures: []functions.Capture{{LinkTypeField: 1, Direction: "in"}, {LinkTypeField: 1, Direction: "out"}}}
	if _, err := c.New(ctx); err == nil {
		t.Error("inbound on a join of captures -Q in and -Q out runs in userspace")
	}
}
