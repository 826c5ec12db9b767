package controller

import (
	"net"
	"strings"
	"testing"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"

	"github.com/ffpf-go/ffpf/functions/p4gen"
)

func dial(t *testing.T, addr string, device uint64, opts ...func(*Options)) (*Client, error) {
	t.Helper()
	o := Options{Address: addr, DeviceID: device, Timeout: 3 * time.Second}
	for _, f := range opts {
		f(&o)
	}
	return Dial(o)
}

func TestDialAnotherDevice(t *testing.T) {
	addr := startFake(t, &fake{device: 1})
	_, err := dial(t, addr, 7)
	if err == nil || !strings.Contains(err.Error(), "this switch is device 1, not 7") {
		t.Fatalf("dialling device 7 of device 1: %v, want the server's message", err)
	}
	// A switch that answers the arbitration as another device.
	addr = startFake(t, &fake{device: 1, answerAs: 3})
	_, err = dial(t, addr, 1)
	if err == nil || !strings.Contains(err.Error(), "is device 3, not device 1") {
		t.Fatalf("a switch answering as device 3: %v", err)
	}
}

func TestDialUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	start := time.Now()
	_, err = dial(t, addr, 1)
	if err == nil || !strings.Contains(err.Error(), "cannot reach the switch at "+addr) {
		t.Fatalf("dialling a closed port: %v", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("the error is not one sentence: %q", err)
	}
	if d := time.Since(start); d > 3*time.Second+time.Second {
		t.Errorf("a refused connection took %v", d)
	}
}

func TestDialSilentTimesOut(t *testing.T) {
	// A listener that accepts and never speaks HTTP/2.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	_, err = dial(t, l.Addr().String(), 1, func(o *Options) { o.Timeout = 300 * time.Millisecond })
	if err == nil || !strings.Contains(err.Error(), "did not answer within 300ms") {
		t.Fatalf("a silent switch: %v", err)
	}
}

func TestNotPrimary(t *testing.T) {
	f := &fake{device: 1}
	addr := startFake(t, f)
	a, err := dial(t, addr, 1, func(o *Options) { o.ElectionID = Uint128{Low: 10} })
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	_, err = dial(t, addr, 1, func(o *Options) { o.ElectionID = Uint128{Low: 5} })
	if err == nil || !strings.Contains(err.Error(), "another primary controller: election id 10 is primary") {
		t.Fatalf("a lower election id: %v", err)
	}
}

