package p4

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: whatever the input, Parse returns a program or a positioned
// error; a program prints to a text that parses and prints to the same
// bytes; Check neither panics nor judges the printed text otherwise than
// the input.
func FuzzParse(f *testing.F) {
	f.Add(base)
	f.Add(messy)
	files, _ := filepath.Glob("testdata/*.p4")
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(string(b))
		}
	}
	for _, tt := range parseErrorTests {
		f.Add(tt.src)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 1<<16 {
			return
		}
		prog, err := Parse("f.p4", src)
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
		out := Format(prog)
		prog2, err := Parse("g.p4", string(out))
		if err != nil {
			t.Fatalf("Parse(Format(Parse(%q))) = Parse(%q): %v", src, out, err)
		}
		if out2 := Format(prog2); string(out2) != string(out) {
			t.Fatalf("Format not idempotent:\n%s\n----\n%s", out, out2)
		}
		_, err1 := Check("f.p4", src, prog)
		_, err2 := Check("g.p4", string(out), prog2)
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("the input checks (%v) and its printed form does not (%v), or the other way:\n%s", err1, err2, out)
		}
	})
}
