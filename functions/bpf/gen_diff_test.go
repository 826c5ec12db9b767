package bpf

import (
	"testing"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/bpf/internal/pcaporacle"
	"github.com/ffpf-go/ffpf/functions/gen"
)

// TestDifferentialGenerated compares the engine with libpcap on 200,000
// packets of the synthetic trace generator (5% malformed), for every
// expression of the differential test (20,000 with -short or -race).
func TestDifferentialGenerated(t *testing.T) {
	n := int64(200000)
	if testing.Short() || raceEnabled {
		n = 20000
	}
	type prog struct {
		expr   string
		insns  []Instruction
		p      *Program
		oracle *pcaporacle.Program
		passed int
	}
	progs := make([]*prog, 0, len(diffExprs))
	for _, expr := range diffExprs {
		insns, err := Compile(expr, functions.LinkEthernet, DefaultSnaplen)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Load(insns)
		if err != nil {
			t.Fatal(err)
		}
		progs = append(progs, &prog{expr: expr, insns: insns, p: p, oracle: oracleProgram(t, insns)})
	}
	g := gen.New(gen.Config{Seed: 1, Packets: n, Malformed: 0.05, VLAN: 0.05, IPv6: 0.2})
	buf := make([]byte, gen.MaxFrameLen)
	packets, compared, looped, truncated := 0, 0, 0, 0
	for {
		capLen, wireLen, _, ok := g.Next(buf)
		if !ok {
			break
		}
		packets++
		if wireLen > capLen {
			truncated++
		}
		pkt := buf[:capLen]
		for _, pr := range progs {
			ours := pr.p.Run(pkt, uint32(wireLen))
			if ours != 0 {
				pr.passed++
			}
			if pr.p.HasBackwardJumps() {
				// libpcap 1.10 would spin forever on a looping packet.
				if _, loop := refRun(pr.insns, pkt, uint32(wireLen)); loop {
					looped++
					if ours != 0 {
						t.Fatalf("%q: budget exhausted but returned %d", pr.expr, ours)
					}
					continue
				}
			}
			compared++
			if lib := pr.oracle.Filter(pkt, uint32(wireLen)); lib != ours {
				t.Fatalf("%q on generated packet %d (cap %d wire %d): ours %d, libpcap %d\n% x",
					pr.expr, packets, capLen, wireLen, ours, lib, pkt)
			}
		}
	}
	if int64(packets) != n {
		t.Fatalf("generator gave %d packets, want %d", packets, n)
	}
	never := 0
	for _, pr := range progs {
		if pr.passed == 0 {
			never++
		}
	}
	t.Logf("generated trace: %d expressions × %d packets (%d truncated): %d verdicts compared with libpcap, %d budget-exhausted runs; %d expressions matched no generated packet",
		len(progs), packets, truncated, compared, looped, never)
}
