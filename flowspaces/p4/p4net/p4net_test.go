package p4net_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/ffpf-go/ffpf/flowspaces/p4/p4net"
	_ "github.com/ffpf-go/ffpf/functions/builtin"
	"github.com/ffpf-go/ffpf/functions/gen"
	"github.com/ffpf-go/ffpf/lang/mafia"
)

type frame struct {
	data []byte
	t    time.Time
}

func trace(cfg gen.Config) []frame {
	g := gen.New(cfg)
	var fs []frame
	buf := make([]byte, gen.MaxFrameLen)
	for {
		n, _, ts, ok := g.Next(buf)
		if !ok {
			return fs
		}
		fs = append(fs, frame{bytes.Clone(buf[:n]), time.Unix(0, ts)})
	}
}

func writePcap(t *testing.T, path string, fs []frame) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriterNanos(f)
	if err := w.WriteFileHeader(65536, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	for _, fr := range fs {
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: fr.t, CaptureLength: len(fr.data), Length: len(fr.data)}, fr.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func readPcap(t *testing.T, path string) [][]byte {
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
	var out [][]byte
	for {
		d, _, err := r.ReadPacketData()
		if err != nil {
			return out
		}
		out = append(out, d)
	}
}

// path3 is three switches in a row: s1:1 takes the trace, s3:2 gives it
// out.
func path3(dir string) string {
	return fmt.Sprintf(`
switches:
  - {name: s1, role: first_hop}
  - {name: s2, role: intermediate}
  - {name: s3, role: last_hop}
links: ["s1:2 s2:1", "s2:2 s3:1"]
ports: {"s1:1": "in:%[1]s/trace.pcap", "s3:2": "out:%[1]s/out.pcap"}
routes: {s1: {1: 2}, s2: {1: 2}, s3: {1: 2}}
`, dir)
}

func run(t *testing.T, netYAML, program string) *p4net.Result {
	t.Helper()
	cfg, err := p4net.Parse([]byte(netYAML), "net.yaml")
	if err != nil {
		t.Fatal(err)
	}
	prog, err := mafia.Parse(program)
	if err != nil {
		t.Fatal(err)
	}
	res, err := mafia.Compile(prog, mafia.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var secs []p4net.Section
	for _, r := range res.Requests {
		secs = append(secs, p4net.Section{Role: r.Role, Req: r.Req, Copies: r.Copies})
	}
	progs, err := p4net.Programs(cfg, secs, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := p4net.Start(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	out, err := p4net.Run(n, progs, p4net.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Postcards on a path of three: every switch sends a copy of each packet
// with its ports and id written into the copy's IPv4 header, and the
// packets leave the path as they entered it.
func TestPostcardsOnAPath(t *testing.T) {
	dir := t.TempDir()
	fs := trace(gen.Config{Seed: 1, Packets: 400, Flows: 30, IPv6: 0.2, VLAN: 0.1})
	writePcap(t, filepath.Join(dir, "trace.pcap"), fs)
	res := run(t, path3(dir), fmt.Sprintf(`
pkts >> duplicate(postcards)
postcards >> tag(ipv4.checksum, pkt.input_port) >> tag(ipv4.identification, pkt.output_port)
          >> tag(ipv4.tos, switch.id) >> collect("file:%s/postcards.pcap")
`, dir))
	out := readPcap(t, filepath.Join(dir, "out.pcap"))
	if len(out) != len(fs) {
		t.Fatalf("%d packets left the path of %d", len(out), len(fs))
	}
	for i := range out {
		if !bytes.Equal(out[i], fs[i].data) {
			t.Fatalf("packet %d left the path changed", i)
		}
	}
	cards := readPcap(t, filepath.Join(dir, "postcards.pcap"))
	if len(cards) != 3*len(fs) {
		t.Fatalf("%d postcards of %d packets on 3 switches", len(cards), len(fs))
	}
	// Each IPv4 packet's three postcards: (in 1, out 2, switch 1..3).
	seen := map[[3]int]int{}
	v4 := 0
	for _, c := range cards {
		ip := ipv4(c)
		if ip < 0 {
			continue
		}
		v4++
		seen[[3]int{int(binary.BigEndian.Uint16(c[ip+10:])), int(binary.BigEndian.Uint16(c[ip+4:])), int(c[ip+1])}]++
	}
	for sw := 1; sw <= 3; sw++ {
		if seen[[3]int{1, 2, sw}] != v4/3 || v4 == 0 {
			t.Errorf("switch %d: %d postcards with ports 1 → 2 of %d IPv4 ones: %v", sw, seen[[3]int{1, 2, sw}], v4, seen)
		}
	}
	for _, s := range res.Switches {
		if s.Copies != uint64(len(fs)) {
			t.Errorf("%s sent %d copies", s.Name, s.Copies)
		}
	}
}

// ipv4 returns the offset of a frame's IPv4 header (after VLAN tags), or
// -1.
func ipv4(f []byte) int {
	off := 12
	for off+2 <= len(f) {
		et := binary.BigEndian.Uint16(f[off:])
		switch et {
		case 0x8100, 0x88a8:
			off += 4
			continue
		case 0x0800:
			if off+2+20 <= len(f) {
				return off + 2
			}
		}
		return -1
	}
	return -1
}
