package reporter

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/internal/netnstest"
)

// TestFullBuffer sends faster than a veth whose queue (tbf at 8 kbit/s)
// drains: the kernel refuses datagrams, with EAGAIN when the socket's send
// buffer is full, with ENOBUFS when the device queue is, and every report
// is counted as sent or unsent.
func TestFullBuffer(t *testing.T) {
	if _, err := exec.LookPath("tc"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("cannot test a full send buffer: missing tc")
		}
		t.Skip("needs tc")
	}
	for _, c := range []struct {
		limit string // the queue's, in bytes
		errno unix.Errno
	}{
		{"64mb", unix.EAGAIN},  // the queue holds more than the send buffer
		{"2000", unix.ENOBUFS}, // the queue is full first
	} {
		t.Run(c.errno.Error(), func(t *testing.T) {
			nsA, nsB, ifA, ifB := netnstest.Pair(t, "dtaf", "the reporter's count of a full send buffer", 1)
			sh := func(args ...string) {
				t.Helper()
				if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
					t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
				}
			}
			sh("ip", "-n", nsA, "addr", "add", "10.77.0.1/24", "dev", ifA)
			sh("ip", "-n", nsB, "addr", "add", "10.77.0.2/24", "dev", ifB)
			sh("ip", "-n", nsB, "link", "set", ifB, "address", "02:00:00:00:77:02")
			sh("ip", "-n", nsA, "neigh", "replace", "10.77.0.2", "lladdr", "02:00:00:00:77:02", "dev", ifA)
			sh("tc", "-n", nsA, "qdisc", "replace", "dev", ifA, "root", "tbf", "rate", "8kbit", "burst", "1600", "limit", c.limit)
			netnstest.In(t, nsA, func() {
				r := newReporter(t, functions.LinkEthernet, "op=keywrite,key=ipv4.src,data=pkt.len,to=10.77.0.2:40040")
				const batches = 16
				for range batches {
					r.Process(packets(t, buffers.MaxBatch))
				}
				sent, unsent := stateOf(r, "sent"), stateOf(r, "unsent")
				t.Logf("sent %d unsent %d in %d calls; last error %v", sent, unsent, stateOf(r, "sendcalls"), r.snd.LastErr)
				if sent+unsent != batches*buffers.MaxBatch || unsent == 0 || sent == 0 {
					t.Fatalf("sent %d + unsent %d of %d", sent, unsent, batches*buffers.MaxBatch)
				}
				if !errors.Is(r.snd.LastErr, c.errno) {
					t.Fatalf("last error %v, want %v", r.snd.LastErr, c.errno)
				}
			})
		})
	}
}
