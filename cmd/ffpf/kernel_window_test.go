package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket/pcapgo"
)

// TestWindowsInEBPF: counter (a total, and per key with report=K), hll,
// pcsa and bloom with window= and report= placed in XDP and at tc, on
// live traffic sent in bursts early in windows, report for every
// window that had packets the records, byte for byte, that the same
// requests report in userspace on the frames that were sent (with their
// send times); the windows in between are reported too, without keys, as
// the clock passes them; no packet is dropped for a half not ready. A
// report of the whole run (report= without window=) comes up when the
// capture stops, with the keys and values of the file's.
func TestWindowsInEBPF(t *testing.T) {
	nsA, nsB, ifA, ifB := netnsPair(t)
	dir := t.TempDir()
	_, kernel := reviewHier(t, dir)
	const window = time.Second
	exprs := []string{
		`(bpf,"tcp or udp") > (counter,value=bytes,window=1s,report=1) > (export,format=jsonl,file=%s)`,
		`(bpf,"tcp or udp") > (counter,key="srcip/24,dstport",size=4096,window=1s,report=5) > (export,format=jsonl,file=%s)`,
		`(bpf,"tcp or udp") > (hll,key="srcip,srcport",precision=10,window=1s,report=1) > (export,format=jsonl,file=%s)`,
		`(bpf,"tcp or udp") > (pcsa,key="dstip,dstport",bitmaps=64,window=1s,report=1) > (export,format=jsonl,file=%s)`,
		`(bpf,"tcp or udp") > (bloom,key="dstip",bits=4096,hashes=3,window=1s,report=1) > (export,format=jsonl,file=%s)`,
		// The whole run: one report when the capture stops.
		`(bpf,"tcp or udp") > (counter,key="dstport",size=4096,report=7) > (export,format=jsonl,file=%s)`,
	}
	const wholeRun = 5
	args := func(run string) (out []string, files []string) {
		for i, x := range exprs {
			f := filepath.Join(dir, fmt.Sprintf("%s%d.jsonl", run, i))
			out, files = append(out, "-e", fmt.Sprintf(x, f)), append(files, f)
		}
		return out, files
	}
	xArgs, xFiles := args("xdp")
	kArgs, kFiles := args("kernel")
	fArgs, fFiles := args("file")
	x := startCapture(t, nsB, append([]string{"run", "--json", "-i", ifB}, xArgs...)...)
	k := startCapture(t, nsB, append([]string{"run", "--json", "-i", ifB, "--hierarchy", kernel}, kArgs...)...)
	waitPrograms(t, 4) // each at its ingress and egress
	// Bursts early in windows (a window apart, with one window
	// left out), so that each lands in one window whatever the delays.
	var bursts []string
	for i, skip := range []int{1, 1, 2, 1} {
		now := time.Now()
		mid := now.Truncate(window).Add(time.Duration(skip)*window + window/20)
		time.Sleep(time.Until(mid))
		sent := filepath.Join(dir, fmt.Sprintf("sent%d.pcap", i))
		sendTracePaced(t, nsA, ifA, sent, 400, 20+i, 20000)
		if d := time.Since(mid); d > window/2 {
			t.Logf("burst %d took %v: it may cross a window's end", i, d)
		}
		bursts = append(bursts, sent)
	}
	settle(t)
	all := filepath.Join(dir, "sent.pcap")
	concatPcaps(t, all, bursts)
	file := parseRun(t, ffpf(t, append([]string{"run", "--json", "-r", all}, fArgs...)...))
	docs := map[string]runJSON{"xdp": x.stop(t), "kernel": k.stop(t)}
	waitPrograms(t, 0)
	for i := range exprs {
		want := readLines(t, fFiles[i])
		if i == wholeRun {
			// Its report's time is the run's start: the first packet's
			// for a file, the capture's start for a live run.
			for place, files := range map[string][]string{"xdp": xFiles, "kernel": kFiles} {
				got := readLines(t, files[i])
				if len(want) != 7 || !slices.Equal(withoutTS(t, got), withoutTS(t, want)) {
					t.Errorf("%s in %s reports at the end\n %s\nfrom the file:\n %s", exprs[i], place, strings.Join(got, "\n "), strings.Join(want, "\n "))
				}
			}
			continue
		}
		if len(want) < 4 {
			t.Fatalf("%s: the file run reports %d records for 4 bursts", exprs[i], len(want))
		}
		windows := map[string]bool{}
		for _, l := range want {
			windows[fieldOf(t, l, "ts")] = true
		}
		for place, files := range map[string][]string{"xdp": xFiles, "kernel": kFiles} {
			var got, empty []string
			for _, l := range readLines(t, files[i]) {
				if windows[fieldOf(t, l, "ts")] {
					got = append(got, l)
				} else {
					empty = append(empty, l)
				}
			}
			t.Logf("%s: %d records of windows with packets, %d of empty windows; %v", place, len(got), len(empty), got[:min(2, len(got))])
			if !slices.Equal(got, want) {
				t.Errorf("%s in %s reports\n %s\nfrom the file:\n %s", exprs[i], place, strings.Join(got, "\n "), strings.Join(want, "\n "))
			}
			for _, l := range empty {
				if strings.Contains(l, `"key"`) {
					t.Errorf("%s in %s reports a window the file has no packets in, not empty: %s", exprs[i], place, l)
				}
			}
			doc := docs[place]
			class := strings.Split(strings.Split(exprs[i], "> (")[1], ",")[0]
			fromFile := file.byClass(class)
			for n, j := range doc.byClass(class) {
				f := doc.Functions[j]
				if w := file.Functions[fromFile[n]]; f.In != w.In || f.Out != w.Out {
					t.Errorf("%s in %s: in %d out %d; from the file: in %d out %d", f.ID, place, f.In, f.Out, w.In, w.Out)
				}
				if !strings.HasPrefix(f.Flowspace, place) {
					t.Errorf("%s runs in %s, not %s", f.ID, f.Flowspace, place)
				}
				if f.Dropped != 0 || f.In == 0 {
					t.Errorf("%s in %s: in %d, dropped %d (packets whose half was not ready)", f.ID, place, f.In, f.Dropped)
				}
			}
		}
	}
}

// concatPcaps writes the packets of files, in order, into one capture.
func concatPcaps(t *testing.T, out string, files []string) {
	t.Helper()
	o, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	var w *pcapgo.Writer
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		r, err := pcapgo.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		if w == nil {
			w = pcapgo.NewWriterNanos(o)
			if err := w.WriteFileHeader(r.Snaplen(), r.LinkType()); err != nil {
				t.Fatal(err)
			}
		}
		for {
			data, ci, err := r.ReadPacketData()
			if err != nil {
				break
			}
			if err := w.WritePacket(ci, data); err != nil {
				t.Fatal(err)
			}
		}
		f.Close()
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// withoutTS returns the JSON lines without their "ts".
func withoutTS(t *testing.T, lines []string) []string {
	t.Helper()
	var out []string
	for _, l := range lines {
		out = append(out, strings.Replace(l, `"ts":`+fieldOf(t, l, "ts")+",", "", 1))
	}
	return out
}

// fieldOf returns a top-level field of a JSON line, as written.
func fieldOf(t *testing.T, line, name string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return string(m[name])
}
