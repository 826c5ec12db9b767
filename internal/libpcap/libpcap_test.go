package libpcap

import (
	"slices"
	"strings"
	"testing"
)

// The binding reaches both copies of libpcap: the one linked statically
// (the version, a filter compiled as tcpdump -dd would: the bpf class's
// differential tests check programs against tcpdump's; libpcap's own error
// for a bad expression) and the shared one, loaded at the first call that
// needs it (the devices).
func TestLoadedOnFirstCall(t *testing.T) {
	if v := Version(); !strings.HasPrefix(v, "libpcap version") {
		t.Fatalf("Version() = %q", v)
	}
	prog, err := CompileDead("tcp", 1 /* DLT_EN10MB */, 262144, NetmaskUnknown)
	if err != nil {
		t.Fatal(err)
	}
	// ldh [12]; jeq #0x86dd ...: the first instruction loads the ethertype,
	// the last returns.
	if len(prog) < 4 || prog[0] != (Insn{Code: 0x28, K: 12}) || prog[len(prog)-1].Code != 0x06 {
		t.Errorf("tcp compiled to %v", prog)
	}
	if _, err := CompileDead("tcp and", 1, 262144, NetmaskUnknown); err == nil || !strings.Contains(err.Error(), "syntax error") {
		t.Errorf("a bad expression: %v", err)
	}
	devs, err := Devices()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(devs, func(d Device) bool { return d.Name == "lo" || d.Name == "any" }) {
		t.Errorf("devices %v have neither lo nor any", devs)
	}
}
