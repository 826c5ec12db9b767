package main

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The example reads the counter while the graph runs: the readings never
// decrease and never pass the final count, and the two applications share
// the source and the filter.
func TestEmbed(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	var readings []uint64
	final := ""
	for _, line := range strings.Split(out.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, "running: pktcount#1 has counted "); ok {
			n, err := strconv.ParseUint(strings.TrimSuffix(rest, " packets"), 10, 64)
			if err != nil {
				t.Fatalf("reading %q: %v", line, err)
			}
			readings = append(readings, n)
		}
		if strings.HasPrefix(line, "web    pktcount#1") {
			final = line
		}
	}
	if len(readings) < 2 || !strings.Contains(final, "state=map[packets:253444]") {
		t.Fatalf("%d readings, final %q:\n%s", len(readings), final, out.String())
	}
	for i, n := range readings {
		if n > 253444 || (i > 0 && n < readings[i-1]) {
			t.Errorf("reading %d is %d after %d", i, n, readings[max(i-1, 0)])
		}
	}
	if !strings.Contains(out.String(), "bytes  bpf#1 ") || strings.Contains(out.String(), "bpf#2") {
		t.Errorf("the filter is not shared:\n%s", out.String())
	}
}
