package pisa

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ffpf-go/ffpf/functions/p4gen"
	"github.com/ffpf-go/ffpf/functions/p4gen/p4gentest"
)

// TestDifferential runs random programs on random frames through the
// model and through p4gen.Switch, the reference semantics, and requires
// the same frames out (port, bytes, instance), digests, parser errors,
// runtime errors, registers and counters after every packet. Each
// program is loaded from its device config (JSON), as the switch gets it,
// three times: with ingress specialised per set of valid headers, with
// room for two such variants (the other packets run the program whole),
// and with none (special_test.go tests what random programs seldom
// make: splits, inlined actions, folded tables). Halfway, the tables' entries change (half of them
// removed), which the variants must see.
func TestDifferential(t *testing.T) {
	programs, packets := 80, 150
	if testing.Short() {
		programs = 60
	}
	// What the packets did, so that the test cannot pass on programs
	// that do nothing.
	seen := map[string]int{}
	for seed := range programs {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		c := p4gentest.Random(rng)
		enc, err := p4gen.EncodeJSON(c.Prog)
		if err != nil {
			t.Fatal(err)
		}
		prog, err := p4gen.DecodeJSON(enc)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		var models []*Model
		for _, room := range []int{maxVariants, 2, 0} {
			m, err := Load(prog, roomy)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			m.maxVars = room
			models = append(models, m)
		}
		ref := p4gen.NewSwitch(c.Prog)
		install := func(half bool) {
			for tb, es := range c.Entries {
				if half {
					es = es[:len(es)/2]
				}
				ref.Entries[tb] = es
				for _, m := range models {
					if err := m.SetEntries(prog.Table(tb.Name), remap(prog, es)); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		install(false)
		for id, port := range c.Sessions {
			ref.Sessions[id] = port
			for _, m := range models {
				m.SetSession(id, int(port))
			}
		}
		frames := p4gentest.Frames(uint64(seed), packets, 20)
		for i, f := range frames {
			if i == len(frames)/2 {
				install(true)
			}
			a := p4gen.Arrival{Data: f, Port: uint16(1 + i%3), Time: uint64(i * 10), QDepth: uint32(i % 5)}
			if i%17 == 0 {
				a.Port = p4gentest.CPUPort
			}
			want, werr := ref.Process(a)
			for k, m := range models {
				got, gerr := m.Process(a)
				if (werr == nil) != (gerr == nil) {
					t.Fatalf("seed %d packet %d model %d: reference error %v, model error %v", seed, i, k, werr, gerr)
				}
				if k > 0 {
					if werr == nil {
						if d := diffResult(want, got); d != "" {
							t.Fatalf("seed %d packet %d (%x) model %d: %s", seed, i, f, k, d)
						}
					}
					for j, r := range c.Prog.Registers {
						if w, g := ref.Regs[r], m.Register(prog.Registers[j]); fmt.Sprint(w) != fmt.Sprint(g) {
							t.Fatalf("seed %d packet %d model %d: register %s %v, model %v", seed, i, k, r.Name, w, g)
						}
					}
					continue
				}
				if werr != nil {
					seen["runtime errors"]++
				} else {
					seen["packets out"] += len(want.Out)
					seen["digests"] += len(want.Digests)
					if want.ParserError != "" {
						seen["parser errors"]++
					}
					for _, o := range want.Out {
						if o.Instance == p4gen.InstanceCloneI2E {
							seen["clones"]++
						}
						if !bytes.Equal(o.Data, f) {
							seen["packets changed"]++
						}
					}
					if d := diffResult(want, got); d != "" {
						t.Fatalf("seed %d packet %d (%x): %s", seed, i, f, d)
					}
				}
				for j, r := range c.Prog.Registers {
					if slices.ContainsFunc(ref.Regs[r], func(v uint64) bool { return v != 0 }) {
						seen["register updates"]++
					}
					if w, g := ref.Regs[r], m.Register(prog.Registers[j]); fmt.Sprint(w) != fmt.Sprint(g) {
						t.Fatalf("seed %d packet %d: register %s %v, model %v", seed, i, r.Name, w, g)
					}
				}
				for j, ct := range c.Prog.Counters {
					if ref.Counts[ct][0].Packets > 0 {
						seen["counts"]++
					}
					if w, g := ref.Counts[ct], m.Counter(prog.Counters[j]); fmt.Sprint(w) != fmt.Sprint(g) {
						t.Fatalf("seed %d packet %d: counter %s %v, model %v", seed, i, ct.Name, w, g)
					}
				}
			}
		}
		for k, m := range models {
			seen[fmt.Sprintf("variants of model %d", k)] += m.vars.n
		}
	}
	t.Logf("%v", seen)
	for _, k := range []string{"packets out", "digests", "parser errors", "clones", "packets changed", "register updates", "counts"} {
		if seen[k] < programs {
			t.Errorf("only %d %s over %d programs: the generator does not exercise them", seen[k], k, programs)
		}
	}
}

// roomy is a switch on which every random program fits: the
// differential test is about semantics, not resources.
var roomy = p4gen.Profile{Stages: 64, SRAMBlocks: 4096, SRAMDepth: 1024, SRAMWidth: 128, TCAMBlocks: 4096,
	TCAMDepth: 512, TCAMWidth: 44, ALUs: 64, Tables: 1024, Registers: []int{1, 8, 16, 32, 64}}

// remap gives es the actions of prog (decoded from JSON: other pointers).
func remap(prog *p4gen.Program, es []p4gen.Entry) []p4gen.Entry {
	out := make([]p4gen.Entry, len(es))
	for i, e := range es {
		out[i] = e
		for _, a := range prog.Actions {
			if a.Name == e.Action.Name {
				out[i].Action = a
			}
		}
	}
	return out
}

func diffResult(want p4gen.Result, got *Result) string {
	if want.ParserError != got.ParserError {
		return fmt.Sprintf("parser error %q, model %q", want.ParserError, got.ParserError)
	}
	if len(want.Out) != len(got.Out) {
		return fmt.Sprintf("%d packets out, model %d: %+v vs %+v", len(want.Out), len(got.Out), want.Out, got.Out)
	}
	for i, w := range want.Out {
		g := got.Out[i]
		if w.Port != g.Port || w.Instance != g.Instance || !bytes.Equal(w.Data, g.Data) {
			return fmt.Sprintf("out %d: port %d instance %d %x, model port %d instance %d %x", i, w.Port, w.Instance, w.Data, g.Port, g.Instance, g.Data)
		}
	}
	if len(want.Digests) != len(got.Digests) {
		return fmt.Sprintf("%d digests, model %d", len(want.Digests), len(got.Digests))
	}
	for i, w := range want.Digests {
		g := got.Digests[i]
		if w.Type.Name != g.Type.Name || fmt.Sprint(w.Values) != fmt.Sprint(g.Values) {
			return fmt.Sprintf("digest %d: %s %v, model %s %v", i, w.Type.Name, w.Values, g.Type.Name, g.Values)
		}
	}
	return ""
}
