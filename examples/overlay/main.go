// Command overlay shows the flowgraph changing while it runs, on a
// flowspace hierarchy: requests of two flowgroups are added to a running
// graph and one is removed, and the shared functions keep counting.
//
// The hierarchy is a simulated network card (nic0) under a kernel that
// filters and counts in place, under userspace; nic0's interface eth0
// replays generated traffic. Alice's requests share the card's filter;
// Bob's, in another flowgroup, get their own.
//
//	go run ./examples/overlay
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/flowspaces/hierarchy"
	_ "github.com/ffpf-go/ffpf/functions/builtin"
)

const tree = `
children:
  - name: kernel
    kind: test
    classes: [bpf, pktcount, bytecount]
    in_place: true
    bridge: zero-copy
    children:
      - name: nic0
        kind: test
        classes: [bpf]
        barrier: pci
        interfaces:
          - name: eth0
            traffic: (gen,seed=1,packets=4M)
`

func main() {
	root, err := hierarchy.Parse([]byte(tree), "overlay.yaml", nil)
	if err != nil {
		log.Fatal(err)
	}
	rt := flowgraph.New(flowgraph.Config{Hierarchy: root})
	defer rt.Close()
	alice, _ := flowgraph.Flowgroup(flowgraph.GroupUID, flowgraph.Credentials{UID: 1000})
	bob, _ := flowgraph.Flowgroup(flowgraph.GroupUID, flowgraph.Credentials{UID: 1001})

	populate := func(group, expr string) *flowgraph.Request {
		req, err := rt.Populate(expr, flowgraph.RequestOptions{Group: group})
		if err != nil {
			log.Fatal(err)
		}
		if err := rt.Instantiate(); err != nil { // joins the running datapath
			log.Fatal(err)
		}
		return req
	}
	first := populate(alice, `(dev,eth0) > (bpf,"tcp") > (pktcount)`)
	for _, f := range rt.Plan().Functions {
		fmt.Printf("%-11s in %-6s %s: %s\n", f.ID, f.Flowspace, f.Path, f.Reason)
	}
	if err := rt.Activate(context.Background()); err != nil {
		log.Fatal(err)
	}

	time.Sleep(50 * time.Millisecond)
	web := populate(alice, `(dev,eth0) > (bpf,"tcp") > (bpf,"dst port 80") > (pktcount)`)
	other := populate(bob, `(dev,eth0) > (bpf,"tcp") > (bytecount)`)
	fmt.Printf("\nadded two requests after %d packets\n", rt.Packets())

	time.Sleep(50 * time.Millisecond)
	if err := rt.Remove(first); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("removed the first after %d packets\n\n", rt.Packets())

	if err := rt.Wait(); err != nil {
		log.Fatal(err)
	}
	for _, r := range []struct {
		who string
		req *flowgraph.Request
	}{{"alice", web}, {"bob", other}} {
		for _, f := range r.req.Functions() {
			fmt.Printf("%-5s %-11s %-6s in=%-8d out=%-8d %v\n", r.who, f.ID, f.Flowspace, f.In, f.Out, f.State)
		}
	}
	// Bob cannot see Alice's functions, not even that they exist.
	_, err = other.Lookup(web.Functions()[2].ID)
	fmt.Printf("\nbob reads %s: %v\n", web.Functions()[2].ID, err)
}
