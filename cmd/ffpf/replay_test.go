package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// These tests hold file replay to tcpdump -r: records longer than the
// snap length, wire lengths below the captured length, the FCS bits of the
// link-type field, files of either byte order, pseudo-headers written in
// the other byte order. Each runs with every way of reading a file
// (read(2) into a ring of chunks referred to in place, the default;
// read(2) and copy; mapped, zero-copy).

var accesses = []struct{ name, env string }{{"ring", "FFPF_PCAP_READ=ring"}, {"read", "FFPF_PCAP_READ=read"}, {"mmap", "FFPF_PCAP_READ=mmap"}}

func ffpfEnv(t *testing.T, env string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(ffpfBin, args...)
	cmd.Env = append(os.Environ(), env)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(errb.String(), "goroutine ") {
		t.Fatalf("ffpf %v printed a stack trace:\n%s", args, errb.String())
	}
	return cliResult{out.String(), errb.String(), code}
}

type precord struct {
	sec, frac  uint32
	incl, orig uint32 // as written in the record header
	data       []byte // incl bytes
}

// writeClassic writes a classic pcap file in byte order o.
func writeClassic(t *testing.T, path string, o binary.ByteOrder, nanos bool, snaplen, linkField uint32, recs []precord) {
	writeClassicVersion(t, path, o, nanos, 4, snaplen, linkField, recs)
}

// writeClassicVersion writes format 2.minor: before 2.3 the record
// header's captured and wire lengths were the other way round.
func writeClassicVersion(t *testing.T, path string, o binary.ByteOrder, nanos bool, minor uint16, snaplen, linkField uint32, recs []precord) {
	t.Helper()
	var b bytes.Buffer
	h := make([]byte, 24)
	magic := uint32(0xa1b2c3d4)
	if nanos {
		magic = 0xa1b23c4d
	}
	o.PutUint32(h, magic)
	o.PutUint16(h[4:], 2)
	o.PutUint16(h[6:], minor)
	o.PutUint32(h[16:], snaplen)
	o.PutUint32(h[20:], linkField)
	b.Write(h)
	for _, r := range recs {
		rh := make([]byte, 16)
		o.PutUint32(rh, r.sec)
		o.PutUint32(rh[4:], r.frac)
		if minor < 3 || (minor == 3 && r.incl < r.orig) {
			o.PutUint32(rh[8:], r.orig)
			o.PutUint32(rh[12:], r.incl)
		} else {
			o.PutUint32(rh[8:], r.incl)
			o.PutUint32(rh[12:], r.orig)
		}
		b.Write(rh)
		b.Write(r.data)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// ethRecords returns n Ethernet/IPv4 TCP and UDP frames, some longer than
// snaplen, some with a wire length below the captured length.
func ethRecords(n int, snaplen uint32, seed int64) []precord {
	rng := rand.New(rand.NewSource(seed))
	recs := make([]precord, n)
	for i := range recs {
		size := 42 + rng.Intn(int(snaplen)+100) // a third or so longer than snaplen
		d := make([]byte, size)
		rng.Read(d)
		copy(d, []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0, 0x45, 0})
		binary.BigEndian.PutUint16(d[16:], uint16(size-14))
		d[22], d[23] = 64, []byte{6, 17}[i%2]
		orig := uint32(size)
		switch i % 5 {
		case 1:
			orig = uint32(size) - uint32(rng.Intn(size)) // below the captured length
		case 2:
			orig = uint32(size) + uint32(rng.Intn(1000))
		}
		recs[i] = precord{sec: 1700000000 + uint32(i/1000), frac: uint32(i%1000) * 997, incl: uint32(size), orig: orig, data: d}
	}
	return recs
}

// tcpdumpOrSkip returns tcpdump's path.
func tcpdumpOrSkip(t *testing.T) string {
	p, err := exec.LookPath("tcpdump")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("tcpdump, the oracle, is not installed (make deps installs it)")
		}
		t.Skip("tcpdump not installed (make deps)")
	}
	return p
}

