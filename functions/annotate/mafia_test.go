package annotate_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/match"
)

// TestTagMAFIA: the writes MAFIA's programs make. checksum=keep leaves
// the IPv4 header checksum as it was; ipv4.csum writes the checksum
// itself; value= is an expression of each packet, cut to the field.
func TestTagMAFIA(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		field, value string
		want         func(h []byte) []byte // the header as the copy should have it (IPv4, 20 bytes)
	}{
		{"ipv4.tos", "ipv4.tos | 1", func(h []byte) []byte { h[1] |= 1; return h }},
		{"ipv4.id", "ipv4.id + 70000", func(h []byte) []byte {
			binary.BigEndian.PutUint16(h[4:], binary.BigEndian.Uint16(h[4:])+uint16(70000&0xffff))
			return h
		}},
		{"ipv4.csum", "ipv4.csum | 0x8001", func(h []byte) []byte { h[10] |= 0x80; h[11] |= 1; return h }},
		{"ipv4.csum", "0", func(h []byte) []byte { h[10], h[11] = 0, 0; return h }},
	} {
		orig, cp := filepath.Join(dir, "orig.pcap"), filepath.Join(dir, "copy.pcap")
		st := run(t, fmt.Sprintf(`(gen,packets=2000,vlan=0.2) > [(export,file=%s) | (tag,field=%s,value=%q,checksum=keep) > (export,file=%s)]`,
			orig, tc.field, tc.value, cp))
		if f := st["tag#1"]; f.Records != 2000 {
			t.Fatalf("%s=%s: %d copies", tc.field, tc.value, f.Records)
		}
		a, b := readPcap(t, orig), readPcap(t, cp)
		n := 0
		for i := range a {
			if onesSum(a[i]) < 0 {
				if !bytes.Equal(a[i], b[i]) {
					t.Fatalf("%s: copy %d of a packet without the field differs", tc.field, i)
				}
				continue
			}
			at := ipv4Checksum(a[i]) - 10
			want := append([]byte(nil), a[i]...)
			tc.want(want[at : at+20])
			if !bytes.Equal(want, b[i]) {
				t.Fatalf("%s=%s: copy %d\n got  %x\n want %x", tc.field, tc.value, i, b[i][at:at+20], want[at:at+20])
			}
			n++
		}
		if n < 1000 {
			t.Fatalf("%s: %d IPv4 packets", tc.field, n)
		}
	}
}

// TestTagSegway writes an ez-Segway message's clock and time, keeping the
// UDP checksum right, and its value is read back by match.
func TestTagSegway(t *testing.T) {
	frame := segwayFrame(3, 7, 0)
	if got := udpChecksumOK(frame); !got {
		t.Fatal("the test's frame has a bad UDP checksum")
	}
	c, _ := functions.Default.Lookup("tag")
	for _, tc := range []struct {
		field string
		value uint64
	}{{"segway.ts", 200}, {"segway.time", 1<<40 + 5}} {
		p, err := c.Bind([]functions.Arg{
			{Key: "field", Value: functions.Raw{Kind: functions.RawWord, Text: tc.field}},
			{Key: "value", Value: functions.Raw{Kind: functions.RawString, Text: fmt.Sprint(tc.value)}}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := &functions.Context{ID: "tag#1", Params: p, LinkType: functions.LinkEthernet, Snaplen: 200}
		if err := c.Validate(ctx); err != nil {
			t.Fatal(err)
		}
		fn, err := c.New(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []byte
		fn.(functions.Producer).SetEmit(func(b *buffers.Batch) { out = append([]byte(nil), b.PBuf.Data(b.E[0].Slot)...) })
		pb := buffers.NewPBuf(1, 200)
		b := buffers.NewBatch(pb, 0, 1, 0)
		b.Append(frame, uint32(len(frame)), 1)
		fn.Process(b)
		if !udpChecksumOK(out) {
			t.Errorf("%s: the UDP checksum is wrong after the write", tc.field)
		}
		m, err := match.Compile(fmt.Sprintf("%s == %d and segway.msg == 3", tc.field, tc.value), functions.LinkEthernet)
		if err != nil {
			t.Fatal(err)
		}
		pb2 := buffers.NewPBuf(1, 200)
		b2 := buffers.NewBatch(pb2, 0, 1, 0)
		b2.Append(out, uint32(len(out)), 1)
		if !m.Eval(pb2, 0) {
			t.Errorf("%s: match does not read %d back", tc.field, tc.value)
		}
	}
}

// segwayFrame is an Ethernet/IPv4/UDP frame to port 6655 with an
// ez-Segway message.
func segwayFrame(msg, ts byte, time uint64) []byte {
	f := make([]byte, 14+20+8+match.SegwayLen)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(20+8+match.SegwayLen))
	copy(ip[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	u := ip[20:]
	binary.BigEndian.PutUint16(u[0:], 5555)
	binary.BigEndian.PutUint16(u[2:], match.SegwayPort)
	binary.BigEndian.PutUint16(u[4:], uint16(8+match.SegwayLen))
	u[8], u[9] = msg, ts
	binary.BigEndian.PutUint64(u[16:], time)
	binary.BigEndian.PutUint16(u[6:], ^udpSum(f))
	return f
}

// udpSum is the one's complement sum of the UDP datagram of frame and its
// pseudo header (the checksum field as it is).
func udpSum(f []byte) uint16 {
	ip := f[14:]
	u := ip[20:]
	var s uint32
	for i := 12; i < 20; i += 2 {
		s += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	s += 17 + uint32(len(u))
	for i := 0; i+1 < len(u); i += 2 {
		s += uint32(binary.BigEndian.Uint16(u[i:]))
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

func udpChecksumOK(f []byte) bool { return udpSum(f) == 0xffff }
