package p4gen

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/ffpf-go/ffpf/lang/p4"
)

// randomFrame returns a frame that exercises the standard parser: VLAN
// tags (zero to two), IPv4 with options or a bogus IHL, fragments, IPv6,
// TCP, UDP, ICMP, other ethertypes and protocols, and truncation at any
// byte.
func randomFrame(r *rand.Rand) []byte {
	var b []byte
	b = append(b, 0, 1, 2, 3, 4, byte(r.IntN(4)), 6, 7, 8, 9, 10, byte(r.IntN(3)))
	tags := []int{0, 0, 0, 1, 2}[r.IntN(5)]
	for range tags {
		b = append(b, []byte{0x81, 0x00, 0x88, 0xa8}[2*r.IntN(2):][:2]...)
		b = append(b, byte(r.IntN(256)), byte(r.IntN(256)))
	}
	l4 := func(proto byte) []byte {
		var h []byte
		switch proto {
		case 6:
			h = make([]byte, 20)
			binary.BigEndian.PutUint16(h, uint16([]int{22, 80, 443, 1000 + r.IntN(8)}[r.IntN(4)]))
			binary.BigEndian.PutUint16(h[2:], uint16([]int{22, 80, 443, 8080, r.IntN(65536)}[r.IntN(5)]))
			h[12] = 0x50
			h[13] = byte(r.IntN(256))
		case 17:
			h = make([]byte, 8)
			binary.BigEndian.PutUint16(h, uint16([]int{53, 1000 + r.IntN(8), r.IntN(65536)}[r.IntN(3)]))
			binary.BigEndian.PutUint16(h[2:], uint16([]int{53, 80, r.IntN(65536)}[r.IntN(3)]))
		case 1:
			h = []byte{8, 0, 0, 0, 1, 2, 3, 4}
		default:
			h = []byte{1, 2, 3, 4}
		}
		return append(h, make([]byte, r.IntN(24))...)
	}
	switch r.IntN(6) {
	case 0, 1, 2: // IPv4
		b = append(b, 0x08, 0x00)
		ihl := 5
		switch r.IntN(6) {
		case 0:
			ihl = 6 + r.IntN(10)
		case 1:
			ihl = r.IntN(5) // bogus
		}
		ip := make([]byte, max(20, 4*ihl))
		ip[0] = 0x40 | byte(ihl)
		ip[1] = byte(r.IntN(256))
		if r.IntN(8) == 0 {
			binary.BigEndian.PutUint16(ip[6:], uint16(r.IntN(0x2000))) // a fragment
		}
		ip[8] = []byte{0, 1, 2, 3, 64, 128, 255}[r.IntN(7)]
		proto := []byte{6, 17, 1, 47}[r.IntN(4)]
		ip[9] = proto
		binary.BigEndian.PutUint32(ip[12:], []uint32{0x0a000001, 0x0a000102, 0x0b000001, r.Uint32()}[r.IntN(4)])
		binary.BigEndian.PutUint32(ip[16:], []uint32{0x0a000105, 0x0a0001ff, 0x0a020304, 0xc0a80001, r.Uint32()}[r.IntN(5)])
		for i := 20; i < len(ip); i++ {
			ip[i] = byte(r.IntN(256))
		}
		body := l4(proto)
		binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)+len(body)))
		b = append(append(b, ip...), body...)
	case 3: // IPv6
		b = append(b, 0x86, 0xdd)
		ip := make([]byte, 40)
		ip[0] = 0x60
		proto := []byte{6, 17, 58, 0}[r.IntN(4)]
		ip[6], ip[7] = proto, 64
		for i := 8; i < 40; i++ {
			ip[i] = byte(r.IntN(4))
		}
		b = append(append(b, ip...), l4(proto)...)
	default: // ARP or anything
		b = append(b, []byte{0x08, 0x06, 0x12, 0x34}[2*r.IntN(2):][:2]...)
		b = append(b, make([]byte, 28)...)
	}
	if r.IntN(5) == 0 {
		b = b[:r.IntN(len(b)+1)]
	}
	return b
}

// installEntries puts the same random entries in the tables of the
// program that the controller fills: in the reference and, by the
// table's P4Info name, in the interpreter.
func installEntries(r *rand.Rand, p *Program, pr *Printed, ref *Switch, sw *p4.Switch) {
	for _, t := range p.Tables {
		if t.Const {
			continue
		}
		for i := range 6 {
			var e Entry
			var pe p4.TableEntry
			e.Priority = int32(r.IntN(4))
			pe.Priority = e.Priority
			for _, k := range t.Keys {
				w := k.X.Type()
				m := Match{Value: r.Uint64() & w.Mask() & 7, Mask: []uint64{w.Mask(), 0, 0xf0, 0x0f}[r.IntN(4)] & w.Mask()}
				m.PrefixLen = r.IntN(max(w.Bits, 1) + 1)
				m.Lo, m.Hi = m.Value, m.Value+uint64(r.IntN(4))
				e.Match = append(e.Match, m)
				pe.Keys = append(pe.Keys, p4.KeyMatch{Value: m.Value, Mask: m.Mask, PrefixLen: m.PrefixLen, Lo: m.Lo, Hi: m.Hi})
			}
			e.Action = t.Actions[i%len(t.Actions)]
			pe.Action = e.Action.Name
			for _, f := range e.Action.Params {
				v := r.Uint64() & Bit(f.Bits).Mask() & 3
				e.Args = append(e.Args, v)
				pe.Args = append(pe.Args, v)
			}
			ref.Entries[t] = append(ref.Entries[t], e)
			sw.Entries[pr.Name(t)] = append(sw.Entries[pr.Name(t)], pe)
		}
	}
}

