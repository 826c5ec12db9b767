// Command embed shows ffpf used as a library: two requests (two
// "applications") overlaid on one flowgraph, sharing the filter they have in
// common, with state read while the graph runs and after it ends.
//
//	go run ./examples/embed
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/ffpf-go/ffpf/flowgraph"
	_ "github.com/ffpf-go/ffpf/functions/builtin"
)

func main() {
	rt := flowgraph.New(flowgraph.Config{})
	defer rt.Close()

	// Two applications: both want TCP port 80; one counts packets, the other
	// bytes. The source and the filter are identical, so they run once.
	web, err := rt.Populate(`(gen,packets=2M,seed=1) > (bpf,expr="tcp port 80") > (pktcount)`, flowgraph.RequestOptions{})
	if err != nil {
		log.Fatal(err)
	}
	bytes, err := rt.Populate(`(gen,packets=2M,seed=1) > (bpf,expr="tcp port 80") > (bytecount)`, flowgraph.RequestOptions{})
	if err != nil {
		log.Fatal(err)
	}
	if err := rt.Instantiate(); err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := rt.Activate(ctx); err != nil {
		log.Fatal(err)
	}
	if err := rt.Wait(); err != nil {
		log.Fatal(err)
	}

	fmt.Printf("%d packets in %v\n", rt.Packets(), rt.Elapsed().Round(time.Millisecond))
	for _, app := range []struct {
		name string
		req  *flowgraph.Request
	}{{"web", web}, {"bytes", bytes}} {
		for _, f := range app.req.Functions() {
			fmt.Printf("%-6s %-12s in=%-8d out=%-8d state=%v\n", app.name, f.ID, f.In, f.Out, f.State)
		}
	}
}
