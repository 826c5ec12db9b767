package p4

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/p4/controller"
	"github.com/ffpf-go/ffpf/flowspaces/p4/pisa"
	"github.com/ffpf-go/ffpf/flowspaces/p4/server"
	"github.com/ffpf-go/ffpf/flowspaces/user"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// model is the PISA model serving P4Runtime on a loopback port, in this
// process: the switch a run controls.
type model struct {
	dev  *pisa.Device
	srv  *server.Server
	addr string
}

func startModel(t testing.TB, device uint64, prof p4gen.Profile) *model {
	t.Helper()
	dev := pisa.NewDevice(DefaultCPUPort, nil, 0)
	srv := server.New(dev, server.Options{DeviceID: device, Profile: prof})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	srv.Register(g)
	go g.Serve(l)
	t.Cleanup(func() { g.Stop(); srv.Close() })
	return &model{dev: dev, srv: srv, addr: l.Addr().String()}
}

// sinkRegistry is testRegistry with a sink that counts the packets it
// gets, in userspace.
func sinkRegistry(t *testing.T, got *atomic.Uint64) *functions.Registry {
	reg := testRegistry(t)
	c := &functions.Class{Name: "gosink", MinInputs: 1, MaxInputs: -1,
		New: func(*functions.Context) (functions.Function, error) {
			return &goFunc{f: func(b *buffers.Batch) { got.Add(uint64(b.N)) }}, nil
		}}
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	return reg
}

