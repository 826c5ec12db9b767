// Package flowgraph turns requests (expressions in the ffpf language) into
// the flowgraph: the DAG of functions of all active requests, overlaid so
// that identical functions (same class, canonical parameters, inputs and
// flowgroup) exist once and are shared. It drives the lifecycle FFPF
// describes — populate (parse, validate, bind, no side effects), instantiate
// (functions and buffers, all or nothing), activate (start the datapath) —
// and is the API a Go program embeds:
//
//	rt := flowgraph.New(flowgraph.Config{})
//	req, err := rt.Populate(`(pcap,file=trace.pcap) > (bpf,expr="tcp") > (pktcount)`, flowgraph.RequestOptions{})
//	err = rt.Instantiate()
//	err = rt.Activate(ctx)
//	err = rt.Wait()
//	for _, f := range req.Functions() { fmt.Println(f.ID, f.Out, f.State) }
//	rt.Close()
//
// Every function is placed in the userspace flowspace for now; placement
// sits behind the flowspaces.Flowspace interface so that lower flowspaces
// (kernel, XDP) slot in without changing this API.
//
// The sharp edge: errors that concern the request itself (syntax, unknown
// names, bad parameters, a graph that cannot be built) are reported as
// *lang.Error with a position, or satisfy IsInvalid; everything else is a
// runtime error. The CLI maps the first kind to exit status 2.
package flowgraph
