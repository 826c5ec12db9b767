package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/google/gopacket/pcapgo"
)

type rec struct {
	ts   int64
	data []byte
}

func readRecs(t *testing.T, path string) []rec {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out []rec
	for {
		data, ci, err := r.ReadPacketData()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec{ci.Timestamp.UnixNano(), data})
	}
}

// TestJoinOfFilesIsTimeOrdered: two capture files joined into one export
// come out in time order, as mergecap writes them (a stable merge: a tie
// goes to the earlier file), on every run.
func TestJoinOfFilesIsTimeOrdered(t *testing.T) {
	a, b := traces(t)
	out := filepath.Join(t.TempDir(), "ab.pcap")
	var first []byte
	for run := range 3 {
		r := ffpf(t, "run", "--json", "[(pcap,file="+a+")|(pcap,file="+b+")] > (export,file="+out+")")
		if r.code != 0 {
			t.Fatalf("run: %d %s", r.code, r.stderr)
		}
		got := readRecs(t, out)
		want := append(readRecs(t, a), readRecs(t, b)...)
		sort.SliceStable(want, func(i, j int) bool { return want[i].ts < want[j].ts })
		if len(got) != len(want) {
			t.Fatalf("%d packets written, want %d", len(got), len(want))
		}
		for i := range want {
			if got[i].ts != want[i].ts || !bytes.Equal(got[i].data, want[i].data) {
				t.Fatalf("packet %d: got ts %d, want ts %d (a stable merge by time)", i, got[i].ts, want[i].ts)
			}
		}
		data, _ := os.ReadFile(out)
		if run == 0 {
			first = data
		} else if !bytes.Equal(data, first) {
			t.Fatalf("run %d wrote another file than run 0", run)
		}
	}
}
