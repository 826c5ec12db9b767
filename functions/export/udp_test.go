package export_test

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ffpf-go/ffpf/flowgraph"
	_ "github.com/ffpf-go/ffpf/functions/counters"
	"github.com/ffpf-go/ffpf/internal/graphtest"
)

// TestExportTo: export with to= sends each packet, its captured bytes, as
// one datagram to the collector, in order, and passes it on.
func TestExportTo(t *testing.T) {
	l, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.SetReadBuffer(8 << 20); err != nil {
		t.Fatal(err)
	}
	const n = 300
	rt := flowgraph.New(flowgraph.Config{})
	defer rt.Close()
	file := filepath.Join(t.TempDir(), "sent.pcap")
	if _, err := rt.Populate("(gen,packets=300,seed=5) > (export,file="+file+") > (export,to="+l.LocalAddr().String()+") > (pktcount)", flowgraph.RequestOptions{}); err != nil {
		t.Fatal(err)
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
	var got [][]byte
	buf := make([]byte, 4096)
	for len(got) < n {
		l.SetReadDeadline(time.Now().Add(5 * time.Second))
		k, err := l.Read(buf)
		if err != nil {
			t.Fatalf("after %d datagrams: %v", len(got), err)
		}
		got = append(got, append([]byte(nil), buf[:k]...))
	}
	sent, _ := graphtest.ReadPcap(t, file)
	if len(sent) != n {
		t.Fatalf("%d packets sent", len(sent))
	}
	for i := range n {
		if !bytes.Equal(got[i], sent[i]) {
			t.Fatalf("datagram %d is not packet %d", i, i)
		}
	}
	for _, f := range rt.Functions() {
		if f.Class == "export" && f.Params["to"] != nil && (f.In != n || f.Out != n || f.Dropped != 0) {
			t.Errorf("export: in %d out %d dropped %d", f.In, f.Out, f.Dropped)
		}
	}
	for _, bad := range []string{"(gen) > (export,to=nohostport)", "(gen) > (export,file=a.pcap,to=1.2.3.4:5)", "(gen) > (export,to=1.2.3.4:5,format=pcap)"} {
		rt := flowgraph.New(flowgraph.Config{})
		if _, err := rt.Populate(bad, flowgraph.RequestOptions{}); err == nil || !strings.Contains(err.Error(), "to") {
			t.Errorf("%s: %v", bad, err)
		}
		rt.Close()
	}
}
