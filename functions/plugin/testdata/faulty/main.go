// Command faulty is a plugin for the tests of isolation: its function
// passes every packet until its batch number after, then misbehaves as
// mode says. FFPF_TEST_CLASS renames its class (to clash with another).
package main

import (
	"os"
	"syscall"
	"time"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/plugin"
)

type faulty struct {
	mode    string
	after   int64
	batches int64
}

func (f *faulty) Process(b *buffers.Batch) {
	f.batches++
	if f.batches < f.after || b.N == 0 {
		return
	}
	switch f.mode {
	case "kill":
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(time.Hour)
	case "hang":
		select {}
	case "foreign":
		b.E[0].Slot = b.Base + uint32(b.N) + 5
	case "write":
		b.PBuf.Data(b.E[0].Slot)[0] ^= 0xff
	case "panic":
		panic("faulty: misbehaving as asked")
	}
}

func main() {
	name := "faulty"
	if n := os.Getenv("FFPF_TEST_CLASS"); n != "" {
		name = n
	}
	plugin.Serve(&functions.Class{
		Name:    name,
		Summary: "pass every packet, then misbehave",
		Params: []functions.Param{
			{Name: "mode", Type: functions.String, Required: true, Enum: []string{"none", "kill", "hang", "foreign", "write", "panic"}},
			{Name: "after", Type: functions.Int, Default: "2", Summary: "the batch it misbehaves in"},
		},
		MinInputs: 1, MaxInputs: -1,
		Concurrency: functions.Stateless,
		New: func(ctx *functions.Context) (functions.Function, error) {
			return &faulty{mode: ctx.Params.Str("mode"), after: ctx.Params.Int("after")}, nil
		},
	}, plugin.Deadline(300*time.Millisecond))
}
