package annotate

import (
	"fmt"
	"time"

	"github.com/cilium/ebpf/asm"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/ebpfgen"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

func init() {
	functions.Register(&functions.Class{
		Name:      "timestamp",
		Summary:   "annotate each packet with a time, the packet clock's or the wall clock's when processed (MAFIA's Timestamp)",
		MinInputs: 1, MaxInputs: -1,
		Concurrency: functions.Stateless,
		Params: []functions.Param{
			{Name: "clock", Type: functions.String, Default: "packet", Enum: []string{"packet", "wall"},
				Summary: "packet: the packet's capture time; wall: the time the function processed it"},
		},
		Targets: []functions.Target{functions.TargetUser, functions.TargetKernel, functions.TargetXDP, functions.TargetP4},
		Code: functions.Codes(
			functions.EBPFCode(func(ctx *functions.Context) (ebpfgen.Function, error) { return ebpfTimestamp{at: ctx.Ann}, nil }),
			functions.P4Code(func(*functions.Context) (p4gen.Function, error) { return p4Timestamp{}, nil })),
		Annotates: 1,
		Readable:  func(p functions.Params) []string { return timestampReads(p.Str("clock") == "wall") },
		New: func(ctx *functions.Context) (functions.Function, error) {
			return &Timestamp{at: ctx.Ann, wall: ctx.Params.Str("clock") == "wall"}, nil
		},
	})
}

// Timestamp writes a time, in ns since the Unix epoch, in its annotation
// word of every packet.
type Timestamp struct {
	at   int
	wall bool
}

// Process stamps the batch and passes it on. The wall clock is read once
// per batch: the batch is processed at that moment.
func (s *Timestamp) Process(b *buffers.Batch) {
	p := b.PBuf
	if s.wall {
		now := time.Now().UnixNano()
		for _, e := range b.E[:b.N] {
			p.Ann(e.Slot)[s.at] = uint64(now)
		}
		return
	}
	for _, e := range b.E[:b.N] {
		p.Ann(e.Slot)[s.at] = uint64(p.Meta(e.Slot).Timestamp)
	}
}

// ReadNames implements functions.Readable.
func (s *Timestamp) ReadNames() []string { return timestampReads(s.wall) }

func timestampReads(wall bool) []string {
	if wall {
		return []string{"ts", "age"}
	}
	return []string{"ts"}
}

// ReadInt implements functions.IntReadable: ts, the packet's stamp, and
// with clock=wall age, the ns since it was stamped.
func (s *Timestamp) ReadInt(name string) (functions.IntReader, error) {
	at := s.at
	switch {
	case name == "ts":
		return func(p *buffers.PBuf, slot uint32) int64 { return int64(p.Ann(slot)[at]) }, nil
	case name == "age" && s.wall:
		return func(p *buffers.PBuf, slot uint32) int64 { return time.Now().UnixNano() - int64(p.Ann(slot)[at]) }, nil
	case name == "age":
		return nil, fmt.Errorf("timestamp has age with clock=wall only (the packet clock does not move within a packet)")
	}
	return nil, fmt.Errorf("timestamp has no %q to read (it has %v)", name, s.ReadNames())
}

// Read implements functions.Readable (a float64 rounds ns since the epoch
// to 256 ns: readers that can should use ReadInt).
func (s *Timestamp) Read(name string) (functions.Reader, error) {
	r, err := s.ReadInt(name)
	if err != nil {
		return nil, err
	}
	return func(p *buffers.PBuf, slot uint32) float64 { return float64(r(p, slot)) }, nil
}

// ebpfTimestamp is timestamp in an eBPF flowspace: the packet's time, which
// the program reads once (bpf_ktime_get_ns, on the time base of the packet
// clock above), is its annotation word; the record that carries the packet
// up carries the word and the same time, so that the word equals the
// packet's timestamp above. Both clocks are the arrival time there: the
// packet is processed as it arrives.
type ebpfTimestamp struct{ at int }

func (t ebpfTimestamp) StateSlots() int { return 0 }
func (t ebpfTimestamp) Timed() bool     { return true }

func (t ebpfTimestamp) Emit(e *ebpfgen.Emitter) error {
	if e.Ann == nil || e.Time == 0 {
		return fmt.Errorf("timestamp needs the packet's time and an annotation word in its program")
	}
	e.Insns = append(e.Insns,
		asm.LoadMem(asm.R1, asm.RFP, e.Time, asm.DWord),
		asm.LoadImm(asm.R2, e.ClockOffset, asm.DWord),
		asm.Add.Reg(asm.R1, asm.R2),
		asm.StoreMem(asm.RFP, e.Ann(t.at), asm.R1, asm.DWord),
		asm.Ja.Label(e.Pass),
	)
	return nil
}

var (
	_ ebpfgen.Timed = ebpfTimestamp{}

	_ functions.Readable    = (*Timestamp)(nil)
	_ functions.IntReadable = (*Timestamp)(nil)
)