// TestInterpreterAgrees runs the printed program, parsed and checked by
// lang/p4, on random packets beside the reference semantics running the
// IR, and requires the same departures (ports, bytes, instances),
// digests, registers and counters.
func TestInterpreterAgrees(t *testing.T) {
	for name, prog := range testPrograms(t) {
		t.Run(name, func(t *testing.T) {
			pr, err := Print(prog)
			if err != nil {
				t.Fatal(err)
			}
			ast, err := p4.Parse(name+".p4", string(pr.Text))
			if err != nil {
				t.Fatal(err)
			}
			chk, err := p4.Check(name+".p4", string(pr.Text), ast)
			if err != nil {
				t.Fatal(err.(p4.ErrorList).Format())
			}
			sw, err := p4.NewSwitch(chk)
			if err != nil {
				t.Fatal(err)
			}
			ref := NewSwitch(prog)
			for s, port := range map[uint32]uint16{5: 2, 9: 3} {
				ref.Sessions[s], sw.Sessions[s] = port, port
			}
			r := rand.New(rand.NewPCG(19, uint64(len(name))))
			installEntries(r, prog, pr, ref, sw)
			stats := map[string]int{}
			for i := range 3000 {
				f := randomFrame(r)
				a := Arrival{Data: f, Port: uint16(r.IntN(4)), Time: uint64(i) * 7, QDepth: uint32(r.IntN(50))}
				want, werr := ref.Process(a)
				got, gerr := sw.Process(p4.Arrival{Data: f, Port: a.Port, Time: a.Time, QDepth: a.QDepth})
				if (werr == nil) != (gerr == nil) {
					t.Fatalf("packet %d %x: reference error %v, interpreter error %v", i, f, werr, gerr)
				}
				if werr != nil {
					stats["error"]++
					continue
				}
				if w, g := departures(want.Out), gotDepartures(got.Out); w != g {
					t.Fatalf("packet %d %x: departures differ:\nIR   %s\nP4   %s", i, f, w, g)
				}
				if w, g := digests(want.Digests), gotDigests(got.Digests); w != g {
					t.Fatalf("packet %d %x: digests differ:\nIR   %s\nP4   %s", i, f, w, g)
				}
				stats[fmt.Sprintf("out%d", len(want.Out))]++
				stats[fmt.Sprintf("digests%d", len(want.Digests))]++
				if want.ParserError != "" {
					stats["parser error"]++
				}
			}
			for _, reg := range prog.Registers {
				if w, g := ref.Regs[reg], sw.Regs[pr.Name(reg)]; !reflect.DeepEqual(w, g) {
					t.Errorf("register %s: IR %v, P4 %v", reg.Name, w, g)
				}
			}
			nonzero := 0
			for _, c := range prog.Counters {
				w, g := ref.Counts[c], sw.Counts[pr.Name(c)]
				for i := range w {
					if w[i].Packets != g[i].Packets || w[i].Bytes != g[i].Bytes {
						t.Errorf("counter %s[%d]: IR %+v, P4 %+v", c.Name, i, w[i], g[i])
					}
					if w[i].Packets > 0 {
						nonzero++
					}
				}
			}
			t.Logf("%s: %v; %d nonzero counter cells", name, stats, nonzero)
			if stats["out0"]+stats["out1"]+stats["out2"]+stats["out3"] < 2000 {
				t.Errorf("only %v packets ran without error: the test would prove little", stats)
			}
		})
	}
}

func departures(ds []Departure) string {
	var b bytes.Buffer
	for _, d := range ds {
		fmt.Fprintf(&b, "[port %d instance %d %x] ", d.Port, d.Instance, d.Data)
	}
	return b.String()
}

func gotDepartures(ds []p4.Departure) string {
	var b bytes.Buffer
	for _, d := range ds {
		fmt.Fprintf(&b, "[port %d instance %d %x] ", d.Port, d.Instance, d.Data)
	}
	return b.String()
}

func digests(ds []DigestMsg) string {
	var b bytes.Buffer
	for _, d := range ds {
		fmt.Fprintf(&b, "%s%v ", d.Type.Name, d.Values)
	}
	return b.String()
}

func gotDigests(ds []p4.DigestMsg) string {
	var b bytes.Buffer
	for _, d := range ds {
		fmt.Fprintf(&b, "%s%v ", d.Type, d.Values)
	}
	return b.String()
}
