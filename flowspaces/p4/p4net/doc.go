// Package p4net runs a path of PISA model switches in one process, linked
// port to port, each serving P4Runtime on its own address: what ffpf p4
// net does with a network file (Config: switches and their roles, links,
// the hosts' ports, routes, changes of routes while the trace plays).
//
// Each switch gets the program of its role's section of a MAFIA program
// (Build: the functions in egress, where the output port and the queue
// a packet joined are known; routes in ingress; copies to the CPU port
// for the collects), pushed by a controller per switch (Run), which
// writes the copies it receives as PacketIn to their collectors (a
// capture file, or a UDP collector) and, once the trace has played,
// reads every function's counters and registers into its Go half. The
// network keeps one clock, the replayed capture's: a frame leaving a port
// at t enters the linked port at t, and frames move in time order across
// the switches' queues (Network).
//
// The switches of a network may instead run elsewhere, each named by its
// P4Runtime address and device id (ffpf p4 switch processes whose ports
// are veth interfaces or capture files): RunElsewhere pushes, collects
// and reads as Run does, with no shared clock; the run ends once the
// switches' port counters stood still (RunOptions.Quiet) or on Stop.
//
// The 13 use cases of MAFIA's Appendix A run on it in examples/mafia.
package p4net
