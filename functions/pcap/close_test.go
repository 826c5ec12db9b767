package pcap

import (
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ffpf-go/ffpf/buffers"
)

func TestAdvCloseDuringZeroCopyFill(t *testing.T) {
	b := hostile(5, orders[0].o, false, 20<<20)
	path := filepath.Join(t.TempDir(), "c.pcap")
	os.WriteFile(path, b, 0o644)
	rng := rand.New(rand.NewSource(1))
	for it := 0; it < 40; it++ {
		r, err := OpenAccess(path, AccessMap)
		if err != nil {
			t.Fatal(err)
		}
		s := NewSource(r)
		var wg sync.WaitGroup
		wg.Add(1)
		var last error
		go func() {
			defer wg.Done()
			view := s.PBuf()
			own := buffers.NewPBuf(buffers.MaxBatch, MaxRecordLen)
			for i := 0; ; i++ {
				pb := view
				if i%5 == 4 {
					pb = own
				}
				bt := buffers.NewBatch(pb, 0, 1+i%buffers.MaxBatch, 0)
				if err := s.Fill(bt); err != nil {
					last = err
					return
				}
			}
		}()
		time.Sleep(time.Duration(rng.Intn(3000)) * time.Microsecond)
		if it%2 == 0 {
			s.Interrupt()
		}
		s.Close()
		wg.Wait()
		if last != io.EOF {
			t.Fatalf("it %d: %v", it, last)
		}
	}
}