func TestPipelineRefused(t *testing.T) {
	addr := startFake(t, &fake{device: 1, refuse: "register cms_2_row0 needs 10 Mb in one stage"})
	c, err := dial(t, addr, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.SetPipeline(testInfo(), []byte("{}"))
	if err == nil || !strings.Contains(err.Error(), "refused to take the pipeline: register cms_2_row0 needs 10 Mb in one stage") {
		t.Fatalf("a refused pipeline: %v", err)
	}
}

func TestInstallReadRemove(t *testing.T) {
	f := &fake{device: 1,
		counters: map[uint32][]*p4v1.CounterData{0x12000001: {{PacketCount: 5, ByteCount: 300}, {}, {PacketCount: 1, ByteCount: 60}}},
		regs:     map[uint32][]uint64{0x16000001: {0, 7, 0xffffffff, 1}}}
	addr := startFake(t, f)
	c, err := dial(t, addr, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadCounter("ffpf_ingress.pktcount_2_c"); err != errNoPipeline {
		t.Errorf("a read before the pipeline: %v", err)
	}
	if err := c.SavePipeline(testInfo(), []byte(`{"program":"t"}`)); err != nil {
		t.Fatal(err)
	}
	if string(f.pipeline.P4DeviceConfig) != `{"program":"t"}` || f.pipeline.P4Info.Tables[0].Preamble.Name != "ffpf_ingress.bpf_1_t" {
		t.Errorf("the switch got %v", f.pipeline)
	}
	e, err := c.TableEntry("ffpf_ingress.bpf_1_t", p4gen.Entry{Match: []p4gen.Match{{Value: 6, Mask: 0xff}, {Value: 80}}, Priority: 10, Args: []uint64{0x1ff}},
		"ffpf_ingress.bpf_1_pass")
	if err != nil {
		t.Fatal(err)
	}
	dc, err := c.DigestConfig("counter_4_report_t")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Insert(e, CloneSession(5, 255), dc); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	if a := f.actions; len(a) != 2 || a[0] != p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_SAVE || a[1] != p4v1.SetForwardingPipelineConfigRequest_COMMIT {
		t.Errorf("pipeline actions %v, want VERIFY_AND_SAVE then COMMIT", a)
	}
	if got := len(f.installed()); got != 3 || c.Installed() != 3 {
		t.Fatalf("%d entities installed, client says %d; want 3", got, c.Installed())
	}
	te := f.installed()[0].GetTableEntry()
	if te.Priority != 10 || len(te.Match) != 2 || string(te.Match[0].GetTernary().Value) != "\x06" ||
		string(te.Match[1].GetExact().Value) != "\x00\x50"[1:] || string(te.Action.GetAction().Params[0].Value) != "\x01\xff" {
		t.Errorf("table entry as written: %v", te)
	}
	cells, err := c.ReadCounter("ffpf_ingress.pktcount_2_c")
	if err != nil {
		t.Fatal(err)
	}
	if len(cells) != 3 || cells[0] != (Cell{5, 300}) || cells[1] != (Cell{}) || cells[2] != (Cell{1, 60}) {
		t.Errorf("counter cells %v", cells)
	}
	regs, err := c.ReadRegister("ffpf_ingress.hll_3_m")
	if err != nil {
		t.Fatal(err)
	}
	if len(regs) != 4 || regs[1] != 7 || regs[2] != 0xffffffff || regs[3] != 1 {
		t.Errorf("register cells %v", regs)
	}
	if err := c.ZeroCounter("ffpf_ingress.pktcount_2_c"); err != nil {
		t.Fatal(err)
	}
	if err := c.ZeroRegister("ffpf_ingress.hll_3_m", 32); err != nil {
		t.Fatal(err)
	}
	cells, _ = c.ReadCounter("ffpf_ingress.pktcount_2_c")
	regs, _ = c.ReadRegister("ffpf_ingress.hll_3_m")
	if cells[0] != (Cell{}) || cells[2] != (Cell{}) || regs[1] != 0 || regs[2] != 0 {
		t.Errorf("after zeroing: counter %v, register %v", cells, regs)
	}
	if _, err := c.ReadCounter("nope"); err == nil {
		t.Error("a read of an unknown counter succeeded")
	}
	// An entity the switch already has: refused, not remembered.
	if err := c.Insert(e); err == nil || !strings.Contains(err.Error(), "refused to insert an entry of table 33554433: the entity exists") {
		t.Errorf("a duplicate entry: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := f.installed(); len(got) != 0 {
		t.Errorf("%d entities left on the switch after Close: %v", len(got), got)
	}
}

func TestTernaryDontCareLeftOut(t *testing.T) {
	addr := startFake(t, &fake{device: 1})
	c, err := dial(t, addr, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetPipeline(testInfo(), nil); err != nil {
		t.Fatal(err)
	}
	e, err := c.TableEntry("ffpf_ingress.bpf_1_t", p4gen.Entry{Match: []p4gen.Match{{Value: 6, Mask: 0}, {Value: 0}}, Args: []uint64{0}}, "ffpf_ingress.bpf_1_pass")
	if err != nil {
		t.Fatal(err)
	}
	if m := e.GetTableEntry().Match; len(m) != 1 || m[0].FieldId != 2 || string(m[0].GetExact().Value) != "\x00" {
		t.Errorf("matches %v: want the exact key alone, value 0 as one zero byte", m)
	}
}

func TestDigestsAndPackets(t *testing.T) {
	f := &fake{device: 1}
	addr := startFake(t, f)
	digests := make(chan DigestList, 4)
	packets := make(chan PacketIn, 4)
	c, err := dial(t, addr, 1, func(o *Options) {
		o.OnDigest = func(d DigestList) { digests <- d }
		o.OnPacket = func(p PacketIn) { packets <- p }
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetPipeline(testInfo(), nil); err != nil {
		t.Fatal(err)
	}
	bs := func(b []byte) *p4v1.P4Data { return &p4v1.P4Data{Data: &p4v1.P4Data_Bitstring{Bitstring: b}} }
	f.stream().Send(&p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Digest{Digest: &p4v1.DigestList{
		DigestId: 0x17000001, ListId: 42, Timestamp: 99,
		Data: []*p4v1.P4Data{{Data: &p4v1.P4Data_Struct{Struct: &p4v1.P4StructLike{Members: []*p4v1.P4Data{bs([]byte{0x0a, 0, 0, 1}), bs([]byte{0x01, 0x00})}}}}}}}})
	select {
	case d := <-digests:
		if d.Name != "counter_4_report_t" || d.ListID != 42 || len(d.Values) != 1 || d.Values[0][0] != 0x0a000001 || d.Values[0][1] != 256 || d.Timestamp != 99 {
			t.Errorf("digest %+v", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no digest")
	}
	select {
	case a := <-f.acks:
		if a.DigestId != 0x17000001 || a.ListId != 42 {
			t.Errorf("ack %v", a)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the digest list was not acknowledged")
	}
	f.stream().Send(&p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Packet{Packet: &p4v1.PacketIn{
		Payload: []byte("frame"), Metadata: []*p4v1.PacketMetadata{{MetadataId: 1, Value: []byte{0x01, 0x02}}}}}})
	select {
	case p := <-packets:
		if string(p.Payload) != "frame" || p.Metadata["ingress_port"] != 0x102 {
			t.Errorf("packet in %+v", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no packet in")
	}
	if err := c.PacketOut([]byte("out"), map[string]uint64{"egress_port": 2}); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-f.outs:
		if string(p.Payload) != "out" || len(p.Metadata) != 1 || string(p.Metadata[0].Value) != "\x02" {
			t.Errorf("packet out %v", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no packet out")
	}
}

func TestBytes(t *testing.T) {
	for _, c := range []struct {
		v    uint64
		w    int
		want string
	}{{0, 8, "\x00"}, {0x1ff, 9, "\x01\xff"}, {0x3ff, 9, "\x01\xff"}, {1 << 40, 48, "\x01\x00\x00\x00\x00\x00"}, {^uint64(0), 64, "\xff\xff\xff\xff\xff\xff\xff\xff"}} {
		if got := string(Bytes(c.v, c.w)); got != c.want {
			t.Errorf("Bytes(%#x, %d) = %q, want %q", c.v, c.w, got, c.want)
		}
		if Uint(Bytes(c.v, c.w)) != c.v&p4gen.Bit(c.w).Mask() {
			t.Errorf("Uint(Bytes(%#x)) does not round-trip", c.v)
		}
	}
}
