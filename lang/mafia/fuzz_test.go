package mafia

import (
	"errors"
	"testing"

	"github.com/ffpf-go/ffpf/lang"
)

// FuzzParse: any text either parses, or is refused with a *lang.Error at
// a position inside it (its caret drawn); a program that parses prints to
// a text that parses to the same program, prints the same again, and
// compiles as the program does, to the same requests. The corpus kept in
// testdata/fuzz/FuzzParse runs with every go test (make fuzz grows it).
func FuzzParse(f *testing.F) {
	for _, s := range examples(f) {
		f.Add(s)
	}
	for _, s := range extraPrograms {
		f.Add(s)
	}
	for _, tt := range errorTests {
		f.Add(tt.src)
	}
	f.Fuzz(func(t *testing.T, src string) {
		p, err := Parse(src)
		if err != nil {
			positioned(t, src, err)
			return
		}
		out := Format(p)
		q, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse(Format(Parse(%q))) = Parse(%q): %v", src, out, err)
		}
		if !Equal(p, q) {
			t.Fatalf("printed and parsed again, the program differs:\n%q\n%q", src, out)
		}
		if again := Format(q); again != out {
			t.Fatalf("Format is not idempotent:\n%q\n%q", out, again)
		}
		r1, err1 := Compile(p, Options{})
		r2, err2 := Compile(q, Options{})
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("%q compiles (%v), its print %q does not (%v), or the reverse", src, err1, out, err2)
		}
		if err1 != nil {
			positioned(t, src, err1)
			return
		}
		if len(r1.Requests) != len(r2.Requests) {
			t.Fatalf("%q: %d requests, its print %d", src, len(r1.Requests), len(r2.Requests))
		}
		for i := range r1.Requests {
			if r1.Requests[i].Role != r2.Requests[i].Role || !lang.Equal(r1.Requests[i].Req, r2.Requests[i].Req) {
				t.Fatalf("%q: its print compiles to\n%s\nnot\n%s", src, r2.Requests[i].Expr(), r1.Requests[i].Expr())
			}
		}
	})
}

// positioned fails unless err is a *lang.Error inside src, or one of the
// compiler's errors that are not about a place in the program.
func positioned(t *testing.T, src string, err error) {
	t.Helper()
	var e *lang.Error
	if !errors.As(err, &e) {
		return // e.g. a request ffpf's own parser refuses: says so whole
	}
	_ = e.Caret()
	if e.Pos.Line < 1 || e.Pos.Col < 1 || e.Pos.Offset < 0 || e.Pos.Offset > len(src) {
		t.Fatalf("error %v at %+v, outside %q", err, e.Pos, src)
	}
}
