package monitor_test

import (
	"encoding/binary"
	"testing"

	"github.com/ffpf-go/ffpf/functions/trumpet/event"
	"github.com/ffpf-go/ffpf/functions/trumpet/internal/oracle"
)

// udp6Frame is an Ethernet/IPv6/UDP frame of 2001:db8::src to 2001:db8::dst.
func udp6Frame(src, dst byte, sport, dport uint16) []byte {
	b := make([]byte, 14+40+8)
	b[12], b[13] = 0x86, 0xdd
	ip := b[14:]
	ip[0], ip[6], ip[7] = 0x60, 17, 64
	binary.BigEndian.PutUint16(ip[4:], 8)
	ip[8], ip[9], ip[23] = 0x20, 0x01, src
	ip[24], ip[25], ip[39] = 0x20, 0x01, dst
	u := ip[40:]
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], 8)
	return b
}

// A granularity without an address (proto, ports) makes one bucket of
// IPv4 and IPv6 flows alike: its report's key names no family, so two
// buckets would be two reports of the same key in one interval.
func TestGranularityWithoutAddressMergesFamilies(t *testing.T) {
	var evs []event.Event
	for _, l := range []string{
		"byproto: *; count() > 0; proto; 10ms",
		"byport: *; count() > 0; dstport; 10ms",
		"bysrc: *; count() > 0; srcip/0,proto; 10ms", // the family is in the key: two buckets
	} {
		ev, err := event.ParseLine(l)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	trace := []oracle.Packet{
		{Data: udpFrame([4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}, 1000, 53), TS: 1},
		{Data: udp6Frame(1, 2, 1000, 53), TS: 2},
		{Data: udpFrame([4]byte{10, 0, 0, 3}, [4]byte{10, 0, 0, 2}, 1001, 53), TS: 3},
		{Data: udp6Frame(3, 2, 1001, 53), TS: 4},
		{Data: udpFrame([4]byte{10, 0, 0, 3}, [4]byte{10, 0, 0, 2}, 1001, 53), TS: epoch + 1},
	}
	got, _ := run(t, evs, trace, false) // a key reported twice fails here
	want := map[string]float64{
		"byproto|0|proto=udp":               4,
		"byport|0|dstport=53":               4,
		"bysrc|0|srcip=0.0.0.0/0,proto=udp": 2,
		"bysrc|0|srcip=::/0,proto=udp":      2,
		// the last interval, reported at the end of the input
		"byproto|10000000|proto=udp":               1,
		"byport|10000000|dstport=53":               1,
		"bysrc|10000000|srcip=0.0.0.0/0,proto=udp": 1,
	}
	compare(t, "families", got, want)
}
