package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/ffpf-go/ffpf/functions/dta/collector"
	"github.com/ffpf-go/ffpf/functions/dta/wire"
)

// ffpf dta collect receives reports over UDP; ffpf dta query answers from
// it: a value, "not found", "collision", a count, a path, a list's last
// entries. SIGINT ends the collector with its counters as JSON.
func TestDTACollectAndQuery(t *testing.T) {
	cmd := exec.Command(ffpfBin, "dta", "collect", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--sockets", "2",
		"--keywrite", "slots=1M,redundancy=2", "--append", "lists=4,size=1000",
		"--keyincrement", "slots=100003", "--postcarding", "chunks=10007,hops=3")
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(errPipe)
	if !sc.Scan() {
		t.Fatalf("the collector printed nothing: %v", sc.Err())
	}
	first := sc.Text()
	m := regexp.MustCompile(`reports on udp (\S+), queries on http://(\S+);`).FindStringSubmatch(first)
	if m == nil {
		t.Fatalf("first line: %q", first)
	}
	var rest bytes.Buffer
	done := make(chan struct{})
	go func() {
		for sc.Scan() {
			rest.WriteString(sc.Text() + "\n")
		}
		close(done)
	}()
	udp, httpAddr := m[1], m[2]

	conn, err := net.Dial("udp", udp)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	reports := []wire.Report{
		{Op: wire.KeyWrite, Redundancy: 2, Key: 0x0a000105, Data: 1234},
		{Op: wire.KeyWrite, Redundancy: 2, Key: 7, Data: 1},
		{Op: wire.KeyWrite, Redundancy: 1, Key: 7, Data: 2}, // copies 2 and 1: a collision
		{Op: wire.KeyIncrement, Redundancy: 2, Key: 9, Counter: 40},
		{Op: wire.KeyIncrement, Redundancy: 2, Key: 9, Counter: 2},
		{Op: wire.Postcarding, Key: 77, Hop: 0, Data: 100},
		{Op: wire.Postcarding, Key: 77, Hop: 2, Data: 102},
	}
	for i := range 12 {
		reports = append(reports, wire.Report{Op: wire.Append, List: 3, Data: uint32(i)})
	}
	for _, r := range reports {
		b, _ := r.Append(nil)
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	conn.Write([]byte{0x01, 0x00}) // short
	cl := &collector.Client{Server: httpAddr}
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := cl.Stats(context.Background())
		if err == nil && st.Datagrams == uint64(len(reports)+1) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the collector did not receive the reports: %+v %v", st, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// /metrics, by Prometheus's client library (in the whole build, which
	// make build's bin/ffpf runs for --http).
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`dta_collector_reports_total{primitive="append"} 12`, `dta_collector_dropped_total{reason="short"} 1`,
		fmt.Sprintf("dta_collector_datagrams_total %d", len(reports)+1)} {
		if !strings.Contains(string(body), "\n"+want+"\n") {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"keywrite", "0x0a000105"}, "1234\n"},
		{[]string{"keywrite", "10.0.1.5"}, "1234\n"},
		{[]string{"keywrite", "0x0a000106"}, "not found\n"},
		{[]string{"keywrite", "7"}, "collision\n"},
		{[]string{"keywrite", "7", "--redundancy", "1"}, "2\n"},
		{[]string{"keyincrement", "9"}, "42\n"},
		{[]string{"postcarding", "77"}, "100 - 102\n"},
		{[]string{"postcarding", "78"}, "not found\n"},
		{[]string{"append", "3", "3"}, "9\n10\n11\n"},
		{[]string{"append", "2"}, ""},
	} {
		r := ffpf(t, append([]string{"dta", "query", "--server", httpAddr}, c.args...)...)
		if r.code != 0 || r.stdout != c.want {
			t.Errorf("query %v: exit %d, %q (want %q), stderr %q", c.args, r.code, r.stdout, c.want, r.stderr)
		}
	}
	r := ffpf(t, "dta", "query", "--server", httpAddr, "--json", "keywrite", "7")
	var a collector.Answer
	if err := json.Unmarshal([]byte(r.stdout), &a); err != nil || a.Status != "collision" || a.Matches != 2 {
		t.Errorf("--json: %q: %v", r.stdout, err)
	}
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"dta", "query", "--server", httpAddr, "keywrite", "nokey"}, 2, "not a 32-bit key"},
		{[]string{"dta", "query", "--server", httpAddr, "keywrite"}, 2, "takes one KEY"},
		{[]string{"dta", "query", "--server", httpAddr, "append", "4"}, 2, "no list 4"},
		{[]string{"dta", "query", "--server", httpAddr, "lookup", "4"}, 2, "no primitive"},
		{[]string{"dta", "query", "keywrite", "1"}, 2, "needs --server"},
		{[]string{"dta", "query", "--server", "127.0.0.1:1", "keywrite", "1"}, 1, "cannot reach the collector"},
		{[]string{"dta", "collect", "--listen", "127.0.0.1:0"}, 2, "hosts no primitive"},
		{[]string{"dta", "collect", "--listen", "127.0.0.1:0", "--keywrite", "slots=1Mi"}, 2, "power of two"},
		{[]string{"dta", "collect", "--listen", "127.0.0.1:0", "--keywrite", "slot=1M"}, 2, "no setting \"slot\""},
		{[]string{"dta", "collect", "--keywrite", "slots=1M"}, 2, "needs --listen"},
		// usage and validation errors are 2, as the classes' are
		{[]string{"dta", "collect", "--listen", "nohost:x", "--keywrite", "slots=1M"}, 2, `--listen nohost:x: "x" is no port number`},
		{[]string{"dta", "collect", "--listen", "127.0.0.1:99999", "--keywrite", "slots=1M"}, 2, "--listen 127.0.0.1:99999: port 99999 is past 65535"},
		{[]string{"dta", "collect", "--listen", "127.0.0.1:0", "--http", "127.0.0.1", "--keywrite", "slots=1M"}, 2, "--http 127.0.0.1: not HOST:PORT"},
		{[]string{"dta", "collect", "--listen", "127.0.0.1:0", "--keywrite", "slots=0"}, 2, "keywrite slots=0: at least 1"},
		{[]string{"dta", "collect", "--listen", "127.0.0.1:0", "--append", "lists=0,size=10"}, 2, "append lists=0: at least 1"},
		{[]string{"dta", "collect", "--listen", "127.0.0.1:0", "--append", "lists=1M,size=4G"}, 2, "more than half of this machine's"}, // 16 PB
		{[]string{"dta", "query", "--server", "127.0.0.1:99999", "keywrite", "1"}, 2, "--server 127.0.0.1:99999: port 99999 is past 65535"},
		{[]string{"dta", "query", "--server", "localhost", "keywrite", "1"}, 2, "--server localhost: not HOST:PORT"},
		// a port another collector holds is a runtime error
		{[]string{"dta", "collect", "--listen", udp, "--keywrite", "slots=1M"}, 1, "cannot listen"},
		{[]string{"dta", "frobnicate"}, 2, "no command"},
	} {
		r := ffpf(t, c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.msg) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q (want %d, %q)", c.args, r.code, r.stderr, c.code, c.msg)
		}
	}

	cmd.Process.Signal(syscall.SIGINT)
	<-done
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the collector: %v: %s", err, rest.String())
	}
	var st collector.Stats
	if err := json.Unmarshal(stdout.Bytes(), &st); err != nil {
		t.Fatalf("the final counters: %v: %q", err, stdout.String())
	}
	if st.Reports["keywrite"] != 3 || st.Reports["append"] != 12 || st.Reports["keyincrement"] != 2 ||
		st.Reports["postcarding"] != 2 || st.Dropped["short"] != 1 || st.Dropped["socket"] != 0 {
		t.Errorf("final counters %+v", st)
	}
}

