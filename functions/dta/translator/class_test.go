package translator_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/gopacket/pcapgo"

	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/functions"
	_ "github.com/ffpf-go/ffpf/functions/builtin"
	"github.com/ffpf-go/ffpf/functions/dta/translator"
	"github.com/ffpf-go/ffpf/functions/dta/wire"
)

func run(t *testing.T, expr string) map[string]flowgraph.FunctionState {
	t.Helper()
	rt := flowgraph.New(flowgraph.Config{})
	defer rt.Close()
	req, err := rt.Populate(expr, flowgraph.RequestOptions{})
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Activate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	out := map[string]flowgraph.FunctionState{}
	for _, f := range req.Functions() {
		out[f.Class] = f
	}
	return out
}

func frames(t *testing.T, path string) [][]byte {
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
	var out [][]byte
	for {
		data, _, err := r.ReadPacketData()
		if err != nil {
			return out
		}
		out = append(out, append([]byte(nil), data...))
	}
}

// TestClassMatchesLibrary: the reporter's frames through the translator
// class give write records that, applied to a memory, leave it as the
// library translating the same reports does.
func TestClassMatchesLibrary(t *testing.T) {
	const mem = "slots=4093,counters=1021,chunks=509,lists=8,listsize=1000"
	for _, c := range []struct{ reporter, translator string }{
		{"op=keywrite,key=ipv4.src,data=pkt.len,redundancy=2", "batch=4"},
		{"op=keyincrement,key=tcp.dport,redundancy=3", "batch=4"},
		{"op=append,list=5,data=ipv4.dst", "batch=16"},
		{"op=append,list=1,data=pkt.len", "batch=1"},
		{"op=postcarding,key=ipv4.src,hop=2,data=ipv4.dst", "hops=3,copies=2"},
	} {
		t.Run(c.reporter, func(t *testing.T) {
			dir := t.TempDir()
			reps, writes := filepath.Join(dir, "reports.pcap"), filepath.Join(dir, "writes.pcap")
			fs := run(t, fmt.Sprintf("(gen,packets=4000,seed=3) > (dta,%s) > (export,file=%q) > (dta-translator,%s,%s) > (export,file=%q)",
				c.reporter, reps, mem, c.translator, writes))
			tf := fs["dta-translator"]
			cfg := parseConfig(t, mem+","+c.translator)

			lib := translator.NewMem(cfg)
			tr, err := translator.New(cfg, lib)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, fr := range frames(t, reps) {
				pl, ok := translator.Payload(functions.LinkEthernet, fr, wire.Port)
				if !ok {
					t.Fatal("a reporter frame is not a report")
				}
				var r wire.Report
				if err := wire.Decode(pl, &r); err != nil {
					t.Fatal(err)
				}
				if err := tr.Translate(&r); err != nil {
					t.Fatal(err)
				}
				n++
			}
			tr.Flush()

			viaRecords := translator.NewMem(cfg)
			ws := frames(t, writes)
			for _, rec := range ws {
				if err := translator.ApplyRecord(rec, viaRecords); err != nil {
					t.Fatal(err)
				}
			}
			if err := viaRecords.Equal(lib); err != nil {
				t.Fatal(err)
			}
			st := tr.Stats()
			if n == 0 || tf.In != uint64(n) || tf.Records != uint64(len(ws)) || uint64(len(ws)) != st.Writes+st.FetchAdds || tf.Dropped != 0 {
				t.Fatalf("%d reports, %d records; function %+v; library %+v", n, len(ws), tf, st)
			}
			if viaRecords.Outside != 0 {
				t.Fatalf("%d writes outside", viaRecords.Outside)
			}
			// A capture of reports is a source too: the same writes.
			writes2 := filepath.Join(dir, "writes2.pcap")
			run(t, fmt.Sprintf("(pcap,file=%q) > (dta-translator,%s,%s) > (export,file=%q)", reps, mem, c.translator, writes2))
			again := translator.NewMem(cfg)
			for _, rec := range frames(t, writes2) {
				if err := translator.ApplyRecord(rec, again); err != nil {
					t.Fatal(err)
				}
			}
			if err := again.Equal(lib); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d reports, %d writes; %v", n, len(ws), tf.State)
		})
	}
}

func parseConfig(t *testing.T, args string) translator.Config {
	t.Helper()
	rt := flowgraph.New(flowgraph.Config{})
	defer rt.Close()
	req, err := rt.Populate("(gen) > (dta-translator,"+args+")", flowgraph.RequestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range req.Functions() {
		if f.Class == "dta-translator" {
			c := translator.DefaultConfig
			p := f.Params
			get := func(name string) int64 { return p[name].(int64) }
			c.Slots, c.Counters, c.Chunks = uint64(get("slots")), uint64(get("counters")), uint64(get("chunks"))
			c.Copies, c.Hops, c.Lists = int(get("copies")), int(get("hops")), int(get("lists"))
			c.ListSize, c.Batch = uint64(get("listsize")), int(get("batch"))
			return c
		}
	}
	t.Fatal("no translator")
	return translator.Config{}
}
