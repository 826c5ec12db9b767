// Package mafia is MAFIA's measurement language (Laffranchini et al.,
// "Measurements As First-class Artifacts", §III and Appendix A) as a
// front end of ffpf: a program declares state (Key, Counter, Timestamp,
// HashMap, Sketch, BloomFilter) and composes MAFIA's primitives over the
// streams pkts, ctrl and the ones duplicate starts,
//
//	flowid = Key(ip.src, ip.dst, tcp.src, tcp.dst, ip.proto)
//	nbytes = Sketch(alg="count-min", nhash=4, key=flowid, size=256)
//	pkts >> nbytes.set(nbytes + pkt.size) >> match(nbytes.min() > 100KB) >> duplicate(big)
//	big >> collect(COLLECTOR)
//
// and Compile turns it into ffpf requests of ffpf's own classes (counter,
// register, cms, hll, pcsa, store, bloom, match, sample, tag, timestamp,
// export), so a program runs in any flowspace that holds its functions:
// userspace, eBPF, a P4 switch. Its sketches, Bloom filters and HashMaps
// position keys as a switch does (hash=switch), unless windowed or
// counting, so that a program keeps the same cells and passes the same
// packets on a host as on a switch (such a function runs in userspace or
// on a switch, not in eBPF). A program with sections (at first_hop:,
// at intermediate:, at last_hop:) becomes one request per role on a path
// of switches. Format prints a program back in a canonical form that
// parses to the same tree, and so compiles to the same requests.
//
// The sharp edge is where MAFIA's sequential semantics meets a switch's:
// each state is held by one function, at the one place on the packets'
// way where the program updates it (a switch reads and writes a register
// once a packet), and the functions after it read it as the update left
// it. So a state is read after its update, never before it or beside it
// in another branch of +; the one exception is a match just before the
// update that reads only that state, which becomes the update's guard
// (match(!hh.test()) >> hh.insert() is one test-and-insert). Programs of
// the paper that read a state before its update on the same packet are
// refused with the positions of the read and the update.
package mafia
