package builtin_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/functions"
	_ "github.com/ffpf-go/ffpf/functions/builtin"
)

var fence = regexp.MustCompile("(?s)```[a-z]*\\n(.*?)```")

// classReadmes lists the READMEs of the class packages: functions/X and,
// for a family of classes, functions/X/Y.
func classReadmes() []string {
	one, _ := filepath.Glob("../*/README.md")
	two, _ := filepath.Glob("../*/*/README.md")
	return append(one, two...)
}

// isLibrary reports whether a README documents a library the classes share
// (its title ends in "(library)"), not a class.
func isLibrary(md []byte) bool {
	title, _, _ := strings.Cut(string(md), "\n")
	return strings.HasSuffix(strings.TrimSpace(title), "(library)")
}

// TestReadmeExamples keeps every class README honest: each line of the
// fenced blocks under "## Examples" must pass populate (syntax, classes,
// parameters, filters compiled by libpcap), and the examples that need no
// file or interface are run on 2000 packets.
func TestReadmeExamples(t *testing.T) {
	readmes := classReadmes()
	if len(readmes) < 6 {
		t.Fatalf("found %d class READMEs", len(readmes))
	}
	documented := map[string]bool{}
	for _, path := range readmes {
		md, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if isLibrary(md) {
			continue
		}
		for _, sec := range []string{"## Name", "## Syntax", "## Parameters", "## State", "## Targets", "## Examples"} {
			if !strings.Contains(string(md), sec) {
				t.Errorf("%s has no %q section", path, sec)
			}
		}
		_, ex, _ := strings.Cut(string(md), "## Examples")
		if i := strings.Index(ex, "\n## "); i >= 0 {
			ex = ex[:i]
		}
		n := 0
		for _, block := range fence.FindAllStringSubmatch(ex, -1) {
			for _, expr := range strings.Split(block[1], "\n") {
				if expr = strings.TrimSpace(expr); expr == "" || strings.HasPrefix(expr, "#") {
					continue
				}
				n++
				checkExample(t, path, expr, documented)
			}
		}
		if n == 0 {
			t.Errorf("%s: no examples", path)
		}
	}
	for _, c := range functions.Default.All() {
		if !documented[c.Name] {
			t.Errorf("class %s appears in no README example", c.Name)
		}
	}
}

func checkExample(t *testing.T, path, expr string, documented map[string]bool) {
	t.Helper()
	rt := flowgraph.New(flowgraph.Config{CaptureLimit: 2000})
	defer rt.Close()
	req, err := rt.Populate(expr, flowgraph.RequestOptions{Unfed: true})
	if err != nil {
		t.Errorf("%s: %s: %v", path, expr, err)
		return
	}
	selfContained := true
	for _, f := range req.Functions() {
		documented[f.Class] = true
		switch f.Class {
		case "pcap", "dev", "export":
			selfContained = false
		}
	}
	if !selfContained || !strings.Contains(expr, "(gen") {
		return
	}
	if err := rt.Instantiate(); err != nil {
		t.Errorf("%s: %s: instantiate: %v", path, expr, err)
		return
	}
	if err := rt.Activate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := rt.Wait(); err != nil {
		t.Errorf("%s: %s: run: %v", path, expr, err)
	}
	if rt.Packets() == 0 {
		t.Errorf("%s: %s: no packets", path, expr)
	}
}