// tcpdumpWrite is tcpdump -r in -w out: the records as libpcap delivers them.
func tcpdumpWrite(t *testing.T, tcpdump, in, out string) []byte {
	t.Helper()
	if o, err := exec.Command(tcpdump, "-r", in, "-w", out).CombinedOutput(); err != nil {
		t.Fatalf("tcpdump -r %s -w: %v: %s", in, err, o)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func tcpdumpLines(t *testing.T, tcpdump, in, expr string) uint64 {
	t.Helper()
	o, err := exec.Command(tcpdump, "-nn", "-r", in, expr).Output()
	if err != nil {
		t.Fatalf("tcpdump -r %s %q: %v", in, expr, err)
	}
	return uint64(bytes.Count(o, []byte("\n")))
}

// wireBytes sums the wire lengths of a pcap file that tcpdump wrote.
func wireBytes(b []byte) (sum uint64) {
	for p := 24; p+16 <= len(b); {
		incl := binary.LittleEndian.Uint32(b[p+8:])
		sum += uint64(binary.LittleEndian.Uint32(b[p+12:]))
		p += 16 + int(incl)
	}
	return sum
}

func TestReplayMatchesTcpdump(t *testing.T) {
	tcpdump := tcpdumpOrSkip(t)
	dir := t.TempDir()
	const fcs = 1<<26 | 4<<28 // the F bit and an FCS length of 4 bytes (pcap-savefile(5))
	files := []struct {
		name    string
		o       binary.ByteOrder
		nanos   bool
		snaplen uint32
		field   uint32
		minor   uint16
	}{
		{"le-us", binary.LittleEndian, false, 200, 1, 4},
		{"be-ns-fcs", binary.BigEndian, true, 200, 1 | fcs, 4},
		{"le-fcs-snap0", binary.LittleEndian, false, 0, 1 | fcs, 4},
		{"le-v2.2", binary.LittleEndian, false, 200, 1, 2}, // lengths swapped
		{"be-v2.3", binary.BigEndian, false, 200, 1, 3},    // lengths swapped where they look so
	}
	for i, f := range files {
		in := filepath.Join(dir, f.name+".pcap")
		snap := f.snaplen
		if snap == 0 {
			snap = 300
		}
		// enough records for the mapped path's index to cut windows
		recs := ethRecords(20000, snap, int64(i))
		if f.minor == 3 { // 2.3 cannot tell a wire length below the captured one from swapped lengths
			for j := range recs {
				recs[j].orig = max(recs[j].orig, recs[j].incl)
			}
		}
		writeClassicVersion(t, in, f.o, f.nanos, f.minor, f.snaplen, f.field, recs)
		want := tcpdumpWrite(t, tcpdump, in, filepath.Join(dir, f.name+".tcpdump.pcap"))
		if got := binary.LittleEndian.Uint32(want[20:]); got != f.field {
			t.Fatalf("%s: tcpdump wrote link-type field %#x, want %#x", f.name, got, f.field)
		}
		short := tcpdumpLines(t, tcpdump, in, "less 60")
		long := tcpdumpLines(t, tcpdump, in, "greater 250")
		for _, a := range accesses {
			name := f.name + "/" + a.name
			out := filepath.Join(dir, name[:len(f.name)]+"."+a.name+".pcap")
			r := ffpfEnv(t, a.env, "run", "--json", "-r", in, "-w", out, "(bytecount)")
			if r.code != 0 {
				t.Fatalf("%s: exit %d: %s", name, r.code, r.stderr)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s: -w output differs from tcpdump -r F -w G's (%d and %d bytes; header %x, tcpdump's %x)%s",
					name, len(got), len(want), got[:min(24, len(got))], want[:24], firstByteDiff(got, want))
			}
			doc := parseRun(t, r)
			if b := doc.Functions[doc.byClass("bytecount")[0]].State["bytes"]; b != float64(wireBytes(want)) {
				t.Errorf("%s: bytecount %v, tcpdump's records say %d", name, b, wireBytes(want))
			}
			for expr, n := range map[string]uint64{"less 60": short, "greater 250": long} {
				r := ffpfEnv(t, a.env, "run", "--json", "-r", in, fmt.Sprintf("(bpf,%q) > (pktcount)", expr))
				if r.code != 0 {
					t.Fatalf("%s %q: exit %d: %s", name, expr, r.code, r.stderr)
				}
				doc := parseRun(t, r)
				if got := doc.Functions[doc.byClass("pktcount")[0]].Out; got != n {
					t.Errorf("%s %q: ffpf %d packets, tcpdump %d", name, expr, got, n)
				}
			}
		}
	}
}

