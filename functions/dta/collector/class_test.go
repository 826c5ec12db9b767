package collector_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/ffpf-go/ffpf/flowgraph"
	_ "github.com/ffpf-go/ffpf/functions/builtin"
	"github.com/ffpf-go/ffpf/functions/dta/collector"
	"github.com/ffpf-go/ffpf/functions/dta/wire"
)

// frame is a report as a reporter sends it: Ethernet, IPv4 or IPv6, UDP to
// port, optionally behind a VLAN tag.
func frame(t *testing.T, payload []byte, port uint16, v6, vlan bool) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
	udp := &layers.UDP{SrcPort: 5000, DstPort: layers.UDPPort(port)}
	ls := []gopacket.SerializableLayer{eth}
	if vlan {
		eth.EthernetType = layers.EthernetTypeDot1Q
		ls = append(ls, &layers.Dot1Q{VLANIdentifier: 7, Type: layers.EthernetTypeIPv4})
	}
	if v6 {
		ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP, SrcIP: net.ParseIP("fd00::1"), DstIP: net.ParseIP("fd00::2")}
		if vlan {
			ls[1].(*layers.Dot1Q).Type = layers.EthernetTypeIPv6
		} else {
			eth.EthernetType = layers.EthernetTypeIPv6
		}
		udp.SetNetworkLayerForChecksum(ip)
		ls = append(ls, ip)
	} else {
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 0, 0, 2}}
		udp.SetNetworkLayerForChecksum(ip)
		ls = append(ls, ip)
	}
	ls = append(ls, udp, gopacket.Payload(payload))
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func enc(r wire.Report) []byte {
	b, err := r.Append(nil)
	if err != nil {
		panic(err)
	}
	return b
}

// A capture of reports is a source: dta-collector ingests the reports
// among its frames, counts the rest, and answers queries by handler.
func TestClassIngestsCapture(t *testing.T) {
	var frames [][]byte
	var caps []int // capture lengths (0: the whole frame)
	add := func(b []byte, capLen int) { frames, caps = append(frames, b), append(caps, capLen) }
	add(frame(t, enc(wire.Report{Op: wire.KeyWrite, Redundancy: 2, Key: 0x0a000105, Data: 1234}), 40040, false, false), 0)
	for i := range 10 {
		add(frame(t, enc(wire.Report{Op: wire.Append, List: 1, Data: uint32(i)}), 40040, i%2 == 1, i%3 == 0), 0)
	}
	add(frame(t, enc(wire.Report{Op: wire.Postcarding, Key: 5, Hop: 0, Data: 10}), 40040, false, true), 0)
	add(frame(t, enc(wire.Report{Op: wire.Postcarding, Key: 5, Hop: 1, Data: 11}), 40040, true, false), 0)
	add(frame(t, enc(wire.Report{Op: wire.Append, List: 9, Data: 1}), 40040, false, false), 0)            // list
	add(frame(t, enc(wire.Report{Op: wire.KeyIncrement, Redundancy: 1, Key: 1}), 40040, false, false), 0) // disabled
	add(frame(t, []byte{0x07, 0, 1, 2}, 40040, false, false), 0)                                          // opcode
	kw := frame(t, enc(wire.Report{Op: wire.KeyWrite, Redundancy: 1, Key: 1, Data: 1}), 40040, false, false)
	add(kw, 14+20+8+8)                                                                                      // cut by the snap length: short
	add(frame(t, enc(wire.Report{Op: wire.KeyWrite, Redundancy: 1, Key: 2, Data: 2}), 53, false, false), 0) // another port
	dir := t.TempDir()
	file := filepath.Join(dir, "reports.pcap")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriter(f)
	w.WriteFileHeader(65535, layers.LinkTypeEthernet)
	for i, b := range frames {
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(1700000000, int64(i)), CaptureLength: len(b), Length: len(b)}
		if caps[i] > 0 {
			ci.CaptureLength, b = caps[i], b[:caps[i]]
		}
		if err := w.WritePacket(ci, b); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()

	rt := flowgraph.New(flowgraph.Config{})
	defer rt.Close()
	req, err := rt.Populate(`(pcap,file=`+file+`) > c:(dta-collector,keywrite="slots=1M",append="lists=4,size=100",postcarding="chunks=10007,hops=3")`, flowgraph.RequestOptions{})
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
	st, err := req.Call("c", "summary", "")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"frames": uint64(len(frames)), "other": 1, "reports": 13, "keywrite": 1, "append": 10,
		"postcarding": 2, "keyincrement": 0, "list": 1, "disabled": 1, "opcode": 1, "short": 1, "trailing": 0}
	for k, v := range want {
		if got := st.(map[string]any)[k]; got != v {
			t.Errorf("%s = %v, want %d (state %v)", k, got, v, st)
		}
	}
	a, err := req.Call("c", "keywrite", "10.0.1.5")
	if err != nil || a.(*collector.Answer).Status != "found" || *a.(*collector.Answer).Value != 1234 {
		t.Errorf("keywrite: %+v %v", a, err)
	}
	a, err = req.Call("c", "append", "1 3")
	if e := a.(*collector.Answer).Entries; err != nil || len(e) != 3 || e[0] != 7 || e[2] != 9 {
		t.Errorf("append: %+v %v", a, err)
	}
	a, err = req.Call("c", "postcarding", "5")
	if h := a.(*collector.Answer).Hops; err != nil || len(h) != 2 || *h[0] != 10 || *h[1] != 11 {
		t.Errorf("postcarding: %+v %v", a, err)
	}
	if _, err := req.Call("c", "keyincrement", "1"); err == nil {
		t.Error("a query of a primitive not hosted answered")
	}
}
