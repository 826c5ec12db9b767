package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// measureTrace is a generated trace of 200000 packets 1 µs apart (200 ms).
func measureTrace(t *testing.T) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "m.pcap")
	if r := ffpf(t, "gen", "-o", f, "--packets", "200000", "--flows", "5000", "--seed", "11", "--malformed", "0.01"); r.code != 0 {
		t.Fatalf("gen: %d %s", r.code, r.stderr)
	}
	return f
}

// The same file gives byte-identical JSON lines on every run, whatever
// GOMAXPROCS.
func TestMeasureDeterministic(t *testing.T) {
	f := measureTrace(t)
	dir := t.TempDir()
	outs := []string{"cms", "counter", "hll", "pcsa", "bloom", "joined"}
	var expr []string
	for _, e := range []string{
		`(cms,key=srcip/24,value=bytes,window=1ms,report=5)`,
		`(bpf,"tcp") > (counter,key=dstport,window=7ms,report=3)`,
		`(hll,key=5tuple,window=10ms,report=1)`,
		`(pcsa,key=dstip,window=3ms,report=1)`,
		`(bloom,key=srcip,bits=4K,window=2ms,report=1)`,
		`(bloom,key=5tuple,window=5ms) > (counter,key=proto,window=5ms,report=4)`,
	} {
		expr = append(expr, fmt.Sprintf("%s > (export,format=jsonl,file=%q)", e, filepath.Join(dir, outs[len(expr)]+".jsonl")))
	}
	read := func() map[string][]byte {
		m := map[string][]byte{}
		for _, o := range outs {
			b, err := os.ReadFile(filepath.Join(dir, o+".jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			m[o] = b
		}
		return m
	}
	var ref map[string][]byte
	for _, procs := range []string{"1", "2"} {
		for i := range 10 {
			cmd := exec.Command(ffpfBin, "run", "--progress=false", "-r", f, strings.Join(expr, "; "))
			cmd.Env = append(os.Environ(), "GOMAXPROCS="+procs)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("GOMAXPROCS=%s run %d: %v\n%s", procs, i, err, out)
			}
			got := read()
			if ref == nil {
				ref = got
				for o, b := range ref {
					if n := bytes.Count(b, []byte("\n")); n < 10 {
						t.Fatalf("%s: only %d records", o, n)
					}
					for _, l := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
						if !json.Valid(l) {
							t.Fatalf("%s: not JSON: %s", o, l)
						}
					}
				}
				continue
			}
			for _, o := range outs {
				if !bytes.Equal(got[o], ref[o]) {
					t.Errorf("GOMAXPROCS=%s run %d: %s differs from the first run", procs, i+1, o)
				}
			}
		}
	}
}

// Bad measurement input is refused before anything runs: exit 2, one
// sentence that names the function, and the place in the expression.
func TestMeasureBadInput(t *testing.T) {
	f := measureTrace(t)
	out := filepath.Join(t.TempDir(), "x.jsonl")
	for _, c := range []struct{ expr, want string }{
		{`(cms,key=foo)`, `cms: unknown key field "foo"`},
		{`(counter,key="srcip,port")`, `counter: unknown key field "port"`},
		{`(hll,key=srcip/129)`, `hll`},
		{`(cms,report=3) > (bpf,"tcp")`, `bpf reads packet headers, but cms feeds it records`},
		{`(counter,key=dstport,report=2) > (hll)`, `hll reads packet headers, but counter feeds it records`},
		{`(bloom,report=1) > (cms)`, `cms reads packet headers, but bloom feeds it records`},
		{fmt.Sprintf(`(export,format=jsonl,file=%q)`, out), `format=jsonl writes records, but export receives packets`},
		{`(cms,window=0s)`, `window`},
		{`(cms,report=0)`, `report`},
		{`(cms,width=16M,depth=16)`, `cms would keep 1953 MiB of state, more than the 1024 MiB a function may`},
		{`(counter,key="5tuple,srcmac,dstmac",size=16M)`, `counter would keep 1098 MiB of state`},
		{`n:(cms) > (match,"n.mni > 3")`, `match reads n.mni, but n:cms has no "mni" to read (it has min, max, sum, avg, total); did you mean n.min?`},
		{`(cms) > (match,"x.min > 3")`, `no function of this request is labelled "x"`},
		{`x:[(cms)|(hll)] > (match,"x.min > 3")`, `names a group`},
		{`t:(timestamp) > (match,"t.age > 1ms")`, `t:timestamp has no "age" to read (it has ts)`},
	} {
		r := ffpf(t, "run", "-r", f, c.expr)
		first, _, _ := strings.Cut(r.stderr, "\n")
		if r.code != 2 || !strings.HasPrefix(first, "ffpf: ") || !strings.Contains(first, c.want) || strings.Count(strings.TrimSuffix(first, "."), ". ") > 0 {
			t.Errorf("%s: exit %d, %q; want exit 2 and one sentence with %q", c.expr, r.code, r.stderr, c.want)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a refused export created %s", out)
	}
}

// A keyed counter whose table is too small counts the keys it cannot
// hold in its state's dropped and passes every packet on; every function
// keeps in = out + filtered + dropped (checked by parseRun).
func TestMeasureOverflow(t *testing.T) {
	f := measureTrace(t)
	out := filepath.Join(t.TempDir(), "o.jsonl")
	doc := parseRun(t, ffpf(t, "run", "--json", "-r", f,
		fmt.Sprintf(`(counter,key=5tuple,size=16) > (cms,key=5tuple,window=5ms,report=3) > (export,format=jsonl,file=%q); (bpf,"udp") > (bloom,key=srcip) > (hll)`, out)))
	c := doc.Functions[doc.byClass("counter")[0]]
	keys, _ := c.State["keys"].(float64)
	dropped, _ := c.State["dropped"].(float64)
	nokey, _ := c.State["nokey"].(float64)
	packets, _ := c.State["packets"].(float64)
	if keys != 16 || dropped == 0 || packets != 200000 || c.In != 200000 || c.Out != 200000 {
		t.Errorf("counter: in %d out %d state %v", c.In, c.Out, c.State)
	}
	if dropped+nokey >= packets {
		t.Errorf("counter: no packet was counted: %v", c.State)
	}
	cms := doc.Functions[doc.byClass("cms")[0]]
	if cms.Filtered != cms.In || cms.Out != 0 || cms.Records == 0 {
		t.Errorf("cms with report=: in %d out %d filtered %d records %d", cms.In, cms.Out, cms.Filtered, cms.Records)
	}
}
