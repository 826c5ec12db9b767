package plugin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/ffpf-go/ffpf/examples/plugin/dnsname/dns"
	"github.com/ffpf-go/ffpf/examples/plugin/portcount/ports"
	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/flowspaces/hierarchy"
	"github.com/ffpf-go/ffpf/functions"
	_ "github.com/ffpf-go/ffpf/functions/builtin"
	"github.com/ffpf-go/ffpf/functions/plugin"
)

// The plugins the tests load, built once into a directory of their own
// each (a directory is what ffpf loads).
var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// pluginDir returns a new directory holding the named plugins (built by
// go build from the examples and testdata).
func pluginDir(t testing.TB, names ...string) string {
	t.Helper()
	buildOnce.Do(func() {
		built, buildErr = os.MkdirTemp("", "ffpf-plugins")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", built+"/",
			"github.com/ffpf-go/ffpf/examples/plugin/dnsname", "github.com/ffpf-go/ffpf/examples/plugin/portcount",
			"./testdata/faulty", "./testdata/badschema", "./testdata/othercookie")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	dir := t.TempDir()
	for _, n := range names {
		if err := os.Link(filepath.Join(built, n), filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built != "" {
		os.RemoveAll(built)
	}
	os.Exit(code)
}

// registry is a copy of the default registry with classes added.
func registry(classes ...*functions.Class) *functions.Registry {
	reg := functions.NewRegistry()
	for _, c := range append(functions.Default.All(), classes...) {
		reg.Register(c)
	}
	return reg
}

// load loads the plugins of dir into a copy of the default registry.
func load(t testing.TB, dir string, opts plugin.Options) (*functions.Registry, *plugin.Host, *strings.Builder) {
	t.Helper()
	reg := registry()
	var log strings.Builder
	if opts.Log == nil {
		opts.Log = &syncWriter{w: &log}
	}
	h, err := plugin.Load([]string{dir}, reg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return reg, h, &log
}

type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// dnsTrace writes a capture of DNS queries (names under example.com and
// elsewhere, compressed, in any case), malformed DNS messages and other
// traffic; it returns how many packets of each kind it holds.
func dnsTrace(t testing.TB, path string, rounds int) (total, names, matched, malformed int) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := pcapgo.NewWriter(f)
	w.WriteFileHeader(65535, layers.LinkTypeEthernet)
	ts := time.Unix(1700000000, 0)
	write := func(payload []byte, dport uint16, tcp bool) {
		eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
		ip := &layers.IPv4{Version: 4, TTL: 64, SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 0, 0, 2}, Protocol: layers.IPProtocolUDP}
		buf := gopacket.NewSerializeBuffer()
		opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
		var l4 gopacket.SerializableLayer
		if tcp {
			ip.Protocol = layers.IPProtocolTCP
			tl := &layers.TCP{SrcPort: 40000, DstPort: layers.TCPPort(dport), Window: 100}
			tl.SetNetworkLayerForChecksum(ip)
			l4 = tl
		} else {
			ul := &layers.UDP{SrcPort: 40000, DstPort: layers.UDPPort(dport)}
			ul.SetNetworkLayerForChecksum(ip)
			l4 = ul
		}
		if err := gopacket.SerializeLayers(buf, opts, eth, ip, l4, gopacket.Payload(payload)); err != nil {
			t.Fatal(err)
		}
		ts = ts.Add(time.Millisecond)
		w.WritePacket(gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(buf.Bytes()), Length: len(buf.Bytes())}, buf.Bytes())
		total++
	}
	query := func(name string, qtype layers.DNSType) []byte {
		d := &layers.DNS{ID: 1, RD: true, Questions: []layers.DNSQuestion{{Name: []byte(name), Type: qtype, Class: layers.DNSClassIN}}}
		buf := gopacket.NewSerializeBuffer()
		if err := d.SerializeTo(buf, gopacket.SerializeOptions{FixLengths: true}); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	header := []byte{0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0} // one question
	for r := range rounds {
		for _, n := range []string{fmt.Sprintf("host%d.example.com", r), "EXAMPLE.com", "a.b.Example.COM"} {
			write(query(n, layers.DNSTypeA), 53, false)
			names++
			matched++
		}
		for _, n := range []string{"example.org", "notexample.com", "com", fmt.Sprintf("example.com.evil%d.net", r)} {
			write(query(n, layers.DNSTypeAAAA), 53, false)
			names++
		}
		// Compressed: the question's name is "www" + a pointer back to
		// "example.com" written in an additional header region (a
		// pointer may only point back, so this one is malformed: it
		// points forward past itself).
		fwd := append(append([]byte{}, header...), 3, 'w', 'w', 'w', 0xC0, 18, 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0, 0, 1, 0, 1)
		write(fwd, 53, false)
		malformed++
		// A pointer loop, a label past the end, a reserved label type, a
		// short header, a question cut before its type.
		for _, bad := range [][]byte{
			append(append([]byte{}, header...), 0xC0, 12, 0, 1, 0, 1),
			append(append([]byte{}, header...), 9, 'a', 'b'),
			append(append([]byte{}, header...), 0x41, 'a', 0, 0, 1, 0, 1),
			header[:7],
			append(append([]byte{}, header...), 1, 'a', 0, 0),
		} {
			write(bad, 53, false)
			malformed++
		}
		// A name of 256 bytes on the wire (four labels of 63: 4×64 + 1).
		long := append([]byte{}, header...)
		for range 4 {
			long = append(long, 63)
			long = append(long, []byte(strings.Repeat("x", 63))...)
		}
		write(append(long, 0, 0, 1, 0, 1), 53, false)
		malformed++
		write(query("www.example.com", layers.DNSTypeA), 80, false) // not port 53
		write(query("www.example.com", layers.DNSTypeA), 53, true)  // DNS over TCP: not read
	}
	return total, names, matched, malformed
}

// run runs exprs over the capture file with registry reg and returns the
// functions' states by id, and the run's error (Wait's, then Close's).
func run(t testing.TB, reg *functions.Registry, file string, exprs ...string) (map[string]flowgraph.FunctionState, error) {
	t.Helper()
	return runGraph(t, reg, flowgraph.RequestOptions{DefaultSource: "(pcap,file=" + fmt.Sprintf("%q", file) + ")"}, exprs...)
}

// TestDNSNameOutOfProcessEqualsInProcess: the plugin's class is the
// compiled-in one, and runs the same: counters, state, result.
func TestDNSNameOutOfProcessEqualsInProcess(t *testing.T) {
	dir := pluginDir(t, "dnsname")
	reg, h, _ := load(t, dir, plugin.Options{})
	trace := filepath.Join(t.TempDir(), "dns.pcap")
	total, names, matched, malformed := dnsTrace(t, trace, 40)
	c, ok := reg.Lookup("dnsname")
	if !ok || h.Plugin("dnsname") != filepath.Join(dir, "dnsname") {
		t.Fatalf("dnsname not loaded (%v, %q)", ok, h.Plugin("dnsname"))
	}
	if c.Summary != dns.Class.Summary || len(c.Params) != 1 || c.Params[0].Name != "suffix" || !c.Params[0].Required ||
		len(c.State.Fields) != 3 || c.Concurrency != functions.Ordered {
		t.Errorf("the plugin's class differs from the compiled-in one: %+v", c)
	}
	expr := `(dnsname,suffix=".example.com") > (pktcount)`
	got, err := run(t, reg, trace, expr)
	if err != nil {
		t.Fatal(err)
	}
	in := registry(dns.Class)
	want, err := run(t, in, trace, expr)
	if err != nil {
		t.Fatal(err)
	}
	d := got["dnsname#1"]
	wantState := map[string]any{"names": uint64(names), "matched": uint64(matched), "malformed": uint64(malformed)}
	if d.In != uint64(total) || d.Out != uint64(matched) || fmt.Sprint(d.State) != fmt.Sprint(wantState) {
		t.Errorf("plugin: in %d out %d state %v; want in %d out %d state %v", d.In, d.Out, d.State, total, matched, wantState)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("out of process:\n%v\nin process:\n%v", got, want)
	}
}

// TestBadSuffixIsRefusedAtPopulate: the plugin's parameter check runs at
// populate, as a compiled-in class's, with the class's sentence.
func TestBadSuffixIsRefusedAtPopulate(t *testing.T) {
	reg, _, _ := load(t, pluginDir(t, "dnsname"), plugin.Options{})
	rt := flowgraph.New(flowgraph.Config{Registry: reg, Hierarchy: hierarchy.Userspace()})
	_, err := rt.Populate(`(pcap,file="x.pcap") > (dnsname,suffix="a..b")`, flowgraph.RequestOptions{})
	if err == nil || !strings.Contains(err.Error(), `suffix "a..b" has an empty label`) || !flowgraph.IsInvalid(err) {
		t.Errorf("populate: %v", err)
	}
}

// TestMergeablePluginOnTwoWorkers: two sources reach one portcount, which
// runs as an instance per worker (each a plugin instance on a shard of
// the state, in shared memory); the merged state equals the in-process
// class's and the sum of each source alone.
func TestMergeablePluginOnTwoWorkers(t *testing.T) {
	reg, h, _ := load(t, pluginDir(t, "portcount"), plugin.Options{})
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.pcap"), filepath.Join(dir, "b.pcap")
	na, _, _, _ := dnsTrace(t, a, 30)
	nb, _, _, _ := dnsTrace(t, b, 70)
	expr := fmt.Sprintf(`[(pcap,file=%q)|(pcap,file=%q)] > (portcount,ports="53,80")`, a, b)
	got, err := run(t, reg, a, expr)
	if err != nil {
		t.Fatal(err)
	}
	if n := h.Instances("portcount"); n != 2 {
		t.Errorf("the plugin made %d instances for two workers", n)
	}
	in := registry(ports.Class)
	want, err := run(t, in, a, expr)
	if err != nil {
		t.Fatal(err)
	}
	p := got["portcount#1"]
	// Each trace: per round 14 datagrams to port 53, one to 80, one TCP
	// segment to 53.
	wantState := fmt.Sprint(map[string]any{"other": uint64(0), "packets": []any{uint64((na + nb) * 15 / 16), uint64((na + nb) / 16)}})
	if p.In != uint64(na+nb) || fmt.Sprint(p.State) != wantState || fmt.Sprint(p.State) != fmt.Sprint(want["portcount#1"].State) {
		t.Errorf("plugin: in %d state %v; in process %v; want %s", p.In, p.State, want["portcount#1"].State, wantState)
	}
}

// TestHandlersCrossToThePlugin: a request calls the plugin function's
// handler, which runs in the plugin between batches; the state it resets
// is the one ffpf reads in shared memory.
func TestHandlersCrossToThePlugin(t *testing.T) {
	reg, _, _ := load(t, pluginDir(t, "dnsname"), plugin.Options{})
	trace := filepath.Join(t.TempDir(), "dns.pcap")
	_, names, matched, malformed := dnsTrace(t, trace, 10)
	rt := flowgraph.New(flowgraph.Config{Registry: reg, Hierarchy: hierarchy.Userspace()})
	req, err := rt.Populate(fmt.Sprintf(`(pcap,file=%q) > d:(dnsname,suffix="example.com")`, trace), flowgraph.RequestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	rt.Activate(context.Background())
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	res, err := req.Call("d", "reset", "")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`{"malformed":%d,"matched":%d,"names":%d}`, malformed, matched, names)
	if js, _ := json.Marshal(res); string(js) != want {
		t.Errorf("reset returned %s, want %s", js, want)
	}
	if st := req.Functions()[1].State; fmt.Sprint(st) != "map[malformed:0 matched:0 names:0]" {
		t.Errorf("after reset the state reads %v", st)
	}
	if _, err := req.Call("d", "reset", "now"); err == nil || err.Error() != "reset takes no argument" {
		t.Errorf("a bad argument: %v", err)
	}
}
