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
// How a packet runs fast: the parser takes most packets by the plan of
// their path through its states (plan.go). The first packet on a path
// leaves it in a tree of states and the cases they took; a later packet
// walks the tree (at a state, the bytes of its select's keys in at most
// two 8-byte loads, compared with the two cases its packets took first,
// else with each case in order) and does the path's work at once: each
// field the program uses by one 8-byte load (of the bytes it ends, when
// it ends on a byte), the headers made valid, one record of where all
// were extracted (what the deparser needs, only for a packet whose
// headers changed). A packet the tree does not hold (a varbit field, a
// frame cut short, a case no packet took yet) takes the plan of its
// path as far as the tree holds it, then the general parser, state by
// state: a state's headers at once (each field by one 8-byte load,
// shifted, when the state starts on a byte), a select by one masked
// compare when its keys fit a word (BenchmarkModelGeneralParser
// measures it alone). Ingress is specialised per set of valid
// headers (special.go: constants propagated, branches and tables
// folded), starting from what the parser's selects fix on every path
// to those headers (facts.go: an IPv4/TCP packet's IHL, fragment offset
// and protocol); a value computed twice is copied (cse.go); metadata
// nothing reads is not written, not even by a read-modify-write; and a
// variant zeroes only the metadata its ingress or egress may read
// before writing it. Expressions that only move bits (casts, slices,
// constant shifts and masks, ors: a key built from header chunks) are
// one closure of shifted, masked fields (fuse.go); an arithmetic,
// comparison or choice reads its operands inline when each is a field
// moved and masked or a constant (operand: no call), and an assignment
// of one is a single closure (a row index h1 + h2 << k sliced, a
// length bounded by a test); closures read slots with no bounds check
// (pkt.at); a list of ops runs four calls at a time (seq); a table
// whose keys (none a range) fit one word matches its entries as one
// mask and value each, in lookup order (table.go: ffpf_walk's 25
// one-bit keys packed, one compare an entry), and when its actions only
// set metadata (hll's rank) writes each entry's values made at install,
// with no call; a sketch's read-modify-write (a count, a maximum)
// indexed by a field is one closure, and a count-min sketch's rows one
// op (regs.go); a hash of 64-bit words (a sketch's key) runs its CRCs
// on the words themselves, the constant words' steps taken at load
// (hash.go: CRC-32 and CRC-16 in one pass, sharing the table loads
// both index by the data alone). A register keeps its cells at their
// declared width (a byte for hll's 8-bit ranks, not eight), so a
// sketch takes the cache it needs; a packet clears only the varbit
// lengths its parser set, finds its variant by a probe that compares
// the valid headers with no load of the variant, skips an empty egress
// and leaves, when nothing changed its headers, as its own bytes (no
// copy). Variants share code: a statement that folds to the same value
// in two variants compiles once (compiler.shared), so the closures of
// a trace's many shapes (tens of variants, a handful of distinct
// statements) stay in the cache. BenchmarkModel and BenchmarkModelWhole
// (every packet running ingress whole) measure it.
//
// Model.Process is p4gen.Switch.Process made fast: the same results,
// which a differential test checks on random programs and frames. Device
// adds what a switch has around its pipeline: an egress queue per port
// drained at a configured rate on the switch's clock (so enq_qdepth and
// deq_qdepth are real), the CPU port, and locking for a control plane
// (flowspaces/p4/server) that reads and writes state while packets run
// (Register returns a copy of a register's cells, SetRegister writes).
//
// The sharp edge: a Model is one pipeline on one goroutine. Its Result
// (frames, digests) is valid until the next Process; copy what you keep.
// A frame that leaves unchanged is the arrival's own bytes: changing
// those changes it.
package pisa
