package builtin_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/functions"
	_ "github.com/ffpf-go/ffpf/functions/builtin"
	"github.com/ffpf-go/ffpf/functions/dta/collector"
	"github.com/ffpf-go/ffpf/internal/graphtest"
	"github.com/ffpf-go/ffpf/internal/netnstest"
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

// example is one line of the fenced blocks under "## Examples" of a
// class README.
type example struct{ readme, expr string }

// live says the example needs a network: it captures on an interface, or
// sends reports to a collector (to=), which must not reach whatever
// listens on this machine's 127.0.0.1:40040.
func (e example) live() bool {
	return strings.Contains(e.expr, "(dev") || strings.Contains(e.expr, "to=")
}

// readmeExamples returns the examples of every class README (absolute
// paths), with the README's text by path.
func readmeExamples(t *testing.T) ([]example, map[string]string) {
	t.Helper()
	readmes := classReadmes()
	if len(readmes) < 6 {
		t.Fatalf("found %d class READMEs", len(readmes))
	}
	var out []example
	text := map[string]string{}
	for _, path := range readmes {
		md, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if isLibrary(md) {
			continue
		}
		text[path] = string(md)
		_, ex, _ := strings.Cut(string(md), "## Examples")
		if i := strings.Index(ex, "\n## "); i >= 0 {
			ex = ex[:i]
		}
		for _, block := range fence.FindAllStringSubmatch(ex, -1) {
			for _, expr := range strings.Split(block[1], "\n") {
				if expr = strings.TrimSpace(expr); expr != "" && !strings.HasPrefix(expr, "#") {
					out = append(out, example{path, expr})
				}
			}
		}
	}
	return out, text
}

// TestReadmeExamples keeps every class README honest: each line of the
// fenced blocks under "## Examples" must pass populate (syntax, classes,
// parameters, filters compiled by libpcap) and run, in a directory that
// holds the files the examples read (captures of generated traffic, a
// capture of DTA reports), on at most 2000 packets. A chain without a
// source is fed trace.pcap, as `ffpf run -r trace.pcap` would feed it.
// The examples that capture on an interface or send reports (to=) run
// in TestReadmeExamplesLive, in a network namespace of their own.
func TestReadmeExamples(t *testing.T) {
	examples, text := readmeExamples(t)
	for path, md := range text {
		for _, sec := range []string{"## Name", "## Syntax", "## Parameters", "## State", "## Targets", "## Examples"} {
			if !strings.Contains(md, sec) {
				t.Errorf("%s has no %q section", path, sec)
			}
		}
		if !slices.ContainsFunc(examples, func(e example) bool { return e.readme == path }) {
			t.Errorf("%s: no examples", path)
		}
	}
	documented := map[string]bool{}
	for _, e := range examples {
		rt := flowgraph.New(flowgraph.Config{CaptureLimit: 2000})
		req, err := rt.Populate(e.expr, flowgraph.RequestOptions{Unfed: true})
		if err != nil {
			t.Errorf("%s: %s: %v", e.readme, e.expr, err)
		} else {
			for _, f := range req.Functions() {
				documented[f.Class] = true
			}
		}
		rt.Close()
	}
	for _, c := range functions.Default.All() {
		if !documented[c.Name] {
			t.Errorf("class %s appears in no README example", c.Name)
		}
	}
	t.Chdir(t.TempDir())
	inputs(t)
	ran := 0
	for _, e := range examples {
		if !e.live() {
			rt := runExample(t, e, context.Background(), nil)
			rt.Close()
			ran++
		}
	}
	t.Logf("%d examples run here, %d in TestReadmeExamplesLive", ran, len(examples)-ran)
}

