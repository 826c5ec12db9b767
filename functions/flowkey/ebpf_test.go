package flowkey

import (
	"encoding/binary"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/ebpfgen"
	"github.com/ffpf-go/ffpf/functions/gen"
)

// keyProg is a program that runs the key code on a frame and writes the
// key words, their hash, whether there was a key, and Index(hash, 1, n) to
// an array map.
type keyProg struct {
	prog *ebpf.Program
	out  *ebpf.Map
}

const (
	testSeed  = 0x5eed_0001_f00d
	testIndex = 1000003
)

func newKeyProg(t *testing.T, sp *Spec, typ ebpf.ProgramType) *keyProg {
	t.Helper()
	out, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8 * (MaxWords + 3), MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	e := &ebpfgen.Emitter{Prefix: "t", Pass: "pass", Drop: "drop", StackOffset: 16, KeySlot: -8,
		Map: func(string) int { return out.FD() }}
	e.Insns = asm.Instructions{asm.Mov.Reg(ebpfgen.Ctx, asm.R1)}
	if typ == ebpf.XDP {
		e.Insns = append(e.Insns,
			asm.LoadMem(ebpfgen.PacketStart, ebpfgen.Ctx, 0, asm.Word),
			asm.LoadMem(ebpfgen.PacketEnd, ebpfgen.Ctx, 4, asm.Word))
	} else {
		e.Insns = append(e.Insns,
			asm.LoadMem(ebpfgen.PacketStart, ebpfgen.Ctx, 76, asm.Word),
			asm.LoadMem(ebpfgen.PacketEnd, ebpfgen.Ctx, 80, asm.Word))
	}
	e.Insns = append(e.Insns, asm.Mov.Reg(ebpfgen.WireLen, ebpfgen.PacketEnd), asm.Sub.Reg(ebpfgen.WireLen, ebpfgen.PacketStart))
	base := int16(-16 - EBPFStack)
	hash, flag, idx := base-8, base-16, base-24
	if err := sp.EmitEBPF(e, functions.LinkEthernet, base, "nokey"); err != nil {
		t.Fatal(err)
	}
	sp.EmitHash(e, base, testSeed, asm.R3)
	e.Insns = append(e.Insns, asm.StoreMem(asm.RFP, hash, asm.R3, asm.DWord))
	EmitIndex(e, asm.R1, asm.R3, asm.R2, 1, testIndex)
	e.Insns = append(e.Insns,
		asm.StoreMem(asm.RFP, idx, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreMem(asm.RFP, flag, asm.R1, asm.DWord),
		asm.Ja.Label("write"),
		asm.Mov.Imm(asm.R1, 0).WithSymbol("nokey"),
		asm.StoreMem(asm.RFP, flag, asm.R1, asm.DWord),
		asm.StoreMem(asm.RFP, hash, asm.R1, asm.DWord),
		asm.StoreMem(asm.RFP, idx, asm.R1, asm.DWord),
	)
	for i := range sp.Words() { // the words a missing key left unwritten
		e.Insns = append(e.Insns, asm.StoreMem(asm.RFP, base+int16(8*i), asm.R1, asm.DWord))
	}
	e.Insns = append(e.Insns, asm.Mov.Imm(asm.R1, 0).WithSymbol("write"))
	e.Insns = append(e.Insns, e.Lookup("out", asm.R1, "pass")...)
	for i := range sp.Words() {
		e.Insns = append(e.Insns, asm.LoadMem(asm.R1, asm.RFP, base+int16(8*i), asm.DWord), asm.StoreMem(asm.R0, int16(8*i), asm.R1, asm.DWord))
	}
	for i, off := range []int16{hash, flag, idx} {
		e.Insns = append(e.Insns, asm.LoadMem(asm.R1, asm.RFP, off, asm.DWord), asm.StoreMem(asm.R0, int16(8*(MaxWords+i)), asm.R1, asm.DWord))
	}
	ret := int32(2) // XDP_PASS
	if typ != ebpf.XDP {
		ret = 0 // TC_ACT_OK
	}
	insns := append(e.Insns, asm.Mov.Imm(asm.R0, ret).WithSymbol("pass"), asm.Return())
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "ffpf_key_test", Type: typ, Instructions: insns, License: "GPL"})
	if err != nil {
		out.Close()
		t.Fatalf("%s: %v", sp, err)
	}
	t.Cleanup(func() { prog.Close(); out.Close() })
	return &keyProg{prog: prog, out: out}
}

