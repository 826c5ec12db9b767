package reporter_test

import (
	"bytes"
	"context"
	"encoding/binary"

	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/ffpf-go/ffpf/flowgraph"
	_ "github.com/ffpf-go/ffpf/functions/builtin"
	"github.com/ffpf-go/ffpf/functions/dta/layout"
	"github.com/ffpf-go/ffpf/functions/dta/reporter"
	"github.com/ffpf-go/ffpf/functions/dta/wire"
	"github.com/ffpf-go/ffpf/functions/record"
)

// run runs expr to its end and returns the state of the function whose
// class is class.
func run(t *testing.T, expr, class string) flowgraph.FunctionState {
	t.Helper()
	rt := flowgraph.New(flowgraph.Config{})
	defer rt.Close()
	req, err := rt.Populate(expr, flowgraph.RequestOptions{})
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
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
	for _, f := range req.Functions() {
		if f.Class == class {
			return f
		}
	}
	t.Fatalf("no %s in %s", class, expr)
	return flowgraph.FunctionState{}
}

func readPcap(t *testing.T, path string) (frames [][]byte, lt layers.LinkType) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	for {
		data, _, err := r.ReadPacketData()
		if err != nil {
			break
		}
		frames = append(frames, append([]byte(nil), data...))
	}
	return frames, r.LinkType()
}

// decodeFrame checks a report frame with gopacket, byte for byte against
// gopacket's own serialisation with computed checksums, and returns the
// report's bytes.
func decodeFrame(t *testing.T, frame []byte) (*layers.IPv4, *layers.UDP, []byte) {
	t.Helper()
	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	if el := pkt.ErrorLayer(); el != nil {
		t.Fatalf("frame % x: %v", frame, el.Error())
	}
	eth, _ := pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	ip, _ := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	udp, _ := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
	if eth == nil || ip == nil || udp == nil {
		t.Fatalf("frame % x is not Ethernet/IPv4/UDP", frame)
	}
	payload := udp.Payload
	if len(frame) != reporter.MinFrame {
		t.Fatalf("a %d-byte frame", len(frame))
	}
	// Serialise the same headers with gopacket computing lengths and
	// checksums: the bytes must be ours.
	ip2, udp2 := *ip, *udp
	ip2.Checksum, udp2.Checksum = 0, 0
	if err := udp2.SetNetworkLayerForChecksum(&ip2); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		eth, &ip2, &udp2, gopacket.Payload(payload)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), frame) {
		t.Fatalf("frame  % x\ngopacket % x", frame, buf.Bytes())
	}
	if udp.DstPort != wire.Port {
		t.Fatalf("UDP to port %d", udp.DstPort)
	}
	return ip, udp, payload
}

// want is what a packet's report is, read with gopacket; ok false: no report.
type want func(p gopacket.Packet) (wire.Report, bool)

func ip4(p gopacket.Packet) *layers.IPv4 {
	ip, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	return ip
}

func be32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }

