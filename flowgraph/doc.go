// Package flowgraph turns requests (expressions in the ffpf language) into
// the flowgraph: the DAG of functions of all active requests, overlaid so
// that identical functions (same class, canonical parameters, inputs and
// flowgroup) exist once, are reference-counted and shared. It drives the
// lifecycle FFPF describes — populate (parse, validate, bind, overlay and
// place; no side effects), instantiate (functions, buffers and bridges, all
// or nothing), activate (start the datapath) — and is the API a Go program
// embeds:
//
//	rt := flowgraph.New(flowgraph.Config{})
//	req, err := rt.Populate(`(pcap,file=trace.pcap) > (bpf,expr="tcp") > (pktcount)`, flowgraph.RequestOptions{})
//	err = rt.Instantiate()
//	err = rt.Activate(ctx)
//	err = rt.Wait()
//	for _, f := range req.Functions() { fmt.Println(f.ID, f.Out, f.State) }
//	rt.Close()
//
// Placement puts each function in the lowest flowspace of the hierarchy
// (Config.Hierarchy) that runs its class, never below its inputs, at or
// above their lowest common successor, by the decentralised path-field
// protocol of flowspaces.Place; Plan reports the result with the reasons,
// the PBufs the packets are in and the bridges. Requests can be populated
// and instantiated into a running flowgraph, and removed from it.
//
// The sharp edge: errors that concern the request itself (syntax, unknown
// names, bad parameters, a graph that cannot be built) are reported as
// *lang.Error with a position, or satisfy IsInvalid; everything else is a
// runtime error. The CLI maps the first kind to exit status 2.
package flowgraph
