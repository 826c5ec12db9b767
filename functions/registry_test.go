package functions

import (
	"errors"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/functions/ebpfgen"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

type fakeEBPF struct{ ebpfgen.Function }

type fakeP4 struct{}

func (fakeP4) Lower(*p4gen.Builder) error { return nil }

// One Code hook serves every target kind: Codes gives each target the
// code of the hook made for it, passes a hook's refusal through as the
// reason, and has no code for a target no hook serves.
func TestCodesJoinsTargets(t *testing.T) {
	refuse := errors.New("the switch cannot loop")
	c := &Class{Name: "x", Code: Codes(
		EBPFCode(func(*Context) (ebpfgen.Function, error) { return fakeEBPF{}, nil }),
		P4Code(func(ctx *Context) (p4gen.Function, error) {
			if ctx.ID == "refused" {
				return nil, refuse
			}
			return fakeP4{}, nil
		}),
	)}
	for _, tg := range []Target{TargetKernel, TargetXDP} {
		if fn, err := c.EBPF(tg, &Context{}); err != nil || fn == nil {
			t.Errorf("%s: %v, %v", tg, fn, err)
		}
	}
	if fn, err := c.P4(&Context{}); err != nil || fn == nil {
		t.Errorf("p4: %v, %v", fn, err)
	}
	if _, err := c.P4(&Context{ID: "refused"}); !errors.Is(err, refuse) {
		t.Errorf("a refusal: %v, want %v", err, refuse)
	}
	if _, err := c.Code(TargetUser, &Context{}); !errors.Is(err, ErrNoCode) {
		t.Errorf("user: %v, want ErrNoCode", err)
	}
	ebpfOnly := &Class{Name: "y", Code: EBPFCode(func(*Context) (ebpfgen.Function, error) { return fakeEBPF{}, nil })}
	if _, err := ebpfOnly.P4(&Context{}); err == nil || !strings.Contains(err.Error(), "no P4 code for p4") {
		t.Errorf("an eBPF-only class's P4 code: %v", err)
	}
	if _, err := (&Class{Name: "z"}).P4(&Context{}); err == nil || !strings.Contains(err.Error(), "class z has no P4 code") {
		t.Errorf("a class without Code: %v", err)
	}
}
