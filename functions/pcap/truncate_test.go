package pcap

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
	"time"

	"github.com/ffpf-go/ffpf/buffers"
)

func bigFile(t *testing.T) (string, int) {
	b := smallFile(false, 32<<20)
	_ = binary.LittleEndian
	path := filepath.Join(t.TempDir(), "big.pcap")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, len(b)
}

// The file shrinks after it is mapped, before the first Fill.
func TestAdvTruncatedBeforeFill(t *testing.T) {
	path, _ := bigFile(t)
	r, err := OpenAccess(path, AccessMap)
	if err != nil {
		t.Fatal(err)
	}
	s := NewSource(r)
	if err := os.Truncate(path, 10<<20); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	n := 0
	go func() {
		// as flowspaces/user's worker does
		debug.SetPanicOnFault(true)
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("fault: %v", r)
			}
		}()
		b := buffers.NewBatch(s.PBuf(), 0, buffers.MaxBatch, 0)
		for {
			b.Reset()
			err := s.Fill(b) // batch data not touched
			n += b.N
			if err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case err := <-done:
		t.Logf("%d records, then %v", n, err)
		// Exactly what reading the cut file gives: every record before
		// the cut, then "truncated at record N".
		f, _ := os.Open(path)
		defer f.Close()
		ref, rerr := NewReader(f, path, 0)
		if rerr != nil {
			t.Fatal(rerr)
		}
		want, wantErr := readAll(t, ref)
		if n != len(want) || wantErr == nil || err == nil || err.Error() != wantErr.Error() {
			t.Errorf("got %d records then %v; the cut file has %d then %v", n, err, len(want), wantErr)
		}
	case <-time.After(60 * time.Second): // 10 MB under the race detector on a loaded machine: seconds
		c := make(chan struct{})
		go func() { s.Close(); close(c) }()
		select {
		case <-c:
			t.Fatal("Fill hangs after the file shrank; Close returned")
		case <-time.After(30 * time.Second):
			t.Fatal("Fill hangs after the file shrank, and so does Close")
		}
	}
	s.Close()
}

// The file shrinks while Fill runs on another goroutine.
func TestAdvTruncatedDuringFill(t *testing.T) {
	path, _ := bigFile(t)
	r, err := OpenAccess(path, AccessMap)
	if err != nil {
		t.Fatal(err)
	}
	s := NewSource(r)
	done := make(chan error, 1)
	go func() {
		// as flowspaces/user's worker does
		debug.SetPanicOnFault(true)
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("fault: %v", r)
			}
		}()
		b := buffers.NewBatch(s.PBuf(), 0, buffers.MaxBatch, 0)
		for {
			b.Reset()
			err := s.Fill(b)
			if err != nil {
				done <- err
				return
			}
		}
	}()
	time.Sleep(time.Millisecond)
	os.Truncate(path, 12<<20)
	select {
	case err := <-done:
		t.Logf("ended with %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Fill hangs after the file shrank")
	}
	s.Close()
}
