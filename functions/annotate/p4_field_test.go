package annotate_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/gen"
	"github.com/ffpf-go/ffpf/functions/internal/p4test"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// A tag with field= on a switch writes the field of the packet itself:
// what leaves the switch is, byte for byte, the copy tag makes in Go, for
// every field a switch writes, with the checksum kept right or kept as it
// was, on generated traffic and adversarial frames cut at every length.
func TestP4FieldTagEqualsGo(t *testing.T) {
	ps := p4test.Trace(gen.Config{Seed: 31, Packets: 1500, Malformed: 0.1, VLAN: 0.2, IPv6: 0.2})
	ps = append(ps, p4test.Packets(p4test.Cuts(p4test.Adversarial()))...)
	for _, field := range []string{"ipv4.tos", "ipv4.ttl", "ipv4.id", "ipv4.csum"} {
		for _, keep := range []string{"update", "keep"} {
			expr := fmt.Sprintf(`(tag,field=%s,value="ipv4.tos + 0x1a3",checksum=%s)`, field, keep)
			fn := p4test.Parse(t, expr)
			// Not fn.P4: placement keeps the tag above a switch below a
			// host; a path's program asks the class for its code itself.
			code, err := fn.Class.P4(fn.Context("tag#1", functions.TargetP4))
			if err != nil {
				t.Fatalf("%s: %v", expr, err)
			}
			prog, _, err := p4gen.Assemble("tag", []p4gen.Node{{ID: "tag#1", Fn: code}}, p4test.Uplink)
			if err != nil {
				t.Fatal(err)
			}
			p4test.Check(t, prog)
			sw := p4test.Install(prog)
			ctx := fn.Context("tag#1", "")
			if err := fn.Class.Validate(ctx); err != nil {
				t.Fatal(err)
			}
			gofn, err := fn.Class.New(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var copies [][]byte
			gofn.(functions.Producer).SetEmit(func(b *buffers.Batch) {
				for _, e := range b.E[:b.N] {
					copies = append(copies, append([]byte(nil), b.PBuf.Data(e.Slot)...))
				}
			})
			written := 0
			for i, p := range ps {
				r, err := sw.Process(p4gen.Arrival{Data: p.Data, Port: 2, Time: p4test.Time(p.Time)})
				if err != nil {
					t.Fatal(err)
				}
				pb := buffers.NewPBuf(1, gen.MaxFrameLen)
				b := buffers.NewBatch(pb, 0, 1, 0)
				b.Append(p.Data, uint32(len(p.Data)), p.Time)
				copies = copies[:0]
				gofn.Process(b)
				if len(r.Out) != 1 || len(copies) != 1 {
					t.Fatalf("%s: packet %d: %d left the switch, %d copies", expr, i, len(r.Out), len(copies))
				}
				if !bytes.Equal(r.Out[0].Data, copies[0]) {
					t.Fatalf("%s: packet %d\nswitch % x\nGo     % x", expr, i, r.Out[0].Data, copies[0])
				}
				if !bytes.Equal(p.Data, copies[0]) {
					written++
				}
			}
			if written < len(ps)/4 {
				t.Errorf("%s: %d of %d packets written", expr, written, len(ps))
			}
		}
	}
}
