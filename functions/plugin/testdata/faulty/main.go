// Command faulty is a plugin for the tests of isolation: its function
// passes every packet until its batch number after, then misbehaves as
// mode says (chatty: writes 96 KB to os.Stdout and os.Stderr each batch,
// more than a pipe holds). FFPF_TEST_CLASS renames its class (to clash
// with another). When ffpf shuts it down it says so on its standard
// error, with its pid.
package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/plugin/sdk"
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
	case "chatty":
		line := strings.Repeat("x", 1000)
		for i := range 48 {
			fmt.Fprintf(os.Stdout, "batch %d stdout %d %s\n", f.batches, i, line)
			fmt.Fprintf(os.Stderr, "batch %d stderr %d %s\n", f.batches, i, line)
		}
	}
}

func main() {
	stderr := os.Stderr // go-plugin's Serve redirects os.Stderr
	name := "faulty"
	if n := os.Getenv("FFPF_TEST_CLASS"); n != "" {
		name = n
	}
	sdk.Serve(&functions.Class{
		Name:    name,
		Summary: "pass every packet, then misbehave",
		Params: []functions.Param{
			{Name: "mode", Type: functions.String, Required: true, Enum: []string{"none", "kill", "hang", "foreign", "write", "panic", "chatty"}},
			{Name: "after", Type: functions.Int, Default: "2", Summary: "the batch it misbehaves in"},
		},
		MinInputs: 1, MaxInputs: -1,
		Concurrency: functions.Stateless,
		New: func(ctx *functions.Context) (functions.Function, error) {
			return &faulty{mode: ctx.Params.Str("mode"), after: ctx.Params.Int("after")}, nil
		},
	}, sdk.Deadline(300*time.Millisecond))
	fmt.Fprintf(stderr, "faulty %d: served until ffpf shut it down\n", os.Getpid())
}