// A capture of reports is a source: ffpf run -r reports.pcap
// '(dta-collector,...)' ingests them and shows the counters in --json.
func TestDTACollectorReadsCapture(t *testing.T) {
	file := filepath.Join(t.TempDir(), "reports.pcap")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriter(f)
	w.WriteFileHeader(65535, layers.LinkTypeEthernet)
	add := func(r wire.Report, dport uint16) {
		pl, _ := r.Append(nil)
		eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 0, 0, 2}}
		udp := &layers.UDP{SrcPort: 5000, DstPort: layers.UDPPort(dport)}
		udp.SetNetworkLayerForChecksum(ip)
		buf := gopacket.NewSerializeBuffer()
		gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, udp, gopacket.Payload(pl))
		b := buf.Bytes()
		w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(1700000000, 0), CaptureLength: len(b), Length: len(b)}, b)
	}
	for i := range 100 {
		add(wire.Report{Op: wire.KeyWrite, Redundancy: 2, Key: uint32(i), Data: uint32(1000 + i)}, 40040)
	}
	add(wire.Report{Op: wire.Append, List: 0, Data: 1}, 40040) // not hosted: disabled
	add(wire.Report{Op: wire.KeyWrite, Redundancy: 2, Key: 1, Data: 1}, 53)
	f.Close()
	r := ffpf(t, "run", "-r", file, "--json", `(dta-collector,keywrite="slots=1M")`)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	doc := parseRun(t, r)
	st := doc.Functions[len(doc.Functions)-1].State
	for k, v := range map[string]float64{"frames": 102, "keywrite": 100, "reports": 100, "disabled": 1, "other": 1} {
		if st[k] != v {
			t.Errorf("%s = %v, want %v (state %v)", k, st[k], v, st)
		}
	}
}

