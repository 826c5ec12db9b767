// Package pisa is the executable model of a PISA switch (a Tofino-like
// pipeline, DESIGN.md §13): it runs the p4gen IR that a P4 program was
// printed from, fast. Load compiles a Program once into closures over a
// per-packet array of value slots (every header field, metadata word,
// standard metadata field and action parameter has its slot, resolved
// at load), allocates its units to the stages of a p4gen.Profile and
// refuses a program that does not fit, as a compiler for the switch
// would. A packet then runs through the parser, ingress (tables looked
// up exactly by a hash map, or by priority for ternary, LPM and range
// keys; registers updated by one stateful-ALU read-modify-write; hash
// units; counters), the clone sessions, egress and the deparser, with
// no map lookup and no allocation.
//
// Model.Process is p4gen.Switch.Process made fast: the same results,
// which a differential test checks on random programs and frames. Device
// adds what a switch has around its pipeline: an egress queue per port
// drained at a configured rate on the switch's clock (so enq_qdepth and
// deq_qdepth are real), the CPU port, and locking for a control plane
// (flowspaces/p4/server) that reads and writes state while packets run.
//
// The sharp edge: a Model is one pipeline on one goroutine. Its Result
// (frames, digests) is valid until the next Process; copy what you keep.
package pisa