func firstByteDiff(a, b []byte) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("; first difference at byte %d", i)
		}
	}
	return ""
}

// pseudoRecords returns records of link type lt whose pseudo-headers
// libpcap converts when the file is of the other byte order.
func pseudoRecords(lt uint32, o binary.ByteOrder, rng *rand.Rand) []precord {
	var recs []precord
	add := func(d []byte) {
		for cut := range []int{0, 1} { // whole, and cut short at a random byte
			dd := d
			if cut == 1 {
				dd = d[:rng.Intn(len(d)+1)]
			}
			recs = append(recs, precord{sec: 1700000000, frac: uint32(len(recs)), incl: uint32(len(dd)), orig: uint32(len(d)), data: dd})
		}
	}
	for i := range 200 {
		switch lt {
		case 220, 189: // Linux USB, memory-mapped (64 bytes) or not (48)
			hl := 48
			if lt == 220 {
				hl = 64
			}
			ndesc := rng.Intn(4)
			d := make([]byte, hl+16*ndesc+rng.Intn(32))
			rng.Read(d)
			d[9] = byte(i % 4) // transfer type: 0 is isochronous
			if lt == 220 {
				o.PutUint32(d[60:], uint32(ndesc))
			}
			add(d)
		case 239: // NFLOG: a 4-byte header, then TLVs of host-order type and length
			d := []byte{2, 0, 0, 0}
			for range 1 + rng.Intn(4) {
				l := 4 + rng.Intn(12)
				tlv := make([]byte, (l+3)&^3)
				rng.Read(tlv)
				o.PutUint16(tlv, uint16(l))
				o.PutUint16(tlv[2:], uint16(rng.Intn(20)))
				d = append(d, tlv...)
			}
			if i%7 == 0 {
				d[1] = 1 // another version: left alone
			}
			add(d)
		case 113, 276: // Linux cooked, CAN and CAN FD frames and others
			hl, po := 16, 14
			if lt == 276 {
				hl, po = 20, 0
			}
			d := make([]byte, hl+16)
			rng.Read(d)
			binary.BigEndian.PutUint16(d[po:], []uint16{0x000c, 0x000d, 0x0800}[i%3])
			add(d)
		case 117: // pflog: uid, pid, rule_uid and rule_pid in host order
			d := make([]byte, 61+rng.Intn(20))
			rng.Read(d)
			d[0] = byte(44 + rng.Intn(24)) // its own length decides how many fields
			add(d)
		}
	}
	return recs
}

func TestReplayPseudoHeadersMatchTcpdump(t *testing.T) {
	tcpdump := tcpdumpOrSkip(t)
	dir := t.TempDir()
	other := binary.ByteOrder(binary.BigEndian)
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		other = binary.LittleEndian
	}
	rng := rand.New(rand.NewSource(5))
	for _, lt := range []uint32{220, 189, 239, 113, 276, 117} {
		for _, o := range []binary.ByteOrder{other, binary.NativeEndian} {
			name := fmt.Sprintf("lt%d-%v", lt, o)
			in := filepath.Join(dir, name+".pcap")
			writeClassic(t, in, o, false, 65535, lt, pseudoRecords(lt, o, rng))
			want := tcpdumpWrite(t, tcpdump, in, filepath.Join(dir, name+".tcpdump.pcap"))
			for _, a := range accesses {
				out := filepath.Join(dir, name+"."+a.name+".pcap")
				r := ffpfEnv(t, a.env, "run", "-r", in, "-w", out, "(pktcount)")
				if r.code != 0 {
					t.Fatalf("%s/%s: exit %d: %s", name, a.name, r.code, r.stderr)
				}
				got, _ := os.ReadFile(out)
				if !bytes.Equal(got, want) {
					t.Errorf("%s/%s: -w output differs from tcpdump's (%d and %d bytes)%s", name, a.name, len(got), len(want), firstByteDiff(got, want))
				}
			}
		}
	}
}
