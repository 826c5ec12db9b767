package ports

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// What a FileOut records, a FileIn replays: the frames and their times
// to the nanosecond; gopacket's reader, another implementation, reads the
// file the same.
func TestFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.pcap")
	out, err := CreateFileOut(path)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1700000000, 123456789)
	frames := [][]byte{make([]byte, 60), {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}}
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 1001 * time.Nanosecond) }
	for i, f := range frames {
		if err := out.Write(f, at(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := out.Close(); err != nil || out.Frames() != 2 {
		t.Fatalf("%v, %d frames", err, out.Frames())
	}
	in, err := OpenFileIn(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	for i, want := range frames {
		f, ts, err := in.Next()
		if err != nil || string(f) != string(want) || !ts.Equal(at(i)) {
			t.Fatalf("frame %d: %x at %v, %v", i, f, ts, err)
		}
	}
	if _, _, err := in.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last frame: %v", err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	oracle, err := pcapgo.NewReader(f)
	if err != nil || oracle.LinkType() != layers.LinkTypeEthernet {
		t.Fatalf("gopacket reads the file as %v: %v", oracle.LinkType(), err)
	}
	for i, want := range frames {
		f, ci, err := oracle.ReadPacketData()
		if err != nil || string(f) != string(want) || !ci.Timestamp.Equal(at(i)) || ci.Length != len(want) {
			t.Fatalf("gopacket's frame %d: %x at %v (%d on the wire), %v", i, f, ci.Timestamp, ci.Length, err)
		}
	}
}

// A truncated file ends its replay with an error that says so, after the
// frames before the cut.
func TestFileInTruncated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.pcap")
	out, err := CreateFileOut(path)
	if err != nil {
		t.Fatal(err)
	}
	out.Write(make([]byte, 60), time.Unix(1, 0))
	out.Write(make([]byte, 60), time.Unix(2, 0))
	out.Close()
	st, _ := os.Stat(path)
	os.Truncate(path, st.Size()-10)
	in, err := OpenFileIn(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if _, _, err := in.Next(); err != nil {
		t.Fatalf("the first frame: %v", err)
	}
	if _, _, err := in.Next(); err == nil || errors.Is(err, io.EOF) || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("the cut frame: %v", err)
	}
}

func TestFileInRefusesOtherLinks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raw.pcap")
	f, _ := os.Create(path)
	pcapgo.NewWriter(f).WriteFileHeader(65536, layers.LinkTypeRaw)
	f.Close()
	if _, err := OpenFileIn(path); err == nil || !strings.Contains(err.Error(), "takes Ethernet frames") {
		t.Errorf("a raw-IP capture: %v", err)
	}
	os.WriteFile(path, []byte("not a capture"), 0o644)
	if _, err := OpenFileIn(path); err == nil || !strings.Contains(err.Error(), "not a pcap or pcapng file") {
		t.Errorf("a text file: %v", err)
	}
}
