package export

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/pcap"
)

// cutAfter writes through to a file until limit bytes, then stops short
// like a full disk.
type cutAfter struct {
	f        *os.File
	limit, n int
}

func (c *cutAfter) Write(p []byte) (int, error) {
	k := min(len(p), c.limit-c.n)
	k, err := c.f.Write(p[:k])
	c.n += k
	if err == nil && k < len(p) {
		err = syscall.ENOSPC
	}
	return k, err
}

// batchOf returns a batch of n packets of size bytes each.
func batchOf(n, size int) *buffers.Batch {
	pb := buffers.NewPBuf(n, size)
	b := buffers.NewBatch(pb, 0, n, 0)
	for i := range n {
		p := bytes.Repeat([]byte{byte(i + 1)}, size)
		b.Append(p, uint32(size), int64(i)*1e9)
	}
	return b
}

// readAll reads a capture file with the pcap class's reader: the records,
// and the error that ended them (nil at a clean end).
func readAll(t *testing.T, path string) (int, error) {
	t.Helper()
	r, err := pcap.OpenAccess(path, pcap.AccessRead)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	for n := 0; ; n++ {
		if _, _, _, err := r.Next(); err != nil {
			if err == io.EOF {
				err = nil
			}
			return n, err
		}
	}
}

// A write that stops short in the middle of a record (a full disk) leaves
// a file that ends with the last whole record: readers open it and read
// every record written, without a "truncated" error; the packets not
// written are dropped.
func TestShortWriteLeavesWholeRecords(t *testing.T) {
	for _, ng := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "out.pcap")
		hdr, rec := 24, 16+100
		if ng {
			path += "ng"
			hdr, rec = 72, 28+100+4
		}
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		w := &cutAfter{f: f, limit: hdr + 2*rec + 50}
		var e interface {
			functions.Function
			Close() error
		}
		if ng {
			x := newNg(w, path, 200)
			x.attach(f, Options{})
			err = x.writeHeader(functions.LinkEthernet)
			e = x
		} else {
			x := newExporter(w, path, 1, 200)
			x.attach(f, Options{})
			err = x.writeHeader(1)
			e = x
		}
		if err != nil {
			t.Fatal(err)
		}
		b := batchOf(5, 100)
		e.Process(b)
		if b.N != 2 || b.Dropped != 3 {
			t.Errorf("%s: %d passed, %d dropped", path, b.N, b.Dropped)
		}
		if err := e.Close(); err == nil || !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("%s: Close: %v", path, err)
		}
		if st, _ := os.Stat(path); st.Size() != int64(hdr+2*rec) {
			t.Errorf("%s: %d bytes, want the header and two whole records, %d", path, st.Size(), hdr+2*rec)
		}
		if n, err := readAll(t, path); n != 2 || err != nil {
			t.Errorf("%s reads back as %d records, then %v", path, n, err)
		}
	}
}

// A header written in part is removed: the file is left empty.
func TestShortHeaderLeavesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	e := newExporter(&cutAfter{f: f, limit: 10}, path, 1, 200)
	e.attach(f, Options{})
	if err := e.writeHeader(1); err == nil || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("header: %v", err)
	}
	if st, _ := os.Stat(path); st.Size() != 0 {
		t.Errorf("%d bytes of a header left", st.Size())
	}
}

// A full file system, for real: a tmpfs of 64 KB that the test mounts.
// Whatever the batch the disk fills in, the file ends with a whole record
// and tcpdump reads it without complaint; what was not written is dropped.
func TestFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("cannot mount a small tmpfs: not root")
		}
		t.Skip("needs root to mount a small tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v: %s", err, out)
	}
	defer exec.Command("umount", dir).Run()
	for _, name := range []string{"full.pcap", "full.pcapng"} {
		path := filepath.Join(dir, name)
		var e interface {
			functions.Function
			Close() error
		}
		var err error
		if IsPcapng(name) {
			e, err = CreateNg(path, functions.LinkEthernet, 2000)
		} else {
			e, err = Create(path, functions.LinkEthernet, 2000)
		}
		if err != nil {
			t.Fatal(err)
		}
		written, dropped := 0, 0
		for i := 0; i < 100; i++ {
			b := batchOf(7, 999) // records that do not fit pages evenly
			e.Process(b)
			written += b.N
			dropped += b.Dropped
			if b.N+b.Dropped != 7 {
				t.Fatalf("batch %d: %d passed + %d dropped of 7", i, b.N, b.Dropped)
			}
		}
		err = e.Close()
		if err == nil || err.Error() != "cannot write "+path+": no space left on device" {
			t.Errorf("Close: %v", err)
		}
		if written == 0 || dropped == 0 {
			t.Fatalf("%d written, %d dropped: the disk did not fill", written, dropped)
		}
		if n, err := readAll(t, path); n != written || err != nil {
			t.Errorf("%s reads back as %d records, then %v; %d were written", name, n, err, written)
		}
		if td, err := exec.LookPath("tcpdump"); err == nil {
			out, err := exec.Command(td, "-r", path, "-w", "/dev/null").CombinedOutput()
			if err != nil || strings.Contains(string(out), "truncated") {
				t.Errorf("tcpdump -r %s: %v: %s", name, err, out)
			}
		}
		os.Remove(path) // room for the next one
	}
}

