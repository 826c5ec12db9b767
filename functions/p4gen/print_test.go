package p4gen

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/lang/p4"
)

// TestPrintRoundTrip: every program the printer makes parses, and prints
// again to the same bytes, and checks; so does every golden file.
func TestPrintRoundTrip(t *testing.T) {
	texts := map[string][]byte{}
	for name, prog := range testPrograms(t) {
		pr, err := Print(prog)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if pr.Lines < 100 || pr.Lines > bytes.Count(pr.Text, []byte("\n")) {
			t.Errorf("%s: %d lines of P4 in %d lines", name, pr.Lines, bytes.Count(pr.Text, []byte("\n")))
		}
		texts[name] = pr.Text
	}
	for name, text := range golden(t) {
		texts[name] = text
	}
	for name, text := range texts {
		ast, err := p4.Parse(name, string(text))
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, text)
		}
		if again := p4.Format(ast); !bytes.Equal(again, text) {
			t.Errorf("%s: printing the parsed program differs:\n%s", name, diffLine(text, again))
		}
		if _, err := p4.Check(name, string(text), ast); err != nil {
			t.Errorf("%s: the checker refuses it:\n%s", name, err.(p4.ErrorList).Format())
		}
	}
}

// diffLine shows the first line where a and b differ.
func diffLine(a, b []byte) string {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return fmt.Sprintf("line %d:\n  %s\n  %s", i+1, la[i], lb[i])
		}
	}
	return "lengths differ"
}