// run returns what the program found for frame: the key, the hash, whether
// there was a key, and the index.
func (k *keyProg) run(t *testing.T, frame []byte) (Key, uint64, bool, uint32, error) {
	t.Helper()
	zero := make([]byte, 8*(MaxWords+3))
	if err := k.out.Update(uint32(0), zero, ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}
	if _, err := k.prog.Run(&ebpf.RunOptions{Data: frame}); err != nil {
		return Key{}, 0, false, 0, err
	}
	var v []byte
	if err := k.out.Lookup(uint32(0), &v); err != nil {
		t.Fatal(err)
	}
	var key Key
	for i := range key {
		key[i] = binary.NativeEndian.Uint64(v[8*i:])
	}
	return key, binary.NativeEndian.Uint64(v[8*MaxWords:]), binary.NativeEndian.Uint64(v[8*MaxWords+8:]) == 1,
		uint32(binary.NativeEndian.Uint64(v[8*MaxWords+16:])), nil
}

// keyFrames are generated frames (VLAN and QinQ tags, IPv6, a third
// malformed), every cut of some of them, and the hand-built adversarial
// frames: IPv4 options, bogus IHL and lengths, fragments, IPv6 extension
// chains past the bound, cut tags. Frames shorter than an Ethernet header
// are left out: the kernel runs no program on them.
func keyFrames() [][]byte {
	var frames [][]byte
	g := gen.New(gen.Config{Seed: 21, Packets: 3000, VLAN: 0.3, IPv6: 0.5, Malformed: 0.3})
	buf := make([]byte, gen.MaxFrameLen)
	for i := 0; ; i++ {
		n, _, _, more := g.Next(buf)
		if !more {
			break
		}
		if n >= 14 {
			frames = append(frames, append([]byte(nil), buf[:n]...))
		}
		if i < 60 {
			for l := 14; l < min(n, 120); l++ {
				frames = append(frames, append([]byte(nil), buf[:l]...))
			}
		}
	}
	tcp := l4ports(40000, 443, 20)
	v6 := func(nh uint8, payload []byte, vids ...uint16) []byte {
		return cat(eth(0x86dd, vids...), ip6(nh, v6a, v6b, payload))
	}
	chain := func(n int) []byte { // n option headers, then TCP
		p, nh := tcp, uint8(protoTCP)
		for i := range n {
			p, nh = cat(ext(nh, uint8(i%3)), p), ipv6DestOpts
		}
		return p
	}
	adv := [][]byte{
		cat(eth(0x0800), ip4(6, v4a, v4b, 0, 3, tcp)),
		cat(eth(0x0800, 7), ip4(17, v4a, v4b, 0x2000, 0, tcp)),
		cat(eth(0x0800, 7, 8), ip4(6, v4a, v4b, 0x0010, 0, tcp)),
		cat(eth(0x0800, 1, 2, 3, 4), ip4(6, v4a, v4b, 0, 0, tcp)),
		cat(eth(0x0800, 1, 2, 3, 4, 5), ip4(6, v4a, v4b, 0, 0, tcp)),
		cat(eth(0x86dd, 1, 2, 3), ip6(6, v6a, v6b, tcp)),
		cat(eth(0x0806), make([]byte, 28)),
		cat(eth(0x0800), patch(ip4(6, v4a, v4b, 0, 0, tcp), 0, 0x44)),            // IHL 4
		cat(eth(0x0800), patch(ip4(6, v4a, v4b, 0, 0, tcp), 0, 0x4f)),            // IHL 15 > the datagram
		cat(eth(0x0800), patch(ip4(6, v4a, v4b, 0, 0, tcp), 0, 0x55)),            // version 5
		cat(eth(0x0800), patch(patch(ip4(6, v4a, v4b, 0, 0, tcp), 2, 0), 3, 0)),  // total length 0
		cat(eth(0x0800), patch(patch(ip4(6, v4a, v4b, 0, 0, tcp), 2, 0), 3, 22)), // ports beyond it
		cat(eth(0x0800), patch(patch(ip4(6, v4a, v4b, 0, 0, tcp), 2, 0), 3, 19)), // shorter than IHL
		cat(eth(0x86dd), patch(ip6(6, v6a, v6b, tcp), 0, 0x40)),
		v6(6, tcp, 9),
		v6(ipv6Fragment, cat(fragHdr(6, 0, true), tcp)),
		v6(ipv6Fragment, cat(fragHdr(6, 5, false), tcp)),
		v6(ipv6Routing, cat(ext(ipv6Fragment, 0), fragHdr(17, 0, false), tcp)),
		v6(ipv6HopByHop, chain(7)),
		v6(ipv6HopByHop, chain(8)),
		v6(ipv6HopByHop, chain(9)),
		v6(ipv6HopByHop, ext(6, 200)),
		v6(58, []byte{128, 0, 0, 0}),
		cat(eth(0x86dd), patch(patch(ip6(6, v6a, v6b, tcp), 4, 0), 5, 0)), // payload length 0
		cat(eth(0x86dd), patch(patch(ip6(6, v6a, v6b, tcp), 4, 0), 5, 3)), // ports beyond it
		cat(eth(0x86dd), patch(patch(ip6(6, v6a, v6b, tcp), 4, 0xff), 5, 0xff)),
	}
	for _, f := range adv {
		frames = append(frames, f)
		for l := 14; l < len(f); l++ {
			frames = append(frames, append([]byte(nil), f[:l]...))
		}
	}
	return frames
}

