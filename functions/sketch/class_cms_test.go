package sketch

import (
	"sync"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/gen"
)

// A cms writes its counters plainly until Read hands out a reader of them;
// a reader obtained while another goroutine processes batches must find
// every later write atomic and every earlier one published (go test -race
// checks both), and estimates that only grow.
func TestCMSReaderWhileProcessing(t *testing.T) {
	p, err := cmsClass.Bind([]functions.Arg{{Key: "key", Value: functions.Raw{Kind: functions.RawWord, Text: "srcip"}}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCMS(&functions.Context{Params: p, LinkType: functions.LinkEthernet})
	if err != nil {
		t.Fatal(err)
	}
	pb := buffers.NewPBuf(buffers.MaxBatch, gen.MaxFrameLen)
	b := buffers.NewBatch(pb, 0, buffers.MaxBatch, 0)
	g := gen.New(gen.Config{Seed: 9, Packets: buffers.MaxBatch, Flows: 4})
	for b.Room() > 0 {
		c0, w, ts, _ := g.Next(b.NextSlot())
		b.Commit(uint32(c0), uint32(w), ts)
	}
	batch := *b
	c.Process(&batch) // before any reader: plain writes

	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() { // the writer goes on
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			batch := *b
			c.Process(&batch)
		}
	}()
	rd, err := c.Read("min")
	if err != nil {
		t.Fatal(err)
	}
	last := 0.0
	for range 2000 {
		v := rd(pb, 0)
		if v < last || v < 1 {
			t.Fatalf("estimate %v after %v", v, last)
		}
		last = v
	}
	close(stop)
	wg.Wait()
}
