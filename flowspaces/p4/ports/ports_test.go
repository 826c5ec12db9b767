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

// What a FileOut records, a FileIn replays: the frames and their times.
func TestFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.pcap")
	out, err := CreateFileOut(path)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1700000000, 123456000)
	frames := [][]byte{make([]byte, 60), {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}}
	for i, f := range frames {
		if err := out.Write(f, t0.Add(time.Duration(i)*time.Microsecond)); err != nil {
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
		if err != nil || string(f) != string(want) || !ts.Equal(t0.Add(time.Duration(i)*time.Microsecond)) {
			t.Fatalf("frame %d: %x at %v, %v", i, f, ts, err)
		}
	}
	if _, _, err := in.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last frame: %v", err)
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
	if _, err := OpenFileIn(path); err == nil || !strings.Contains(err.Error(), "not a capture file") {
		t.Errorf("a text file: %v", err)
	}
}
