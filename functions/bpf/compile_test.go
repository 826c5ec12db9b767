package bpf

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
)

func TestCompileErrors(t *testing.T) {
	cases := []struct {
		expr string
		lt   functions.LinkType
		want string
	}{
		// The FFPF paper's example, as written there.
		{"tcp and dest 80", functions.LinkEthernet, `bad filter expression "tcp and dest 80": syntax error in filter expression`},
		{"tcp and", functions.LinkEthernet, `bad filter expression "tcp and": `},
		{"ip[2:2] / 0 = 1", functions.LinkEthernet, `bad filter expression "ip[2:2] / 0 = 1": division by zero`},
		{"ip[0] << 33 = 0", functions.LinkEthernet, `shift by more than 31 bits`},
		// Link types above 255 reach libpcap whole, and its own message.
		{"vlan", functions.LinkSLL2, `bad filter expression "vlan": no VLAN support for Linux cooked v2`},
		{"ip", 281, `bad filter expression "ip": Broadcom tag link-layer type filtering not implemented`},
		{"tcp", 147, `bad filter expression "tcp": DLT 147 link-layer type filtering not implemented`},
	}
	for _, c := range cases {
		_, err := Compile(c.expr, c.lt, 0)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Compile(%q, %s) = %v, want %q", c.expr, c.lt, err, c.want)
		}
	}
}

func TestCompile(t *testing.T) {
	insns, err := Compile("tcp and dst port 80", functions.LinkEthernet, 0)
	if err != nil {
		t.Fatal(err)
	}
	// libpcap's program, as `tcpdump -dd 'tcp and dst port 80'` prints it.
	want := []Instruction{
		{0x28, 0, 0, 0x0000000c}, {0x15, 0, 7, 0x00000800}, {0x30, 0, 0, 0x00000017},
		{0x15, 0, 11, 0x00000006}, {0x28, 0, 0, 0x00000014}, {0x45, 9, 0, 0x00001fff},
		{0xb1, 0, 0, 0x0000000e}, {0x48, 0, 0, 0x00000010}, {0x15, 5, 6, 0x00000050},
		{0x15, 0, 5, 0x000086dd}, {0x30, 0, 0, 0x00000014}, {0x15, 0, 3, 0x00000006},
		{0x28, 0, 0, 0x00000038}, {0x15, 0, 1, 0x00000050}, {0x6, 0, 0, 0x00040000},
		{0x6, 0, 0, 0x00000000},
	}
	if len(insns) != len(want) {
		t.Fatalf("got %d instructions:\n%s", len(insns), Disassemble(insns))
	}
	for i := range want {
		if insns[i] != want[i] {
			t.Errorf("instruction %d: got %+v, want %+v", i, insns[i], want[i])
		}
	}
	// The snap length is what a passing packet returns.
	insns, err = Compile("ip", functions.LinkRaw, 128)
	if err != nil {
		t.Fatal(err)
	}
	if last := insns[len(insns)-2]; last.Code != classRET|retK || last.K != 128 {
		t.Errorf("ip with snaplen 128: %s", Disassemble(insns))
	}
}

// TestDisassembleMatchesTcpdump compares Disassemble with `tcpdump -d` on
// expressions that between them use every instruction libpcap emits.
func TestDisassembleMatchesTcpdump(t *testing.T) {
	tcpdump, err := exec.LookPath("tcpdump")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("tcpdump is not installed (make deps installs it): cannot compare with tcpdump -d")
		}
		t.Skip("tcpdump is not installed: cannot compare with tcpdump -d")
	}
	exprs := []string{
		"tcp and dst port 80", "protochain 6", "ip6 protochain 17", "vlan 100 and udp",
		"len - 10 > ip[0] * 2", "ip[0] ^ 3 = 1 or ip[1] | 2 = 2 or ip[0] >> ip[1] = 0",
		"ip[0] << ip[1] = 0", "ip[2:2] % 3 = 1 and ip[2:2] / 4 > 1", "ip[0] = -ip[1]",
		"ip[1] - ip[0] > 3 and ip[1] & ip[0] != 0 and ip[3] * 2 = 4", "0 - ip[0] = 3",
		"ip[len - 60] = 1", "tcp[((tcp[12:1] & 0xf0) >> 2):4] = 0x47455420", "greater 1000",
		"ether[0:4] = 0xffffffff", "ip[0] & 0xf0 >= 0x40", "ip[4:2] - 1 = 0xffff", "ip[1] << 4 = 0x100",
		"net 10.0.0.0/8 or host 2001:db8::1", "ip[0] >> 4 = 4",
	}
	for _, lt := range []struct {
		name string
		lt   functions.LinkType
	}{{"EN10MB", functions.LinkEthernet}, {"RAW", functions.LinkRaw}, {"LINUX_SLL", functions.LinkLinuxSLL}, {"LINUX_SLL2", functions.LinkSLL2}} {
		for _, expr := range exprs {
			insns, cerr := Compile(expr, lt.lt, 1500)
			out, err := exec.Command(tcpdump, "-y", lt.name, "-s", "1500", "-d", expr).Output()
			if cerr != nil {
				if err == nil {
					t.Errorf("%s %q: we fail (%v), tcpdump compiles it", lt.name, expr, cerr)
				}
				continue
			}
			if err != nil {
				t.Errorf("tcpdump -y %s -d %q: %v", lt.name, expr, err)
				continue
			}
			if got := Disassemble(insns); got != string(out) {
				t.Errorf("%s %q:\nours:\n%s\ntcpdump -d:\n%s", lt.name, expr, got, out)
			}
		}
	}
}

func TestInstructionString(t *testing.T) {
	cases := map[Instruction]string{
		{Code: jeqK, Jt: 0, Jf: 3, K: 0x800}: "jeq      #0x800           jt +0\tjf +3",
		{Code: ja, K: 0xfffffff0}:            "ja       -16",
		{Code: ldHX, K: 16}:                  "ldh      [x + 16]",
		{Code: 0xff}:                         "unimp    0xff",
		{Code: retKc, K: 0xffffffff}:         "ret      #-1",
	}
	for in, want := range cases {
		if got := in.String(); got != want {
			t.Errorf("%+v: %q, want %q", in, got, want)
		}
	}
}