// TestDTALimitsAgree: reporter, translator and collector have one set of
// limits (functions/dta/layout). What the collector could never take is
// refused when the request is checked, exit status 2: nine copies of a
// key, a hop past the eight a chunk holds, a list past 2^20-1, a hashed
// size that is a power of two. What the limits allow, at their edges,
// the collector takes: nothing is dropped under redundancy, hop or list.
func TestDTALimitsAgree(t *testing.T) {
	for _, c := range []struct{ expr, msg string }{
		{`(gen) > (dta,op=keywrite,key=ipv4.src,data=pkt.len,redundancy=9,to="127.0.0.1:40040")`, "redundancy=9: a collector takes 1 to 8 copies"},
		{`(gen) > (dta,op=keyincrement,key=ipv4.src,redundancy=9)`, "redundancy=9: a collector takes 1 to 8 copies"},
		{`(gen) > (dta,op=postcarding,key=ipv4.src,hop=8,data=1)`, "hop=8 is past 7"},
		{`(gen) > (dta,op=append,list=1048576,data=1)`, "list=1048576: a collector hosts lists 0 to 1048575"},
		{`(gen) > (dta,op=keywrite,key=ipv4.src,data=pkt.len) > (dta-translator,slots=1048576)`, "slots=1048576 is a power of two"},
		{`(gen) > (dta,op=keywrite,key=ipv4.src,data=pkt.len) > (dta-translator,counters=1048576)`, "counters=1048576 is a power of two"},
		{`(gen) > (dta,op=keywrite,key=ipv4.src,data=pkt.len) > (dta-translator,chunks=65536)`, "chunks=65536 is a power of two"},
		{`(gen) > (dta,op=keywrite,key=ipv4.src,data=pkt.len) > (dta-translator,copies=9)`, "copies is 1 to 8"},
		{`(gen) > (dta-collector,keywrite="slots=1048576")`, "slots=1048576 is a power of two"},
		{`(gen) > (dta-collector,keywrite="slots=1009,redundancy=9")`, "redundancy=9: a collector takes 1 to 8 copies"},
	} {
		if r := ffpf(t, "check", c.expr); r.code != 2 || !strings.Contains(r.stderr, c.msg) {
			t.Errorf("check %s: exit %d, %q; want exit 2, %q", c.expr, r.code, r.stderr, c.msg)
		}
	}
	// The edges, from the reporter to a collector in one graph.
	src := `(gen,packets=2000) > (bpf,"ip")`
	r := ffpf(t, "run", "--json", "-e", src+` > (dta,op=keywrite,key=ipv4.src,data=pkt.len,redundancy=8) > (dta-collector,keywrite="slots=100003,redundancy=8")`,
		"-e", src+` > (dta,op=keyincrement,key=ipv4.dst,redundancy=8) > (dta-collector,keyincrement="slots=100003,redundancy=8")`,
		"-e", src+` > (dta,op=postcarding,key=ipv4.src,hop=7,data=5) > (dta-collector,postcarding="chunks=10007,hops=8,redundancy=8,values=10")`,
		"-e", src+` > (dta,op=append,list=1048575,data=ipv4.src) > (dta-collector,append="lists=1Mi,size=4")`)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	doc := parseRun(t, r)
	ingested := 0
	for _, i := range doc.byClass("dta-collector") {
		st := doc.Functions[i].State
		for _, why := range []string{"redundancy", "hop", "list", "value", "disabled", "short", "other"} {
			if n := stateNum(t, st[why]); n != 0 {
				t.Errorf("%s: %d reports dropped under %s (state %v)", doc.Functions[i].Params, n, why, st)
			}
		}
		n := stateNum(t, st["keywrite"]) + stateNum(t, st["keyincrement"]) + stateNum(t, st["postcarding"]) + stateNum(t, st["append"])
		if n == 0 || n != stateNum(t, st["frames"]) {
			t.Errorf("%v: %d of %d frames ingested", doc.Functions[i].Params, n, stateNum(t, st["frames"]))
		}
		ingested++
	}
	if ingested != 4 {
		t.Errorf("%d collectors", ingested)
	}
}
