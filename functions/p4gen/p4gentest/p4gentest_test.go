package p4gentest

import (
	"math/rand/v2"
	"testing"

	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// Random programs validate (Random panics otherwise) and run on the
// reference without a runtime error.
func TestRandomProgramsRun(t *testing.T) {
	for seed := range 300 {
		c := Random(rand.New(rand.NewPCG(uint64(seed), 1)))
		s := p4gen.NewSwitch(c.Prog)
		for tb, es := range c.Entries {
			s.Entries[tb] = es
		}
		for _, f := range Frames(uint64(seed), 50, 10) {
			if _, err := s.Process(p4gen.Arrival{Data: f, Port: 1}); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
		}
	}
	if err := CMSHLL(t).Validate(); err != nil {
		t.Fatal(err)
	}
}