// TestReadmeExamplesLive runs the examples that capture on an interface
// or send reports, in a network namespace of the test's own: a capture on
// lo (or any) while TCP connections to port 80 and UDP datagrams to port
// 53 cross it, reports to a collector on 127.0.0.1:40040 that keeps
// Key-Write, Append and three-hop postcards. Every report a reporter
// sends reaches the collector and none is refused, and the postcarding
// example's paths are those it documents (11 12 13).
func TestReadmeExamplesLive(t *testing.T) {
	ns := netnstest.Alone(t, "rdme", "the README examples that capture or send reports")
	examples, _ := readmeExamples(t)
	t.Chdir(t.TempDir())
	inputs(t)
	var live []example
	for _, e := range examples {
		if e.live() {
			live = append(live, e)
		}
	}
	if len(live) < 4 {
		t.Fatalf("%d live examples: the test finds none of the READMEs' captures and reports", len(live))
	}
	netnstest.In(t, ns, func() {
		srv, err := collector.NewServer(collector.ServerConfig{Listen: "127.0.0.1:40040", Sockets: 1, Config: collector.Config{
			KeyWrite:    collector.KeyWriteConfig{Slots: 4_000_000, Redundancy: 2},
			Append:      collector.AppendConfig{Lists: 16, Size: 100_000},
			Postcarding: collector.PostcardingConfig{Chunks: 100_003, Hops: 3, Values: 100},
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		web, err := net.Listen("tcp", "127.0.0.1:80")
		if err != nil {
			t.Fatal(err)
		}
		defer web.Close()
		go func() {
			for {
				c, err := web.Accept()
				if err != nil {
					return
				}
				io.Copy(io.Discard, c)
				c.Close()
			}
		}()
		dns, err := net.Dial("udp", "127.0.0.1:53")
		if err != nil {
			t.Fatal(err)
		}
		defer dns.Close()
		traffic := func() { // on this thread, in the namespace
			for range 40 {
				if c, err := net.Dial("tcp", "127.0.0.1:80"); err == nil {
					c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
					c.Close()
				}
				dns.Write([]byte("a question"))
			}
		}
		ingested := func() uint64 { st := srv.Stats(); return st.Total() }
		for _, e := range live {
			sent0 := ingested()
			ctx, cancel := context.WithCancel(context.Background())
			var during func()
			if strings.Contains(e.expr, "(dev") {
				during = func() {
					traffic()
					time.Sleep(200 * time.Millisecond) // the captures read what crossed lo
					cancel()
				}
			}
			rt := runExample(t, e, ctx, during)
			cancel()
			var sent uint64
			for _, f := range rt.Functions() {
				if f.Class == "dta" {
					sent += stateU64(f.State["sent"])
					if n := stateU64(f.State["unsent"]) + stateU64(f.State["refused"]); n != 0 {
						t.Errorf("%s: %s: %d reports not sent or refused", e.readme, e.expr, n)
					}
				}
			}
			rt.Close()
			if !strings.Contains(e.expr, "to=") {
				continue
			}
			got := sent0
			for deadline := time.Now().Add(10 * time.Second); got-sent0 < sent && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
				got = ingested()
			}
			if got-sent0 != sent {
				t.Errorf("%s: %s: %d reports sent, the collector ingested %d", e.readme, e.expr, sent, got-sent0)
			}
		}
		st := srv.Stats()
		for why, n := range st.Dropped {
			if n != 0 {
				t.Errorf("the collector dropped %d reports under %s", n, why)
			}
		}
		if st.Reports["postcarding"] == 0 || st.Reports["append"] == 0 {
			t.Errorf("the collector ingested %v: the postcarding and append examples sent nothing", st.Reports)
		}
		// The postcarding example's paths: each IPv4 source of t.pcap
		// that reached the collector has the path 11 12 13.
		checked := 0
		for _, src := range ipv4Sources(t, "t.pcap", 2000) {
			a, err := srv.Collector().Postcard(src)
			if err != nil {
				t.Fatal(err)
			}
			if a.Status != collector.Found || fmt.Sprint(a.Hops) != "[11 12 13]" {
				t.Errorf("the path of 0x%08x: %v %v, want found [11 12 13]", src, a.Status, a.Hops)
			}
			if checked++; checked == 50 {
				break
			}
		}
		t.Logf("%d live examples; the collector ingested %v; %d paths checked", len(live), st.Reports, checked)
	})
}

func stateU64(v any) uint64 {
	n, _ := v.(uint64)
	return n
}

// runExample runs one example to its end (or until ctx is done), calling
// during, when set, once the run has started: no error, packets read,
// every function's in = out + filtered + dropped, and every reporter that
// got input made reports.
func runExample(t *testing.T, e example, ctx context.Context, during func()) *flowgraph.Runtime {
	t.Helper()
	rt := flowgraph.New(flowgraph.Config{CaptureLimit: 2000})
	where := e.readme + ": " + e.expr
	if _, err := rt.Populate(e.expr, flowgraph.RequestOptions{DefaultSource: `(pcap,file="trace.pcap")`}); err != nil {
		t.Errorf("%s: %v", where, err)
		return rt
	}
	if err := rt.Instantiate(); err != nil {
		t.Errorf("%s: instantiate: %v", where, err)
		return rt
	}
	if err := rt.Activate(ctx); err != nil {
		t.Errorf("%s: activate: %v", where, err)
		return rt
	}
	if during != nil {
		during()
	}
	if err := rt.Wait(); err != nil {
		t.Errorf("%s: run: %v", where, err)
	}
	if rt.Packets() == 0 {
		t.Errorf("%s: no packets", where)
	}
	for _, f := range rt.Functions() {
		if f.In != f.Out+f.Filtered+f.Dropped {
			t.Errorf("%s: %s: in %d != out %d + filtered %d + dropped %d", where, f.ID, f.In, f.Out, f.Filtered, f.Dropped)
		}
		// A reporter that makes no report of what reaches it (a hop no
		// collector keeps, a field its input lacks) is a broken example.
		if f.Class == "dta" && f.In > 0 && stateU64(f.State["reports"]) == 0 {
			t.Errorf("%s: %s makes no report of %d inputs (nofield %v)", where, f.ID, f.In, f.State["nofield"])
		}
	}
	return rt
}

// inputs writes the files the examples read into the working directory:
// captures of generated traffic, one of them pcapng, and a capture of DTA
// reports (Key-Write and Append).
func inputs(t *testing.T) {
	t.Helper()
	for _, expr := range []string{
		`(gen,packets=3000,seed=1) > (export,file=trace.pcap)`,
		`(gen,packets=3000,seed=2) > (export,file=t.pcap)`,
		`(gen,packets=1000,seed=3) > (export,file=a.pcap)`,
		`(gen,packets=1000,seed=4,ipv6=0.5) > (export,file=b.pcap)`,
		`(gen,packets=1000,seed=5) > (export,file=capture.pcapng)`,
		`(gen,packets=2000,seed=6) > [(dta,op=keywrite,key=ipv4.src,data=pkt.len) | (dta,op=append,list=3,data=ipv4.dst)] > (export,file=reports.pcap)`,
	} {
		graphtest.Run(t, expr).Close()
	}
}

// ipv4Sources returns the distinct IPv4 source addresses of the first n
// packets of a capture, as DTA keys.
func ipv4Sources(t *testing.T, path string, n int) []uint32 {
	data, _ := graphtest.ReadPcap(t, path)
	seen := map[uint32]bool{}
	var out []uint32
	for _, d := range data[:min(n, len(data))] {
		p := gopacket.NewPacket(d, layers.LayerTypeEthernet, gopacket.Default)
		if ip, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok {
			a := ip.SrcIP.To4()
			k := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return out
}
