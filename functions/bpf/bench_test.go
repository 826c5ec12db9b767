package bpf

import (
	"math/rand"
	"net"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcap"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

// benchExprs are the benchmarked filters, by sub-benchmark name.
var benchExprs = []struct{ name, expr string }{
	{"tcp-dst-port-80", "tcp and dst port 80"},
	{"host-net-or", "src net 10.0.0.0/8 and (dst host 192.168.1.2 or udp)"},
	{"syn-not-443", "tcp[tcpflags] & tcp-syn != 0 and not port 443"},
	{"ip6-tcp-443", "ip6 and tcp port 443"},
	{"vlan-100-tcp", "vlan 100 and tcp"},
}

// trafficMix returns n packets of a realistic mix from a fixed seed: about
// 60% TCP over IPv4 (a third of it to port 80), UDP, ICMP, IPv6, ARP and
// VLAN-tagged frames, sized 60 to 1514 bytes.
func trafficMix(tb testing.TB, n int) [][]byte {
	rng := rand.New(rand.NewSource(7))
	ip := func() net.IP {
		if rng.Intn(2) == 0 {
			return net.IPv4(10, byte(rng.Intn(256)), byte(rng.Intn(256)), byte(rng.Intn(256))).To4()
		}
		return net.IPv4(192, 168, 1, byte(rng.Intn(4))).To4()
	}
	ip6a := func() net.IP {
		b := make(net.IP, 16)
		b[0], b[1], b[2], b[3] = 0x20, 0x01, 0x0d, 0xb8
		rng.Read(b[8:])
		return b
	}
	size := func(hdr int) gopacket.Payload {
		// Bimodal, like real traffic: many small, many full-sized.
		var total int
		switch r := rng.Intn(10); {
		case r < 4:
			total = 60 + rng.Intn(40)
		case r < 7:
			total = 100 + rng.Intn(500)
		default:
			total = 1400 + rng.Intn(115)
		}
		return payload(max(0, total-hdr), byte(rng.Intn(256)))
	}
	port := func() layers.TCPPort {
		switch rng.Intn(3) {
		case 0:
			return 80
		case 1:
			return 443
		}
		return layers.TCPPort(1024 + rng.Intn(60000))
	}
	out := make([][]byte, 0, n)
	for len(out) < n {
		var p []byte
		switch r := rng.Intn(100); {
		case r < 60:
			p = serialize(tb, eth(macB, layers.EthernetTypeIPv4), ip4(ip(), ip(), layers.IPProtocolTCP),
				tcp(layers.TCPPort(1024+rng.Intn(60000)), port(), "A", rng.Intn(4) == 0), size(54))
		case r < 75:
			p = serialize(tb, eth(macB, layers.EthernetTypeIPv4), ip4(ip(), ip(), layers.IPProtocolUDP),
				udp(layers.UDPPort(1024+rng.Intn(60000)), 53), size(42))
		case r < 80:
			p = serialize(tb, eth(macB, layers.EthernetTypeIPv4), ip4(ip(), ip(), layers.IPProtocolICMPv4),
				&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0)}, size(42))
		case r < 92:
			p = serialize(tb, eth(macB, layers.EthernetTypeIPv6), ip6(ip6a(), ip6a(), layers.IPProtocolTCP),
				tcp(layers.TCPPort(1024+rng.Intn(60000)), port(), "A", false), size(74))
		case r < 95:
			p = serialize(tb, eth(macBcast, layers.EthernetTypeARP), &layers.ARP{AddrType: layers.LinkTypeEthernet,
				Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4, Operation: layers.ARPRequest,
				SourceHwAddress: macA, SourceProtAddress: ip(), DstHwAddress: make([]byte, 6), DstProtAddress: ip()},
				payload(18, 0))
		default:
			p = serialize(tb, eth(macB, layers.EthernetTypeDot1Q), &layers.Dot1Q{VLANIdentifier: uint16(100 * (1 + rng.Intn(2))), Type: layers.EthernetTypeIPv4},
				ip4(ip(), ip(), layers.IPProtocolTCP), tcp(layers.TCPPort(1024+rng.Intn(60000)), port(), "A", false), size(58))
		}
		out = append(out, p)
	}
	return out
}

// benchPackets packets in 2 KB PBuf slots: 2 MB, the headers the filters
// read stay in L2, as they do on the datapath, where a source has just
// written the batch.
const benchPackets = 1024