// TestPrimitivesFromPackets runs each primitive on synthetic traffic and
// compares every frame's report with wire.Append of the report made from
// the same packet's fields as gopacket reads them.
func TestPrimitivesFromPackets(t *testing.T) {
	cases := []struct {
		args string
		want want
	}{
		{"op=keywrite,key=ipv4.src,data=pkt.len,redundancy=3", func(p gopacket.Packet) (wire.Report, bool) {
			ip := ip4(p)
			if ip == nil {
				return wire.Report{}, false
			}
			return wire.Report{Op: wire.KeyWrite, Redundancy: 3, Key: be32(ip.SrcIP.To4()),
				Data: uint32(p.Metadata().Length)}, true
		}},
		{"op=append,list=7,data=ipv4.dst,immediate=true", func(p gopacket.Packet) (wire.Report, bool) {
			ip := ip4(p)
			if ip == nil {
				return wire.Report{}, false
			}
			return wire.Report{Op: wire.Append, Immediate: true, List: 7, Data: be32(ip.DstIP.To4())}, true
		}},
		{"op=keyincrement,key=tcp.dport", func(p gopacket.Packet) (wire.Report, bool) {
			tcp, _ := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
			if tcp == nil {
				return wire.Report{}, false
			}
			return wire.Report{Op: wire.KeyIncrement, Redundancy: reporter.DefaultRedundancy, Key: uint32(tcp.DstPort), Counter: 1}, true
		}},
		{"op=keyincrement,key=eth.src,data=pkt.len,redundancy=1", func(p gopacket.Packet) (wire.Report, bool) {
			eth, _ := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
			var b [8]byte
			copy(b[2:], eth.SrcMAC)
			return wire.Report{Op: wire.KeyIncrement, Redundancy: 1, Key: layout.CRC32(b[:]),
				Counter: uint64(p.Metadata().Length)}, true
		}},
		// a hop past 7, which no collector keeps (SYN-ACK 0x12, ACK 0x10),
		// makes no report; SYN (2), RST (4), FIN (1) do
		{"op=postcarding,key=ipv4.src,hop=tcp.flags,data=0x01020304", func(p gopacket.Packet) (wire.Report, bool) {
			ip := ip4(p)
			tcp, _ := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
			if ip == nil || tcp == nil || tcp.Contents[13] >= layout.MaxHops {
				return wire.Report{}, false
			}
			return wire.Report{Op: wire.Postcarding, Key: be32(ip.SrcIP.To4()), Hop: tcp.Contents[13], Data: 0x01020304}, true
		}},
	}
	for _, c := range cases {
		t.Run(c.args, func(t *testing.T) {
			dir := t.TempDir()
			in, out := filepath.Join(dir, "in.pcap"), filepath.Join(dir, "out.pcap")
			st := run(t, fmt.Sprintf("(gen,packets=3000,seed=5) > (export,file=%q) > (dta,%s) > (export,file=%q)", in, c.args, out), "dta")
			pkts, _ := readPcap(t, in)
			frames, lt := readPcap(t, out)
			if lt != layers.LinkTypeEthernet {
				t.Fatalf("link type %v", lt)
			}
			var exp [][]byte
			for _, data := range pkts {
				p := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
				p.Metadata().Length = len(data)
				if r, ok := c.want(p); ok {
					b, err := r.Append(nil)
					if err != nil {
						t.Fatal(err)
					}
					exp = append(exp, b)
				}
			}
			if len(exp) == 0 || len(frames) != len(exp) {
				t.Fatalf("%d frames, want %d", len(frames), len(exp))
			}
			for i, f := range frames {
				ip, _, payload := decodeFrame(t, f)
				if !bytes.Equal(payload, exp[i]) {
					t.Fatalf("report %d: % x, want % x", i, payload, exp[i])
				}
				if ip.Id != uint16(i) || ip.Flags != layers.IPv4DontFragment || ip.TTL != 64 {
					t.Fatalf("report %d: IPv4 id %d flags %v ttl %d", i, ip.Id, ip.Flags, ip.TTL)
				}
				var r wire.Report
				if err := wire.Decode(payload, &r); err != nil {
					t.Fatal(err)
				}
			}
			s := st.State
			if s["reports"] != uint64(len(exp)) || s["nofield"] != uint64(len(pkts)-len(exp)) || st.Records != uint64(len(exp)) {
				t.Fatalf("state %v records %d: want %d reports of %d packets", s, st.Records, len(exp), len(pkts))
			}
			if st.In != uint64(len(pkts)) || st.In != st.Out+st.Filtered+st.Dropped {
				t.Fatalf("accounting: %+v", st)
			}
		})
	}
}

// TestTcpdump: tcpdump reads the reports as UDP to port 40040 with good
// IPv4 and UDP checksums.
func TestTcpdump(t *testing.T) {
	if _, err := exec.LookPath("tcpdump"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("tcpdump is missing")
		}
		t.Skip("needs tcpdump")
	}
	out := filepath.Join(t.TempDir(), "r.pcap")
	st := run(t, fmt.Sprintf("(gen,packets=2000,seed=2) > (dta,op=keywrite,key=ipv4.src,data=pkt.len) > (export,file=%q)", out), "dta")
	n := st.State["reports"].(uint64)
	b, err := exec.Command("tcpdump", "-nn", "-vv", "-r", out).CombinedOutput()
	if err != nil {
		t.Fatalf("tcpdump: %v\n%s", err, b)
	}
	s := string(b)
	if !strings.Contains(s, "link-type EN10MB") {
		t.Fatalf("tcpdump: %s", s[:min(len(s), 300)])
	}
	if got := strings.Count(s, "127.0.0.1.49374 > 127.0.0.1.40040: [udp sum ok] UDP, length 11"); got != int(n) || n == 0 {
		t.Fatalf("tcpdump shows %d good reports of %d:\n%s", got, n, s[:min(len(s), 600)])
	}
	if strings.Contains(s, "bad") {
		t.Fatal("tcpdump finds a bad checksum")
	}
}

