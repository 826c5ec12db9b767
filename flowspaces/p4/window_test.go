package p4

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// A count-min sketch with window= on the switch: the controller follows
// its windows (the digest of each window's first packet, the half read,
// the drained table written, the Go half ticked at the window's end) and
// at the end reads the window open; the last window's counts are those
// the same sketch keeps in userspace on the same packets at the same
// times, and the switch measured every packet.
func TestRunWindows(t *testing.T) {
	user, got := runWindowed(t, `(cms,key=5tuple,width=16,depth=2,window=1024us)`, "cms", "")
	for _, k := range []string{"total", "nokey"} {
		if got.State[k] != user.State[k] || got.State[k] == nil {
			t.Errorf("the last window's %s: %v on the switch, %v in userspace", k, got.State[k], user.State[k])
		}
	}
	if fmt.Sprint(got.State["total"]) != fmt.Sprint(40) {
		t.Errorf("the last window's total %v, want its 40 packets", got.State["total"])
	}
}

// A counter with window= and report= on the switch: its Go half reports
// each window from the half the controller read, and the records are
// those the same counter writes in userspace.
func TestRunWindowReports(t *testing.T) {
	runWindowed(t, `(counter,window=1024us,report=1) > (export,file=%s,format=jsonl)`, "counter", "jsonl")
}

// runWindowed runs expr on packets over six windows in userspace and on
// the switch, checks that the switch measured every packet and, when
// expr exports to a file (its name a %s, of extension ext), that both
// exported the same, and returns the function of class's state in both.
func runWindowed(t *testing.T, expr, class, ext string) (user, got flowgraph.FunctionState) {
	t.Helper()
	dir := t.TempDir()
	const (
		window  = 1024 // µs: window=1024us
		windows = 6
		per     = 40 // packets a window, more than the table's 16 cells
	)
	type pkt struct {
		data []byte
		us   uint64
	}
	var pkts []pkt
	protos := []byte{6, 17, 1, 6, 6}
	for w := range windows {
		for i := range per {
			pkts = append(pkts, pkt{frame(protos[(w+i)%len(protos)], byte(i%3), 60+i), uint64(w*window + 3 + i*20)})
		}
	}

	// Userspace, on a capture file of the packets at their times.
	trace := filepath.Join(dir, "t.pcap")
	f, err := os.Create(trace)
	if err != nil {
		t.Fatal(err)
	}
	pw := pcapgo.NewWriter(f)
	pw.WriteFileHeader(65535, layers.LinkTypeEthernet)
	for _, p := range pkts {
		pw.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(0, int64(p.us)*1000), CaptureLength: len(p.data), Length: len(p.data)}, p.data)
	}
	f.Close()
	userOut := filepath.Join(dir, "user."+ext)
	rt := flowgraph.New(flowgraph.Config{})
	ureq, err := rt.Populate(withFile(expr, userOut), flowgraph.RequestOptions{DefaultSource: "(pcap,file=" + trace + ")"})
	if err != nil {
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
	user = state(ureq, class)
	rt.Close()

	// The switch, packets in at the same times on its clock.
	m := startModel(t, 1, p4gen.Tofino1())
	root, sw := switchUnder(t, m.addr, 1)
	swOut := filepath.Join(dir, "switch."+ext)
	rt = flowgraph.New(flowgraph.Config{Hierarchy: root})
	defer rt.Close()
	req, err := rt.Populate(withFile(expr, swOut), flowgraph.RequestOptions{DefaultSource: "(dev,swp1)"})
	if err != nil {
		t.Fatal(err)
	}
	for _, fn := range rt.Plan().Functions {
		if fn.Class == class && fn.Flowspace != "tor" {
			t.Fatalf("the windowed %s runs in %s, not on the switch: %v", class, fn.Flowspace, fn.PassedOver)
		}
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := rt.Activate(ctx); err != nil {
		t.Fatal(err)
	}
	began := 0
	for i, p := range pkts {
		m.dev.Receive(2, p.data, p.us)
		if i == 0 || p.us/window != pkts[i-1].us/window {
			// The controller reads the window that ended before its half's
			// parity comes round again.
			began++
			waitHandled(t, sw, began)
		}
	}
	cancel()
	rt.Stop()
	got = state(req, class)
	if got.Dropped != 0 || got.In != uint64(len(pkts)) {
		t.Errorf("%s on the switch: in %d, not measured %d; want %d and 0", class, got.In, got.Dropped, len(pkts))
	}
	if sw.wins.Load() != nil {
		t.Error("the windows are still followed after the run")
	}
	if ext == "" {
		return user, got
	}
	a, errA := os.ReadFile(userOut)
	b, errB := os.ReadFile(swOut)
	if errA != nil || errB != nil || string(a) != string(b) || len(a) == 0 {
		t.Errorf("exported in userspace (%v):\n%s\non the switch (%v):\n%s", errA, a, errB, b)
	}
	return user, got
}

// withFile puts file into expr where it has a %s.
func withFile(expr, file string) string {
	if strings.Contains(expr, "%s") {
		return fmt.Sprintf(expr, file)
	}
	return expr
}

func state(req *flowgraph.Request, class string) flowgraph.FunctionState {
	for _, f := range req.Functions() {
		if f.Class == class {
			return f
		}
	}
	return flowgraph.FunctionState{}
}

// waitHandled waits until the controller has handled n window digests
// (read the windows they say ended).
func waitHandled(t *testing.T, sw *Flowspace, n int) {
	t.Helper()
	ws := sw.wins.Load()
	if ws == nil {
		t.Fatal("the switch follows no window")
	}
	for deadline := time.Now().Add(10 * time.Second); ws.handled.Load() < int64(n); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the controller handled %d window digests, want %d", ws.handled.Load(), n)
		}
	}
}
