package mafia_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ffpf-go/ffpf/flowspaces/p4/p4net"
	"github.com/ffpf-go/ffpf/functions/p4gen"
	"github.com/ffpf-go/ffpf/lang"
	"github.com/ffpf-go/ffpf/lang/mafia"
)

// The switch the resources are counted on: Tofino-1's profile with room
// for the programs that need more than its 12 stages (the count says how
// many they use).
func benchProfile() p4gen.Profile {
	p := p4gen.Tofino1()
	p.Stages, p.ALUs = 48, 16
	return p
}

var benchLogged sync.Map

// BenchmarkCompile is MAFIA's compile time (Table III: < 25 ms) for each
// use case: parse the .mafia file, compile it to ffpf requests, and build
// each role's switch program (lower, validate, allocate stages, print
// P4_16; not the model's device config, made when a program is pushed). It reports the lines of P4 printed (all roles), and
// logs, once, each role's resources: ingress and egress stages, the
// widest stage (logical tables), stateful operations (Table IV).
func BenchmarkCompile(b *testing.B) {
	files, err := filepath.Glob("*.mafia")
	if err != nil || len(files) != 13 {
		b.Fatalf("%d use cases: %v", len(files), err)
	}
	prof := benchProfile()
	// A switch that only forwards: the header library, the parser (its
	// libpcap-exact states), the routes; what a use case adds is beyond.
	base, err := p4net.Build(&lang.Request{}, nil, p4net.Options{Name: "s1", ID: 1, CPUPort: 255, Profile: prof})
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		name := strings.TrimSuffix(f, ".mafia")
		b.Run(name, func(b *testing.B) {
			var lines, own int
			var rows []string
			for i := 0; i < b.N; i++ {
				p, err := mafia.Parse(string(src))
				if err != nil {
					b.Fatal(err)
				}
				res, err := mafia.Compile(p, mafia.Options{})
				if err != nil {
					b.Fatal(err)
				}
				lines, own, rows = 0, 0, rows[:0]
				for _, r := range res.Requests {
					prog, err := p4net.Build(r.Req, r.Copies, p4net.Options{Name: "s1", Role: r.Role, ID: 1, CPUPort: 255, Profile: prof})
					if err != nil {
						b.Fatalf("%s: %v", name, err)
					}
					lines += prog.Printed.Lines
					own += prog.Printed.Lines - base.Printed.Lines
					rep := prog.Report
					role := r.Role
					if role == "" {
						role = "every switch"
					}
					rows = append(rows, fmtRow(role, prog.Printed.Lines, prog.Printed.Lines-base.Printed.Lines, rep))
				}
			}
			b.ReportMetric(float64(lines), "lines")
			b.ReportMetric(float64(own), "own_lines")
			if _, done := benchLogged.LoadOrStore(name, true); !done {
				for _, r := range rows {
					b.Logf("resources %s %s", name, r)
				}
			}
		})
	}
}

func fmtRow(role string, lines, own int, r p4gen.Report) string {
	return role + ": " + strings.Join([]string{
		strconv.Itoa(lines) + " lines", strconv.Itoa(own) + " beyond forwarding", strconv.Itoa(r.Depth) + " ingress stages", strconv.Itoa(r.EgressDepth) + " egress stages",
		strconv.Itoa(r.Width) + " tables in the widest stage", strconv.Itoa(r.Stateful) + " stateful ops"}, ", ")
}
