package builtin_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/lang"
)

// TestReadmeKindsMatchClasses keeps the table of concurrency kinds in the
// top README ("Several cores") and the classes' declarations the same:
// every class that is not a source is in the row of its kind, and only
// there.
func TestReadmeKindsMatchClasses(t *testing.T) {
	md, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(md), "\n## Several cores\n")
	if !ok {
		t.Fatal("README.md has no section Several cores")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	code := regexp.MustCompile("`([a-z0-9-]+)`")
	row := map[string]string{} // class → kind of its row
	for _, line := range strings.Split(sec, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 5 {
			continue
		}
		kind := strings.TrimSpace(cells[1])
		if kind != "stateless" && kind != "mergeable" && kind != "ordered" {
			continue
		}
		for _, m := range code.FindAllStringSubmatch(cells[3], -1) {
			if row[m[1]] != "" {
				t.Errorf("class %s is in the rows %s and %s", m[1], row[m[1]], kind)
			}
			row[m[1]] = kind
		}
	}
	for _, c := range functions.Default.All() {
		switch {
		case c.IsSource() && row[c.Name] != "":
			t.Errorf("source %s is in the row %s: a source has a worker of its own", c.Name, row[c.Name])
		case !c.IsSource() && row[c.Name] != c.Concurrency.String():
			t.Errorf("class %s is %v, the README's table says %q", c.Name, c.Concurrency, row[c.Name])
		}
		delete(row, c.Name)
	}
	for name := range row {
		t.Errorf("the README's table names %s, which is no class", name)
	}
}

// TestClassKinds pins each built-in class's kind and the settings that
// make it ordered, decided from its code: a test that changes with a
// decision, not with a refactoring.
func TestClassKinds(t *testing.T) {
	for _, tc := range []struct {
		class, args string
		want        functions.Concurrency
	}{
		{"bpf", `(bpf,"tcp")`, functions.Stateless},
		{"match", `(match,"tcp.dport == 80")`, functions.Stateless},
		{"timestamp", `(timestamp)`, functions.Stateless},
		{"pktcount", `(pktcount)`, functions.Mergeable},
		{"counter", `(counter,window=1s)`, functions.Mergeable},
		{"counter", `(counter,key=srcip)`, functions.Ordered},
		{"counter", `(counter,report=1)`, functions.Ordered},
		{"cms", `(cms,window=1s)`, functions.Mergeable},
		{"cms", `(cms,report=5)`, functions.Ordered},
		{"hll", `(hll)`, functions.Mergeable},
		{"pcsa", `(pcsa,report=1)`, functions.Ordered},
		{"bloom", `(bloom)`, functions.Ordered},
		{"bloom", `(bloom,pass=all)`, functions.Ordered},
		{"bloom", `(bloom,counting=true)`, functions.Ordered},
		{"bloom", `(bloom,counting=true,pass=all)`, functions.Mergeable},
		{"tag", `(tag,value=3)`, functions.Mergeable},
		{"tag", `(tag,value=3,field=ipv4.tos)`, functions.Ordered},
		{"sample", `(sample,every=10)`, functions.Ordered},
		{"export", `(export,file=x.pcap)`, functions.Ordered},
	} {
		c, _ := functions.Default.Lookup(tc.class)
		p, err := bind(c, tc.args)
		if err != nil {
			t.Fatalf("%s: %v", tc.args, err)
		}
		if k, why := c.ConcurrencyOf(p); k != tc.want || (k == functions.Ordered && c.Concurrency != functions.Ordered && why == "") {
			t.Errorf("%s: %v (%s), want %v", tc.args, k, why, tc.want)
		}
	}
}

// bind binds the arguments of one term "(class,args...)" as the flowgraph
// does.
func bind(c *functions.Class, term string) (functions.Params, error) {
	req, err := lang.Parse(term)
	if err != nil {
		return functions.Params{}, err
	}
	f := req.Chains[0].Terms[0].(*lang.Func)
	args := make([]functions.Arg, len(f.Args))
	for i, a := range f.Args {
		k := functions.RawWord
		switch a.Value.Kind {
		case lang.String:
			k = functions.RawString
		case lang.Number:
			k = functions.RawNumber
		}
		args[i] = functions.Arg{Key: a.Key, Value: functions.Raw{Kind: k, Text: a.Value.Text, Unit: a.Value.Unit}}
	}
	return c.Bind(args)
}
