package p4net_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/flowspaces/p4/p4net"
)

// The MAFIA use cases run on networks in examples/mafia (TestSwitch*),
// and ffpf p4 net in cmd/ffpf; here, what a network file may say.

const good = `
program: postcards.mafia
switches:
  - {name: s1, role: first_hop, rates: {2: 500000}}
  - {name: s2, role: intermediate, id: 7}
  - {name: s3, role: last_hop}
links: ["s1:2 s2:1", "s2:2 s3:1"]
ports: {"s1:1": "in:trace.pcap", "s3:2": "out:out.pcap"}
routes: {s1: {1: 2}, s2: {1: 2}, s3: {1: 2}}
changes:
  - {at: 5ms, switch: s2, routes: {1: 3}}
`

func TestConfig(t *testing.T) {
	c, err := p4net.Parse([]byte(good), filepath.Join("nets", "path.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ProgramPath(); got != filepath.Join("nets", "postcards.mafia") {
		t.Errorf("the program is %s, relative to the file's directory", got)
	}
	if s := c.Switch("s2"); s == nil || s.ID != 7 || s.Role != "intermediate" {
		t.Errorf("s2: %+v", s)
	}
	if s := c.Switch("s3"); s == nil || s.ID != 3 || s.CPUPort != 255 {
		t.Errorf("s3's id and CPU port default to its position and 255: %+v", s)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct{ from, to, msg string }{
		{"{name: s2, role: intermediate, id: 7}", "{name: s2, role: middle}", `role "middle" is none of first_hop, intermediate, last_hop`},
		{"{name: s2, role: intermediate, id: 7}", "{name: s1}", "switch s1 is named twice"},
		{"{name: s2, role: intermediate, id: 7}", "{name: s2, id: 3}", "have id 3"},
		{"{name: s2, role: intermediate, id: 7}", "{name: s2, cpu_port: 600}", "CPU port 600 is not a port"},
		{"rates: {2: 500000}", "rates: {2: 0}", "a rate above 0"},
		{`"out:out.pcap"`, `"tap:out.pcap"`, "is not in:FILE.pcap or out:FILE.pcap"},
		{"at: 5ms", "at: soon", `at "soon" is not a duration`},
		{"s3: {1: 2}}", "s3: {1: 2}, s9: {1: 2}}", `routes of "s9", which is no switch`},
		{"s3: {1: 2}}", "s3: {1: 511}}", "ports are 0 to 510"},
		{"program:", "programme:", "programme not found"},
	} {
		src := strings.Replace(good, tc.from, tc.to, 1)
		if src == good {
			t.Fatalf("%q is not in the network", tc.from)
		}
		_, err := p4net.Parse([]byte(src), "path.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.msg) || !strings.HasPrefix(err.Error(), "path.yaml: ") {
			t.Errorf("%s → %s: %v, want path.yaml: …%s…", tc.from, tc.to, err, tc.msg)
		}
	}
}

const elsewhere = `
program: postcards.mafia
switches:
  - {name: s1, role: first_hop, p4runtime: 127.0.0.1:9561, device_id: 1}
  - {name: s2, role: intermediate, p4runtime: 127.0.0.1:9562, device_id: 2, cpu_port: 64}
  - {name: s3, role: last_hop, p4runtime: "[::1]:9563", device_id: 3}
routes: {s1: {1: 2}, s2: {1: 2}, s3: {1: 2}}
`

// A network of switches that run elsewhere: their addresses and device
// ids; what their processes decide is refused in the file.
func TestConfigElsewhere(t *testing.T) {
	c, err := p4net.Parse([]byte(elsewhere), "path.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !c.Elsewhere() || c.Switch("s2").P4Runtime != "127.0.0.1:9562" || c.Switch("s2").CPUPort != 64 {
		t.Errorf("%+v", c.Switches)
	}
	if ex, err := p4net.Load("../../../examples/mafia/path-processes.yaml"); err != nil || !ex.Elsewhere() || len(ex.Switches) != 3 {
		t.Errorf("examples/mafia/path-processes.yaml: %v", err)
	}
	if l, err := p4net.Parse([]byte(good), "path.yaml"); err != nil || l.Elsewhere() || l.Switch("s1").Elsewhere() {
		t.Errorf("a network without addresses runs in the process: %v", err)
	}
	if _, err := p4net.Start(c, nil); err == nil || !strings.Contains(err.Error(), "RunElsewhere") {
		t.Errorf("Start of a network elsewhere: %v", err)
	}
	for _, tc := range []struct{ from, to, msg string }{
		{"p4runtime: 127.0.0.1:9562, device_id: 2", "device_id: 2",
			"switch s1 runs elsewhere (p4runtime: 127.0.0.1:9561) and s2 in this process"},
		{"routes:", `links: ["s1:2 s2:1"]` + "\nroutes:", "links: the switches run elsewhere (p4runtime:)"},
		{"routes:", `ports: {"s1:1": "in:t.pcap"}` + "\nroutes:", "ports: the switches run elsewhere (p4runtime:)"},
		{"routes:", "changes: [{at: 1ms, switch: s1, routes: {1: 3}}]\nroutes:", "changes: are made at times of the trace"},
		{"device_id: 2,", "device_id: 2, rates: {2: 1000},", "switch s2 runs elsewhere (p4runtime: 127.0.0.1:9562): its rates and queue are its process's"},
		{"device_id: 2,", "device_id: 2, queue: 8,", "its rates and queue are its process's (ffpf p4 switch --rate, --queue)"},
		{"127.0.0.1:9562", "localhost", `switch s2: p4runtime "localhost" is not the HOST:PORT`},
		{"127.0.0.1:9562", "127.0.0.1:0", `p4runtime "127.0.0.1:0" is not the HOST:PORT a switch serves`},
		{"127.0.0.1:9562, device_id: 2", "127.0.0.1:9561, device_id: 1", "switches s1 and s2 are both the switch at 127.0.0.1:9561 device 1"},
	} {
		src := strings.Replace(elsewhere, tc.from, tc.to, 1)
		if src == elsewhere {
			t.Fatalf("%q is not in the network", tc.from)
		}
		_, err := p4net.Parse([]byte(src), "path.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.msg) || !strings.HasPrefix(err.Error(), "path.yaml: ") {
			t.Errorf("%s → %s: %v, want path.yaml: …%s…", tc.from, tc.to, err, tc.msg)
		}
	}
}