func switchUnder(t testing.TB, addr string, device uint64) (flowspaces.Flowspace, *Flowspace) {
	t.Helper()
	root := user.New(user.Options{Name: "user"})
	sw, err := New(Options{Name: "tor", Address: addr, DeviceID: device, UplinkCPU: true,
		Ports: map[string]uint16{"swp1": 2}, Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := flowspaces.Attach(root, sw, "CPU port", flowspaces.CopyOnce); err != nil {
		t.Fatal(err)
	}
	return root, sw
}

// ffpf as the controller of the model: the program pushed, the packets
// that the switch's filter passed up through the CPU port to a function
// in userspace, and only those; the state of the switch's functions read
// into their MBufs, their in and out from the accounting; what was
// installed removed at the end.
func TestRunAsController(t *testing.T) {
	m := startModel(t, 1, p4gen.Tofino1())
	var got atomic.Uint64
	root, _ := switchUnder(t, m.addr, 1)
	rt := flowgraph.New(flowgraph.Config{Registry: sinkRegistry(t, &got), Hierarchy: root})
	defer rt.Close()
	req, err := rt.Populate(`(cap,if=swp1) > f:(proto,n=6) > [(pcount) | (maxlen) | (gosink)]`, flowgraph.RequestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := rt.Activate(ctx); err != nil {
		t.Fatal(err)
	}
	var tcp uint64
	for i := range 300 {
		proto := byte(17)
		if i%3 != 0 {
			proto, tcp = 6, tcp+1
		}
		m.dev.Receive(2, frame(proto, byte(i%5), 60+i), uint64(i))
	}
	m.dev.Receive(3, frame(6, 1, 60), 400) // not a port of the hierarchy's: dropped
	deadline := time.Now().Add(10 * time.Second)
	for got.Load() < tcp && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	rt.Stop()
	if n := got.Load(); n != tcp {
		t.Fatalf("userspace got %d packets from the switch, want the %d TCP ones", n, tcp)
	}
	st := map[string]flowgraph.FunctionState{}
	for _, f := range req.Functions() {
		st[f.Class] = f
	}
	if f := st["proto"]; f.In != 300 || f.Out != tcp || f.Filtered != 300-tcp || f.Flowspace != "tor" {
		t.Errorf("proto: in %d out %d filtered %d in %s; want 300, %d, %d on tor", f.In, f.Out, f.Filtered, f.Flowspace, tcp, 300-tcp)
	}
	if f := st["pcount"]; f.State["packets"] != tcp {
		t.Errorf("pcount's state %v, want %d packets", f.State, tcp)
	}
	// maxlen: the largest TCP frame per source MAC byte (i%5).
	want := make([]uint32, 16)
	for i := range 300 {
		if i%3 != 0 {
			want[i%5] = max(want[i%5], uint32(60+i))
		}
	}
	if f := st["maxlen"]; !sameCells(f.State["max"], want) {
		t.Errorf("maxlen's state %v, want %v", f.State["max"], want)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	// Nothing stays installed: a new controller finds no digest
	// configured and can push its own.
	c, err := controller.Dial(controller.Options{Address: m.addr, DeviceID: 1, ElectionID: controller.Uint128{Low: 2}})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func sameCells(v any, want []uint32) bool {
	xs, ok := v.([]any)
	if !ok || len(xs) != len(want) {
		return false
	}
	for i, x := range xs {
		if x != want[i] {
			return false
		}
	}
	return true
}

// A switch that answers as another device, or refuses the program: the
// run fails with the switch's message and nothing is installed.
func TestRunRefused(t *testing.T) {
	m := startModel(t, 1, p4gen.Tofino1())
	root, _ := switchUnder(t, m.addr, 7)
	rt := flowgraph.New(flowgraph.Config{Registry: testRegistry(t), Hierarchy: root})
	if _, err := rt.Populate(`(cap,if=swp1) > (proto,n=6) > (pcount)`, flowgraph.RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	err := rt.Instantiate()
	if err == nil || !strings.Contains(err.Error(), "no device 7 (this is device 1)") {
		t.Errorf("another device: %v", err)
	}
	rt.Close()

	small := p4gen.Tofino1()
	small.Stages = 1
	m = startModel(t, 1, small)
	root, _ = switchUnder(t, m.addr, 1)
	rt = flowgraph.New(flowgraph.Config{Registry: testRegistry(t), Hierarchy: root})
	defer rt.Close()
	if _, err := rt.Populate(`(cap,if=swp1) > (proto,n=6) > (pcount)`, flowgraph.RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	err = rt.Instantiate()
	if err == nil || !strings.Contains(err.Error(), "refused to take the pipeline") {
		t.Errorf("a switch of one stage: %v", err)
	}
	if m.dev.Loaded() {
		t.Error("the refused pipeline is loaded")
	}
}

// Packets the switch sent up but that never came (its server drops
// PacketIns a slow controller leaves waiting, and the run stops with
// some in flight) are the bridge's dropped: in = out + dropped holds, and
// nothing is lost silently.
func TestRunLossCounted(t *testing.T) {
	m := startModel(t, 1, p4gen.Tofino1())
	var got atomic.Uint64
	root, _ := switchUnder(t, m.addr, 1)
	// A userspace function that holds its first batch until the switch
	// has sent everything: the controller falls behind the switch.
	release := make(chan struct{})
	reg := testRegistry(t)
	if err := reg.Register(&functions.Class{Name: "gosink", MinInputs: 1, MaxInputs: -1,
		New: func(*functions.Context) (functions.Function, error) {
			return &goFunc{f: func(b *buffers.Batch) { <-release; got.Add(uint64(b.N)) }}, nil
		}}); err != nil {
		t.Fatal(err)
	}
	rt := flowgraph.New(flowgraph.Config{Registry: reg, Hierarchy: root})
	defer rt.Close()
	req, err := rt.Populate(`(cap,if=swp1) > (proto,n=6) > (gosink)`, flowgraph.RequestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := rt.Activate(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 20000 // 28 MB: more than the server, gRPC and the bridge hold
	for i := range n {
		m.dev.Receive(2, frame(6, 1, 1400), uint64(i))
	}
	close(release)
	time.Sleep(50 * time.Millisecond)
	cancel()
	rt.Stop()
	var proto flowgraph.FunctionState
	for _, f := range req.Functions() {
		if f.Class == "proto" {
			proto = f
		}
	}
	var b flowgraph.BridgeState
	for _, x := range rt.Bridges() {
		if x.From == "tor" {
			b = x
		}
	}
	if proto.Out != n || b.In != n || b.In != b.Out+b.Dropped || b.Out != got.Load() || b.Dropped == 0 {
		t.Errorf("the filter passed %d; the bridge in %d out %d dropped %d; userspace got %d", proto.Out, b.In, b.Out, b.Dropped, got.Load())
	}
	t.Logf("%d of %d lost on the way up", b.Dropped, n)
}

// bmv2 is the model's server refusing register reads over P4Runtime, as
// bmv2's does (p4lang/PI#376).
type bmv2 struct{ *server.Server }

func (b bmv2) Read(r *p4v1.ReadRequest, rs p4v1.P4Runtime_ReadServer) error {
	for _, e := range r.Entities {
		if e.GetRegisterEntry() != nil {
			return status.Error(codes.Unimplemented, "register reads are not supported")
		}
	}
	return b.Server.Read(r, rs)
}

// On a switch that serves no register reads, a function whose state is
// in registers ends the run with a sentence naming it and the register,
// rather than show state it cannot read; counters are read as always.
func TestRunNoRegisterReads(t *testing.T) {
	dev := pisa.NewDevice(DefaultCPUPort, nil, 0)
	srv := server.New(dev, server.Options{DeviceID: 1, Profile: p4gen.Tofino1()})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	p4v1.RegisterP4RuntimeServer(g, bmv2{srv})
	go g.Serve(l)
	defer func() { g.Stop(); srv.Close() }()
	root, _ := switchUnder(t, l.Addr().String(), 1)
	rt := flowgraph.New(flowgraph.Config{Registry: testRegistry(t), Hierarchy: root})
	defer rt.Close()
	if _, err := rt.Populate(`(cap,if=swp1) > (pcount) > (maxlen)`, flowgraph.RequestOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Instantiate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rt.Activate(ctx); err != nil {
		t.Fatal(err)
	}
	err = rt.Wait()
	if err == nil || !strings.Contains(err.Error(), "maxlen#1's state is in register maxlen_1_max") ||
		!strings.Contains(err.Error(), "register reads are not supported") || ctx.Err() != nil {
		t.Errorf("a run on a switch without register reads: %v (timed out: %v)", err, ctx.Err())
	}
}
