package builtin_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
)

// TestReadmeStateMatchesDeclarations keeps each class README's State
// section and the class's State declaration the same: every row of the
// section's table is a declared field, with its type, unit, merge, targets
// and summary, and every declared field has its row. A README whose title
// names several classes has a class column; one with a field that only
// some targets have, a targets column.
func TestReadmeStateMatchesDeclarations(t *testing.T) {
	readmes := classReadmes()
	owner := map[string]string{} // class → README
	for _, path := range readmes {
		md, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if isLibrary(md) {
			continue
		}
		title, _, _ := strings.Cut(string(md), "\n")
		var classes []string
		for _, name := range strings.Split(strings.TrimPrefix(title, "# "), ",") {
			name = strings.TrimSpace(name)
			if _, ok := functions.Default.Lookup(name); !ok {
				t.Errorf("%s: title names %q, which is no class", path, name)
				continue
			}
			if owner[name] != "" {
				t.Errorf("class %s is documented by %s and %s", name, owner[name], path)
			}
			owner[name] = path
			classes = append(classes, name)
		}
		documented := stateRows(t, path, string(md), classes)
		var declared []string
		for _, name := range classes {
			c, _ := functions.Default.Lookup(name)
			if err := c.State.Validate(); err != nil {
				t.Errorf("class %s: %v", name, err)
			}
			if c.State == nil {
				continue
			}
			for i := range c.State.Fields {
				f := &c.State.Fields[i]
				var targets []string
				for _, tg := range f.Targets {
					targets = append(targets, string(tg))
				}
				declared = append(declared, strings.Join([]string{name, f.Name, f.TypeName(), f.Unit,
					f.Merge.String(), strings.Join(targets, ", "), f.Summary}, " | "))
			}
		}
		for _, row := range declared {
			if !slices.Contains(documented, row) {
				t.Errorf("%s: State has no row for the declared field: %s", path, row)
			}
		}
		for _, row := range documented {
			if !slices.Contains(declared, row) {
				t.Errorf("%s: State documents a field no class declares so: %s", path, row)
			}
		}
	}
	for _, c := range functions.Default.All() {
		if owner[c.Name] == "" {
			t.Errorf("class %s has no README whose title names it", c.Name)
		}
	}
}

// stateRows returns the rows of the table in the State section of md, as
// "class | field | type | unit | merge | targets | meaning".
func stateRows(t *testing.T, path, md string, classes []string) []string {
	t.Helper()
	_, sec, _ := strings.Cut(md, "\n## State\n")
	sec, _, _ = strings.Cut(sec, "\n## ")
	var header []string
	var rows []string
	for _, line := range strings.Split(sec, "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		switch {
		case header == nil:
			header = cells
			for _, need := range []string{"field", "type", "unit", "merge", "meaning"} {
				if !slices.Contains(header, need) {
					t.Errorf("%s: the State table has no %q column", path, need)
				}
			}
			if len(classes) > 1 && !slices.Contains(header, "class") {
				t.Errorf("%s documents several classes: the State table needs a class column", path)
			}
			continue
		case strings.Trim(line, "|-: ") == "":
			continue // the separator
		}
		if len(cells) != len(header) {
			t.Errorf("%s: State row %q has %d cells, the header %d", path, line, len(cells), len(header))
			continue
		}
		col := func(name string) string {
			if i := slices.Index(header, name); i >= 0 {
				if v := strings.Trim(cells[i], "`"); v != "-" {
					return v
				}
			}
			return ""
		}
		class := col("class")
		if class == "" && len(classes) == 1 {
			class = classes[0]
		}
		rows = append(rows, strings.Join([]string{class, col("field"), col("type"), col("unit"),
			col("merge"), col("targets"), col("meaning")}, " | "))
	}
	return rows
}

// TestFunctionsKeepTheirDeclaredState instantiates every class that
// declares state (sources aside: they open files and interfaces) and checks
// its MBuf against the declaration for each target: the eBPF flowspaces
// keep their state in the MBuf the Go function gives too.
func TestFunctionsKeepTheirDeclaredState(t *testing.T) {
	// Arguments for the classes that have required parameters.
	word := func(k, v string) functions.Arg {
		return functions.Arg{Key: k, Value: functions.Raw{Kind: functions.RawWord, Text: v}}
	}
	args := map[string][]functions.Arg{
		"dta":           {word("op", "keywrite"), word("key", "ipv4.src"), word("data", "pkt.len")},
		"dta-collector": {{Key: "keywrite", Value: functions.Raw{Kind: functions.RawString, Text: "slots=1009"}}},
		"register":      {word("set", "old+1")},
		"store":         {word("value", "pkt.len")},
	}
	n := 0
	for _, c := range functions.Default.All() {
		if c.State == nil || c.IsSource() {
			continue
		}
		p, err := c.Bind(args[c.Name])
		if err != nil {
			t.Errorf("class %s: %v (give the test arguments for it)", c.Name, err)
			continue
		}
		// The function as each target's flowspace instantiates it: its Go
		// half keeps the state laid out for that target.
		for _, tg := range c.Targets {
			ctx := &functions.Context{ID: c.Name + "#1", Params: p, LinkType: functions.LinkEthernet, Snaplen: 1600, Target: tg}
			if tg == functions.TargetUser {
				ctx.Target = ""
			}
			fn, err := c.New(ctx)
			if err != nil {
				t.Errorf("class %s in %s: %v", c.Name, tg, err)
				continue
			}
			if err := c.CheckState(tg, p, fn); err != nil {
				t.Errorf("%s: %v", tg, err)
			}
			if cl, ok := fn.(functions.Closer); ok {
				cl.Close()
			}
		}
		n++
	}
	if n < 2 {
		t.Errorf("checked %d classes; pktcount and bytecount declare state", n)
	}
}
