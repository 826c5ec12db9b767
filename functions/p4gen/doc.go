// Package p4gen is how a function class runs on a P4 switch (the p4
// flowspace, DESIGN.md §13): the class lowers one function to a pipeline
// IR, the tables, actions, registers, counters, hash calls, digests and
// metadata of a v1model program, and the flowspace chains the functions
// placed on one switch into one Program.
//
// One IR, several consumers. The P4_16 printer turns a Program into the
// text of a v1model program, and package p4info writes its P4Info; the PISA model
// (flowspaces/p4/pisa) executes the same values on packets, stage by
// stage; Exec, in this package, is the reference semantics both follow:
// what a statement does to a packet's headers, metadata and the
// switch's registers, written once and short enough to read. A
// differential test interprets the printed program on the same packets,
// so printer and model cannot drift apart unseen.
//
// The values: every field, metadata word, register cell and constant is
// an unsigned integer of 1 to 64 bits (an IPv6 address is two 64-bit
// fields), conditions are booleans, and arithmetic wraps at the width,
// as P4's bit<W> does. A register is touched once per packet, by one RMW
// (a stateful ALU's read-modify-write): a lowering that needs two values
// of one register at one packet is wrong, as a Tofino compiler would
// refuse it.
//
// A class lowers a function through its Code hook for functions.TargetP4,
// which returns a Function; the flowspace gives it a Builder whose
// declarations carry the function's prefix, and runs its statements only
// for the packets that reach it (Builder.In). The sharp edge: a lowering
// sees the packet as the switch's parser left it (Std's headers), not as
// bytes, so a test it makes must give libpcap's verdict on every frame,
// VLAN-tagged, fragmented, truncated or with IP options included, or the
// class must refuse the function for this target with the reason.
package p4gen
