package mafia_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/lang"
	"github.com/ffpf-go/ffpf/lang/mafia"
)

// runUser runs a .mafia file in userspace on the trace in dir, as `ffpf
// run --mafia FILE -r trace.pcap` does, its output files in the working
// directory, and returns the functions' final reports.
func runUser(t *testing.T, dir, file string) []flowgraph.FunctionState {
	t.Helper()
	res := compileFile(t, file)
	if len(res.Requests) != 1 {
		t.Fatalf("%s: %d requests", file, len(res.Requests))
	}
	return runExpr(t, file, lang.Format(res.Requests[0].Req), flowgraph.RequestOptions{
		DefaultSource: "(pcap,file=" + strconv.Quote(filepath.Join(dir, "trace.pcap")) + ")"})
}

// compileFile parses and compiles a .mafia file.
func compileFile(t *testing.T, file string) *mafia.Result {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := mafia.Parse(string(src))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	res, err := mafia.Compile(prog, mafia.Options{})
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return res
}

// The programs that a host can run give in userspace what they give on a
// switch, exactly: the same packets into and out of each function, the
// same state (the compiler asks for the switch's positions, hash=switch,
// so a sketch or a HashMap keeps the switch's cells), the same alarms
// byte for byte. (Stochastic sampling draws its own random numbers on
// each: TestUserspaceSamplesWithinBound.) Timestamps are each clock's:
// flow volume's durations are compared by the packets and keys they
// saw, not by value.
func TestUserspaceEqualsSwitch(t *testing.T) {
	for _, name := range []string{"heavy-hitter.mafia", "approx-flow-volume.mafia", "cardinality-hll.mafia", "cardinality-pcsa.mafia",
		"flow-volume.mafia", "deterministic-sampling.mafia", "counter-thresholds.mafia"} {
		t.Run(name, func(t *testing.T) {
			dir, _ := swSetup(t)
			file, err := filepath.Abs(name)
			if err != nil {
				t.Fatal(err)
			}
			sw := runNet(t, dir, oneSwitch, file)
			udir := t.TempDir()
			t.Chdir(udir)
			user := runUser(t, dir, file)
			compared := 0
			for _, u := range user {
				if u.Label == "" || u.Class == "export" { // collect: a digest on the switch
					continue
				}
				s := fn(t, sw, "s1", u.Label)
				if u.In != s.In || u.Out != s.Out {
					t.Errorf("%s: in %d, out %d in userspace; %d, %d on the switch", u.Label, u.In, u.Out, s.In, s.Out)
				}
				for k, v := range s.Summary {
					if fmt.Sprint(u.State[k]) != fmt.Sprint(v) {
						t.Errorf("%s: %s is %v in userspace, %v on the switch", u.Label, k, u.State[k], v)
					}
				}
				compared++
			}
			if compared == 0 {
				t.Fatal("no state compared")
			}
			if name != "heavy-hitter.mafia" {
				return
			}
			got, want := readPcap(t, filepath.Join(udir, "alarms.pcap")), readPcap(t, filepath.Join(dir, "alarms.pcap"))
			if len(got) != len(want) || len(want) == 0 {
				t.Fatalf("%d alarms in userspace, %d on the switch", len(got), len(want))
			}
			for i := range got {
				if string(got[i].data) != string(want[i].data) {
					t.Fatalf("alarm %d differs", i)
				}
			}
			t.Logf("%d alarms alike", len(got))
		})
	}
}

// Stochastic sampling in userspace keeps its 5% of the packets within the
// binomial bound, as on the switch (TestSwitchStochasticSampling).
func TestUserspaceSamplesWithinBound(t *testing.T) {
	dir, pkts := swSetup(t)
	file, err := filepath.Abs("stochastic-sampling.mafia")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	for _, f := range runUser(t, dir, file) {
		if f.Class != "sample" {
			continue
		}
		n, p := float64(len(pkts)), 0.05
		if f.In != uint64(len(pkts)) || math.Abs(float64(f.Out)-n*p) > 5*math.Sqrt(n*p*(1-p)) {
			t.Fatalf("%s: %d of %d packets sampled at 5%%", f.ID, f.Out, f.In)
		}
		return
	}
	t.Fatal("no sample function")
}