// TestRecords reports a sketch's records: key= a report's flow-key object
// of one address is that address, of several members folds into the
// CRC-32 of its encoding; key.srcip reads the address as a number; data=
// the estimate.
func TestRecords(t *testing.T) {
	for _, c := range []struct {
		sketchKey, key string
		want           func(rec []byte) uint32
	}{
		{"5tuple", "key", func(rec []byte) uint32 { f, _ := record.Find(rec, "key"); return layout.CRC32(f.Raw) }},
		{"srcip", "key", func(rec []byte) uint32 { f, _ := record.Find(rec, "key.srcip"); return be32(f.Raw) }},
		{"srcip", "key.srcip", func(rec []byte) uint32 { f, _ := record.Find(rec, "key.srcip"); return be32(f.Raw) }},
	} {
		dir := t.TempDir()
		recs, out := filepath.Join(dir, "recs.pcap"), filepath.Join(dir, "out.pcap")
		st := run(t, fmt.Sprintf("(gen,packets=5000,seed=4,ipv6=0) > (cms,key=%s,report=20) > (export,file=%q) > (dta,op=keywrite,key=%s,data=estimate,redundancy=4) > (export,file=%q)",
			c.sketchKey, recs, c.key, out), "dta")
		rs, lt := readPcap(t, recs)
		if lt != layers.LinkType(147) || len(rs) != 20 {
			t.Fatalf("%d records of link type %v", len(rs), lt)
		}
		frames, _ := readPcap(t, out)
		if len(frames) != len(rs) || st.State["reports"] != uint64(len(rs)) {
			t.Fatalf("%d frames of %d records, state %v", len(frames), len(rs), st.State)
		}
		for i, rec := range rs {
			est, ok := record.Find(rec, "estimate")
			if !ok {
				t.Fatal("record without estimate")
			}
			r := wire.Report{Op: wire.KeyWrite, Redundancy: 4, Key: c.want(rec), Data: uint32(est.Uint())}
			exp, _ := r.Append(nil)
			if _, _, payload := decodeFrame(t, frames[i]); !bytes.Equal(payload, exp) {
				t.Fatalf("cms key=%s, key=%s record %d: % x, want % x", c.sketchKey, c.key, i, payload, exp)
			}
		}
	}
}

func TestPopulateErrors(t *testing.T) {
	for expr, msg := range map[string]string{
		"(gen) > (dta,op=keywrite,key=ipv4.src)":                              "needs data=",
		"(gen) > (dta,op=append,data=1)":                                      "needs list=",
		"(gen) > (dta,op=append,list=1,data=1,key=ipv4.src)":                  "takes no key=",
		"(gen) > (dta,op=append,list=1,data=1,redundancy=2)":                  "takes no redundancy=",
		"(gen) > (dta,op=postcarding,key=1,data=2)":                           "needs hop=",
		"(gen) > (dta,op=postcarding,key=1,data=2,hop=256)":                   "hop=256 is past 7, the last hop offset a collector keeps",
		"(gen) > (dta,op=postcarding,key=1,data=2,hop=8)":                     "hop=8 is past 7",
		"(gen) > (dta,op=keywrite,key=ipv4.srcc,data=1)":                      "did you mean ipv4.src",
		"(gen) > (dta,op=keywrite,key=ipv6.src,data=1)":                       "128-bit",
		"(gen) > (dta,op=keywrite,key=1,data=1,to=localhost)":                 "HOST:PORT",
		"(gen) > (dta,op=keywrite,key=1,data=1,to=\"[::1]:40040\")":           "IPv4",
		"(gen) > (dta,op=keywrite,key=1,data=1,redundancy=0)":                 "redundancy=0: a collector takes 1 to 8 copies",
		"(gen) > (dta,op=keywrite,key=1,data=1,redundancy=9)":                 "redundancy=9: a collector takes 1 to 8 copies",
		"(gen) > (dta,op=keyincrement,key=1,redundancy=9)":                    "redundancy=9: a collector takes 1 to 8 copies",
		"(gen) > (dta,op=append,list=1048576,data=1)":                         "list=1048576: a collector hosts lists 0 to 1048575",
		"(gen) > (dta,op=write,key=1,data=1)":                                 "op",
		"(gen) > (dta,op=keywrite,key=1,data=1) > (bpf,\"udp\") > (pktcount)": "",
	} {
		rt := flowgraph.New(flowgraph.Config{})
		_, err := rt.Populate(expr, flowgraph.RequestOptions{})
		rt.Close()
		if msg == "" {
			if err != nil {
				t.Errorf("%s: %v", expr, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want %q", expr, err, msg)
		}
	}
}
