package mafia

import (
	"os"
	"path/filepath"
	"testing"
)

func TestScratch(t *testing.T) {
	files, _ := filepath.Glob("../../examples/mafia/*.mafia")
	for _, f := range files {
		b, _ := os.ReadFile(f)
		p, err := Parse(string(b))
		if err != nil {
			t.Errorf("%s: %v\n%s", f, err, err.(interface{ Caret() string }).Caret())
			continue
		}
		r, err := Compile(p, Options{})
		if err != nil {
			t.Errorf("%s: %v\n%s", f, err, err.(interface{ Caret() string }).Caret())
			continue
		}
		for _, q := range r.Requests {
			t.Log(filepath.Base(f), q.Role, q.Expr())
		}
	}
}
