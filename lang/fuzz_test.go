package lang

import (
	"testing"
)

func FuzzParse(f *testing.F) {
	for _, s := range corpus() {
		f.Add(s)
	}
	for _, tt := range errorTests {
		if len(tt.in) < 256 {
			f.Add(tt.in)
		}
	}
	f.Fuzz(func(t *testing.T, src string) {
		r, err := Parse(src)
		if err != nil {
			e, ok := err.(*Error)
			if !ok {
				t.Fatalf("error %T is not *Error", err)
			}
			_ = e.Caret()
			if e.Pos.Line < 1 || e.Pos.Col < 1 || e.Pos.Offset > len(src) {
				t.Fatalf("bad position %+v for %q", e.Pos, src)
			}
			return
		}
		if err := Check(r, schema); err != nil {
			_ = err.(*Error).Caret()
		}
		out := Format(r)
		r2, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse(Format(Parse(%q))) = Parse(%q): %v", src, out, err)
		}
		if !Equal(r, r2) {
			t.Fatalf("not Equal after Format:\n%q\n%q", src, out)
		}
		if a, b := dumpFold(r, true), dumpFold(r2, true); a != b {
			t.Fatalf("kinds changed after Format:\n%s\n%s", a, b)
		}
		if out2 := Format(r2); out2 != out {
			t.Fatalf("Format not idempotent:\n%q\n%q", out, out2)
		}
	})
}