// TestEBPFKeysEqualGo: on every frame, the key code in eBPF (run by the
// kernel's BPF_PROG_TEST_RUN, as XDP and as tc programs) finds a key
// exactly when Extract does, with the same words, the same Hash and the
// same Index.
func TestEBPFKeysEqualGo(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("loading eBPF programs needs root")
		}
		t.Skip("loading eBPF programs needs root")
	}
	frames := keyFrames()
	specs := []string{"5tuple", "srcip/24,dstport", "srcip/20/48,dstip/64,proto,vlan", "srcmac,dstmac,vlan",
		"vlan", "dstmac", "5tuple,vlan,srcmac,dstmac", "srcport", "dstip/0,proto", "srcip/31/127"}
	for _, typ := range []ebpf.ProgramType{ebpf.XDP, ebpf.SchedCLS} {
		for _, s := range specs {
			sp := mustParse(t, s)
			kp := newKeyProg(t, sp, typ)
			keys, differ, refused := 0, 0, 0
			for _, f := range frames {
				got, h, gotOK, idx, err := kp.run(t, f)
				if err != nil {
					// The kernel's test run of a tc program refuses an skb
					// without payload, or too short for the IP header its
					// ethertype announces.
					if typ == ebpf.SchedCLS && len(f) < 14+40 {
						refused++
						continue
					}
					t.Fatalf("%v %s: test run on %d bytes: %v", typ, s, len(f), err)
				}
				var want Key
				ok := sp.Extract(functions.LinkEthernet, f, &want)
				wantH, wantIdx := uint64(0), uint32(0)
				if ok {
					keys++
					wantH = sp.Hash(&want, testSeed)
					wantIdx = Index(wantH, 1, testIndex)
				}
				if (got != want || gotOK != ok || h != wantH || idx != wantIdx) && differ < 5 {
					differ++
					t.Errorf("%v %s, %d-byte frame %x:\n eBPF %v %x %x %d\n Go   %v %x %x %d", typ, s, len(f), f,
						gotOK, got[:sp.Words()], h, idx, ok, want[:sp.Words()], wantH, wantIdx)
				}
			}
			if keys < (len(frames)-refused)/4 {
				t.Errorf("%s: only %d of %d frames have a key", s, keys, len(frames))
			}
		}
	}
}
