// Command embed shows ffpf used as a library: two requests (two
// "applications") overlaid on one flowgraph, sharing the filter they have in
// common, with state read while the graph runs and after it ends.
//
//	go run ./examples/embed
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/ffpf-go/ffpf/flowgraph"
	_ "github.com/ffpf-go/ffpf/functions/builtin"
)

func main() {
	if err := run(os.Stdout, 100*time.Millisecond); err != nil {
		log.Fatal(err)
	}
}

// run runs the two applications and reads the web application's counter
// every poll while the graph runs.
func run(w io.Writer, poll time.Duration) error {
	rt := flowgraph.New(flowgraph.Config{})
	defer rt.Close()

	// Two applications: both want TCP port 80; one counts packets, the other
	// bytes. The source and the filter are identical, so they run once.
	web, err := rt.Populate(`(gen,packets=2M,seed=1) > (bpf,expr="tcp port 80") > (pktcount)`, flowgraph.RequestOptions{})
	if err != nil {
		return err
	}
	bytes, err := rt.Populate(`(gen,packets=2M,seed=1) > (bpf,expr="tcp port 80") > (bytecount)`, flowgraph.RequestOptions{})
	if err != nil {
		return err
	}
	if err := rt.Instantiate(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := rt.Activate(ctx); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- rt.Wait() }()

	// State is readable while the graph runs: the web application polls
	// its counter, as a monitoring loop would, first right away.
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		for _, f := range web.Functions() {
			if f.Class == "pktcount" {
				fmt.Fprintf(w, "running: %s has counted %v packets\n", f.ID, f.State["packets"])
			}
		}
		select {
		case err := <-done:
			if err != nil {
				return err
			}
		case <-tick.C:
			continue
		}
		break
	}

	fmt.Fprintf(w, "%d packets in %v\n", rt.Packets(), rt.Elapsed().Round(time.Millisecond))
	for _, app := range []struct {
		name string
		req  *flowgraph.Request
	}{{"web", web}, {"bytes", bytes}} {
		for _, f := range app.req.Functions() {
			fmt.Fprintf(w, "%-6s %-12s in=%-8d out=%-8d state=%v\n", app.name, f.ID, f.In, f.Out, f.State)
		}
	}
	return nil
}
