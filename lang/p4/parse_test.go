package p4

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var parseErrorTests = []struct {
	src       string
	want      string
	line, col int
}{
	{"header h {\n  bit<8> a\n}", `expected ";", found "}"`, 3, 1},
	{"header h { bit<0> a; }", "bit<0>: a width of 1 to 65536 bits", 1, 16},
	{"header h { bit<8 a; }", `expected ">", found "a"`, 1, 18},
	{"struct s { bit<8> a; } typedef bit<8> t;", `"typedef" declarations are not in the subset`, 1, 24},
	{"#define X 1", `unsupported preprocessor directive "#define X 1"`, 1, 1},
	{"control c() { apply { x = 8w256; } }", "8w256 does not fit bit<8>", 1, 27},
	{"control c() { apply { x = 99999999999999999999; } }", "does not fit 64 bits", 1, 27},
	{"control c() { apply { x = 8s1; } }", "signed literal 8s1", 1, 27},
	{"control c() { apply { x = \"abc; } }", "string not terminated", 1, 27},
	{"/* open", "comment not terminated", 1, 1},
	{"control c() { apply { x = y $ z; } }", "unexpected character '$'", 1, 29},
	{"control c() { apply { x = a[3]; } }", "header stacks and arrays are not in the subset", 1, 30},
	{"control c() { apply { switch (x) { } } }", `"switch" statements are not in the subset`, 1, 23},
	{"control c() { table t { counters = x; } apply { } }", `property "counters" is not in the subset`, 1, 25},
	{"control c() { table t { size = 1; size = 2; } apply { } }", "property size given twice", 1, 35},
	{"control c() { action a() { }", "control c has no apply block", 1, 29},
	{"control c() { apply { if (x) { y = 1; }", `block not closed: expected "}"`, 1, 40},
	{"parser p() { state s { transition select(x) { 1: a; 2 b; } } }", `expected ":", found "b"`, 1, 55},
	{"parser p() { apply { } }", "expected a parser state", 1, 14},
	{"header h {} #include <v1model.p4>", "#include must come before the declarations", 1, 13},
	{"control c() { apply { x = " + strings.Repeat("(", 300) + "1" + strings.Repeat(")", 300) + "; } }", "nesting deeper than 200", 1, 0},
}

func TestParseErrors(t *testing.T) {
	for _, tt := range parseErrorTests {
		_, err := Parse("e.p4", tt.src)
		e, ok := err.(*Error)
		if !ok {
			t.Errorf("%q: error %v, want *Error %q", tt.src, err, tt.want)
			continue
		}
		if !strings.Contains(e.Msg, tt.want) || e.Pos.Line != tt.line || tt.col > 0 && e.Pos.Col != tt.col {
			t.Errorf("%q: %v, want %d:%d: %s", tt.src, e, tt.line, tt.col, tt.want)
		}
		if !strings.HasPrefix(e.Error(), "e.p4:") || e.Caret() == "" {
			t.Errorf("%q: %q lacks the file or a caret", tt.src, e.Error())
		}
	}
}

// TestTestdata: the sample programs (printed by p4gen) are canonical and
// check.
func TestTestdata(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.p4")
	if len(files) == 0 {
		t.Fatal("no testdata/*.p4")
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		prog, err := Parse(f, string(src))
		if err != nil {
			t.Fatal(err)
		}
		if out := Format(prog); string(out) != string(src) {
			t.Errorf("%s is not in canonical form", f)
		}
		if _, err := Check(f, string(src), prog); err != nil {
			t.Errorf("%s:\n%s", f, err.(ErrorList).Format())
		}
	}
}

func TestPrecedenceTable(t *testing.T) {
	if precUnary != len(binLevels)+1 || precPostfix != precUnary+1 {
		t.Fatalf("precUnary %d, precPostfix %d for %d binary levels", precUnary, precPostfix, len(binLevels))
	}
}