// BenchmarkEngine measures ns per packet of our engine (Run per packet,
// and Filter per batch of 256 from a PBuf), of golang.org/x/net/bpf's VM
// and of libpcap's matcher through cgo, on the same packets.
func BenchmarkEngine(b *testing.B) {
	// Every engine reads the same bytes: the PBuf's slots.
	pb := buffers.NewPBuf(benchPackets, 2048)
	pkts := make([][]byte, benchPackets)
	for i, p := range trafficMix(b, benchPackets) {
		pb.Store(uint32(i), p, uint32(len(p)), 0, 0)
		pkts[i] = pb.Data(uint32(i))
	}
	perPkt := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/pkt")
	}
	for _, be := range benchExprs {
		insns, err := Compile(be.expr, functions.LinkEthernet, DefaultSnaplen)
		if err != nil {
			b.Fatal(err)
		}
		prog, err := Load(insns)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("ffpf/"+be.name, func(b *testing.B) {
			b.ReportAllocs()
			var pass uint32
			for i := 0; i < b.N; i++ {
				p := pkts[i%benchPackets]
				if prog.Run(p, uint32(len(p))) != 0 {
					pass++
				}
			}
			perPkt(b)
			sink = pass
		})
		b.Run("ffpfbatch/"+be.name, func(b *testing.B) {
			// One op is one batch of 256; ns/pkt divides by 256. Refilling
			// the batch's entries (a 2 KB copy) is included.
			b.ReportAllocs()
			batches := make([]*buffers.Batch, benchPackets/buffers.MaxBatch)
			for j := range batches {
				batches[j] = buffers.NewBatch(pb, uint32(j*buffers.MaxBatch), buffers.MaxBatch, 0)
				for s := 0; s < buffers.MaxBatch; s++ {
					batches[j].E[s] = buffers.Entry{Slot: uint32(j*buffers.MaxBatch + s)}
				}
			}
			var full [buffers.MaxBatch]buffers.Entry
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				bt := batches[i%len(batches)]
				for s := range full {
					full[s] = buffers.Entry{Slot: bt.Base + uint32(s)}
				}
				bt.E = full
				bt.N = buffers.MaxBatch
				prog.Filter(bt)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/buffers.MaxBatch, "ns/pkt")
		})
		b.Run("xnetbpf/"+be.name, func(b *testing.B) {
			vm := xnetVM(insns)
			if vm == nil {
				b.Skip("x/net/bpf does not take this program")
			}
			b.ReportAllocs()
			var pass uint32
			for i := 0; i < b.N; i++ {
				if n, _ := vm.Run(pkts[i%benchPackets]); n != 0 {
					pass++
				}
			}
			perPkt(b)
			sink = pass
		})
		b.Run("libpcap/"+be.name, func(b *testing.B) {
			m, err := pcap.NewBPF(layers.LinkTypeEthernet, DefaultSnaplen, be.expr)
			if err != nil {
				b.Fatal(err)
			}
			ci := make([]gopacket.CaptureInfo, benchPackets)
			for i, p := range pkts {
				ci[i] = gopacket.CaptureInfo{Timestamp: time.Unix(0, 0), CaptureLength: len(p), Length: len(p)}
			}
			b.ReportAllocs()
			b.ResetTimer()
			var pass uint32
			for i := 0; i < b.N; i++ {
				j := i % benchPackets
				if m.Matches(ci[j], pkts[j]) {
					pass++
				}
			}
			perPkt(b)
			sink = pass
		})
	}
}

var sink uint32

// BenchmarkCompile measures compiling at populate time (never on the
// datapath): on a dead handle for a live capture, on a handle opened on a
// file header for a capture file, and, as the baseline it replaced,
// gopacket's CompileBPFFilter.
func BenchmarkCompile(b *testing.B) {
	const expr = "tcp and dst port 80"
	file := functions.Capture{File: true, LinkTypeField: uint32(functions.LinkEthernet), Snaplen: 262144}
	b.Run("live", func(b *testing.B) {
		for b.Loop() {
			if _, err := Compile(expr, functions.LinkEthernet, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("file", func(b *testing.B) {
		for b.Loop() {
			if _, err := CompileFor(expr, file, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gopacket", func(b *testing.B) {
		for b.Loop() {
			if _, err := pcap.CompileBPFFilter(layers.LinkTypeEthernet, DefaultSnaplen, expr); err != nil {
				b.Fatal(err)
			}
		}
	})
}