// "-" is standard output, for pcap and pcapng alike: no file named "-"
// appears.
func TestDashIsStdout(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, ng := range []bool{false, true} {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan []byte)
		go func() { b, _ := io.ReadAll(pr); got <- b }()
		o := Options{Stdout: pw}
		var e interface {
			functions.Function
			Close() error
		}
		if ng {
			e, err = CreateNgWith("-", functions.LinkEthernet, 300, o)
		} else {
			e, err = CreateFieldWith("-", 1, 300, o)
		}
		if err != nil {
			t.Fatal(err)
		}
		b := batchOf(3, 100)
		e.Process(b)
		if err := e.Close(); err != nil || b.N != 3 {
			t.Fatalf("Close: %v; %d passed", err, b.N)
		}
		pw.Close()
		data := <-got
		pr.Close()
		magic := binary.LittleEndian.Uint32(data)
		if ng && (magic != ngSHB || len(data) != 72+3*132) || !ng && (magic != 0xa1b2c3d4 || len(data) != 24+3*116) {
			t.Errorf("pcapng %v: standard output got %d bytes starting % x", ng, len(data), data[:min(8, len(data))])
		}
		if _, err := os.Stat("-"); err == nil {
			t.Fatal(`a file named "-" was created`)
		}
	}
}

// A pipe whose reader has gone: with Options.Closed the exporter says so
// once and stops without an error (the run ends, as tcpdump's does);
// without it the broken pipe is a write error. Either way the packets
// not written are dropped.
func TestClosedReader(t *testing.T) {
	for _, notify := range []bool{true, false} {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		calls := 0
		o := Options{Stdout: pw}
		if notify {
			o.Closed = func(name string) {
				calls++
				if name != "standard output" {
					t.Errorf("Closed(%q)", name)
				}
			}
		}
		e, err := CreateFieldWith("-", 1, 300, o)
		if err != nil {
			t.Fatal(err)
		}
		pr.Close()
		for range 2 {
			b := batchOf(3, 100)
			e.Process(b)
			if b.N != 0 || b.Dropped != 3 {
				t.Errorf("%d passed, %d dropped", b.N, b.Dropped)
			}
		}
		err = e.Close()
		pw.Close()
		if notify && (err != nil || calls != 1) {
			t.Errorf("with Closed: Close %v, %d calls", err, calls)
		}
		if !notify && (err == nil || err.Error() != "cannot write standard output: broken pipe") {
			t.Errorf("without Closed: Close %v", err)
		}
	}
}

// A pipe whose reader has gone before the header is written: the same.
func TestClosedBeforeHeader(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	pr.Close()
	calls := 0
	e, err := CreateFieldWith("-", 1, 300, Options{Stdout: pw, Closed: func(string) { calls++ }})
	if err != nil || calls != 1 {
		t.Fatalf("Create: %v, %d calls", err, calls)
	}
	b := batchOf(3, 100)
	e.Process(b)
	if b.N != 0 || b.Dropped != 3 || e.Close() != nil || calls != 1 {
		t.Errorf("%d passed, %d dropped, %d calls", b.N, b.Dropped, calls)
	}
	if _, err := CreateFieldWith("-", 1, 300, Options{Stdout: pw}); err == nil || err.Error() != "cannot write standard output: broken pipe" {
		t.Errorf("without Closed: %v", err)
	}
}

// A write blocked on a pipe that nobody empties returns once the context
// is done (^C): the packets not written are dropped, and that is no error.
func TestInterruptBlockedWrite(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	ctx, cancel := context.WithCancel(context.Background())
	e, err := CreateFieldWith("-", 1, 70000, Options{Stdout: pw, Context: ctx})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *buffers.Batch)
	go func() {
		b := batchOf(20, 60000) // more than a pipe holds
		e.Process(b)
		done <- b
	}()
	cancel()
	b := <-done
	if b.N+b.Dropped != 20 || b.Dropped == 0 {
		t.Errorf("%d passed, %d dropped", b.N, b.Dropped)
	}
	if err := e.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}
