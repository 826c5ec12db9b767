package pisa

import (
	"encoding/binary"
	"testing"

	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// queueProgram forwards everything to port 2 and writes, in egress, the
// queue's depths into the IPv4 header: enq_qdepth into the TOS byte,
// deq_qdepth into the TTL and the µs the packet waited into the total
// length, so that the frames that leave show the queue.
func queueProgram(t *testing.T) *p4gen.Program {
	p := p4gen.NewProgram("q")
	p.Ingress = []p4gen.Stmt{p4gen.Assign{Dst: p4gen.Std("egress_spec"), X: p4gen.C(2, 9)}}
	p.Egress = []p4gen.Stmt{p4gen.If{Cond: p4gen.Valid{Header: "ipv4_dst_2"}, Then: []p4gen.Stmt{
		p4gen.Assign{Dst: p4gen.F("ipv4_tos", "diffserv"), X: p4gen.Cast{Bits: 8, X: p4gen.Std("enq_qdepth")}},
		p4gen.Assign{Dst: p4gen.F("ipv4_ttl", "ttl"), X: p4gen.Cast{Bits: 8, X: p4gen.Std("deq_qdepth")}},
		p4gen.Assign{Dst: p4gen.F("ipv4_len", "total_len"), X: p4gen.Cast{Bits: 16, X: p4gen.Std("deq_timedelta")}},
	}}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return p
}

// Ten frames at once on a port drained at 1,000 packets a second: the
// first leaves at once; the k-th after it waits k ms behind k-1 others
// and leaves 8-k behind it; a queue of 8 drops the tenth.
func TestDeviceQueue(t *testing.T) {
	m, err := Load(queueProgram(t), p4gen.Tofino1())
	if err != nil {
		t.Fatal(err)
	}
	d := NewDevice(255, map[uint16]float64{2: 1000}, 8)
	type got struct{ enq, deq, waited int }
	var outs []got
	d.Out = func(port uint16, f []byte) {
		if port != 2 {
			t.Errorf("a frame left on port %d", port)
		}
		ip := f[14:]
		outs = append(outs, got{int(ip[1]), int(ip[8]), int(binary.BigEndian.Uint16(ip[2:]))})
	}
	d.Receive(1, tcpFrame(), 0) // no pipeline yet
	d.Load(m)
	for range 10 {
		d.Receive(1, tcpFrame(), 5)
	}
	d.Advance(2005) // the first three are due (at 5, 1005, 2005)
	if len(outs) != 3 {
		t.Fatalf("%d frames left by 2005 µs, want 3", len(outs))
	}
	d.Flush()
	if len(outs) != 9 {
		t.Fatalf("%d frames left, want 9", len(outs))
	}
	if outs[0] != (got{0, 0, 0}) {
		t.Errorf("the first frame: %+v, want it sent at once", outs[0])
	}
	for k, o := range outs[1:] {
		k++
		if o.enq != k-1 || o.deq != 8-k || o.waited != 1000*k {
			t.Errorf("frame %d: enq_qdepth %d, deq_qdepth %d, waited %d µs; want %d, %d, %d", k, o.enq, o.deq, o.waited, k-1, 8-k, 1000*k)
		}
	}
	s := d.Stats()
	if s.In != 11 || s.NoPipeline != 1 || s.QueueDrops != 1 || s.Out != 9 || s.Ingressed != 10 {
		t.Errorf("stats %+v", s)
	}
}

func tcpFrame() []byte {
	b := make([]byte, 14+20+20)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	b[14], b[14+9], b[14+8] = 0x45, 6, 64
	binary.BigEndian.PutUint16(b[16:], 40)
	return b
}
