package export

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
)

// TestReadmeExamples checks the expressions in README.md's Examples: they
// use only the classes the README may mention, their brackets balance, and
// every function of a class linked into this test binary binds.
func TestReadmeExamples(t *testing.T) {
	md, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, ex, ok := strings.Cut(string(md), "## Examples")
	if !ok {
		t.Fatal("README.md has no Examples section")
	}
	allowed := map[string]bool{"gen": true, "pcap": true, "dev": true, "bpf": true, "pktcount": true, "bytecount": true, "export": true}
	blocks := regexp.MustCompile("(?s)```\\n(.*?)```").FindAllStringSubmatch(ex, -1)
	if len(blocks) == 0 {
		t.Fatal("no fenced examples")
	}
	for _, b := range blocks {
		expr := strings.TrimSpace(b[1])
		if strings.Count(expr, "(") != strings.Count(expr, ")") || strings.Count(expr, "[") != strings.Count(expr, "]") {
			t.Errorf("unbalanced brackets: %s", expr)
		}
		for _, term := range terms(expr) {
			parts := splitArgs(term)
			class := strings.ToLower(parts[0])
			if !allowed[class] {
				t.Errorf("example uses class %q: %s", class, expr)
				continue
			}
			c, linked := functions.Default.Lookup(class)
			if !linked {
				continue
			}
			var args []functions.Arg
			for _, a := range parts[1:] {
				args = append(args, arg(t, a))
			}
			if _, err := c.Bind(args); err != nil {
				t.Errorf("%s: %v", term, err)
			}
		}
	}
}

// terms returns the insides of the "(...)" function terms of expr.
func terms(expr string) []string {
	var out []string
	start, quoted := -1, false
	for i, r := range expr {
		switch {
		case r == '"':
			quoted = !quoted
		case quoted:
		case r == '(':
			start = i + 1
		case r == ')' && start >= 0:
			out = append(out, expr[start:i])
			start = -1
		}
	}
	return out
}

func splitArgs(s string) []string {
	var out []string
	quoted, start := false, 0
	for i, r := range s {
		if r == '"' {
			quoted = !quoted
		} else if r == ',' && !quoted {
			out = append(out, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

var number = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)([A-Za-z]*)$`)

func arg(t *testing.T, a string) functions.Arg {
	key, val := "", a
	if i := strings.IndexByte(a, '='); i >= 0 && !strings.HasPrefix(a, "\"") {
		key, val = a[:i], a[i+1:]
	}
	if strings.HasPrefix(val, "\"") {
		s, err := strconv.Unquote(val)
		if err != nil {
			t.Errorf("bad string %s", val)
		}
		return functions.Arg{Key: key, Value: functions.Raw{Kind: functions.RawString, Text: s}}
	}
	if m := number.FindStringSubmatch(val); m != nil {
		return functions.Arg{Key: key, Value: functions.Raw{Kind: functions.RawNumber, Text: m[1], Unit: m[2]}}
	}
	return functions.Arg{Key: key, Value: functions.Raw{Kind: functions.RawWord, Text: val}}
}
