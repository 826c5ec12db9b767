// Package trumpet is the trumpet function class: Trumpet's packet monitor
// (package monitor) as a producer in the flowgraph. It reads packets,
// matches their 5-tuple flows to the installed events (triggers), keeps
// per-flow summaries by epoch, and at each epoch's end on the packet clock
// (a Clocked deadline) sweeps them into each event's buckets, in bounded
// slices between batches when its input runs short, and emits an ffpf
// record per satisfied bucket and interval. Events are added and removed
// at run time through handlers, without disturbing the others. Where
// every event reads only count(), volume, ecn and ttl, phase 1 runs in an
// eBPF flowspace on per-CPU flow summaries by epoch, and the monitor in
// the process is fed the summaries (ebpf.go); otherwise the function
// stays in userspace, and placement says why.
//
// The sharp edge: a report is a record, so a trumpet function feeds only
// classes that take records (export, match).
package trumpet
