// Package bpf holds the bpf function class: FFPF's packet filter, a
// pcap-filter(7) expression ("tcp and dst port 80") applied to every batch
// of packets that reaches it.
//
// The expression is compiled by libpcap itself, for the captures whose
// packets reach the filter (functions.Context.Captures), as tcpdump
// compiles it: for a live capture on a dead handle of the link type
// (Compile, the program `tcpdump -dd` prints), for a capture file on a
// handle opened on the file's header (CompileFor, what `tcpdump -r FILE
// -dd` prints: libpcap's savefile rules for DLT_NULL address families,
// byte order, "inbound", netmask 0). A filter for which two of its
// captures give different programs fails at populate (CompileCaptures).
// The program is executed by this package's own classic BPF engine (Load, Program.Run,
// Program.Filter): the program is validated like libpcap's bpf_validate,
// pre-decoded with absolute jump targets, and its most frequent
// instruction pairs and triples are fused into superinstructions, so a
// typical filter costs about 10 ns per packet, three to six times less than
// golang.org/x/net/bpf or libpcap's matcher called through cgo. Verdicts
// are libpcap's, bit for bit, including the value returned: the tests
// compare both on millions of well-formed, malformed, truncated and random
// packets. A load past the captured bytes rejects the packet, exactly as in
// libpcap; Run never panics, whatever the packet.
//
// The compiled program (Filter.Instructions) is kept for placement: a
// later translation to eBPF (cbpfc) can run it in the kernel or at XDP,
// except for programs with backward jumps (Program.HasBackwardJumps,
// libpcap's protochain), which must stay in userspace.
//
// The sharp edge: libpcap's semantics are kept even where they surprise. A
// filter sees only the captured bytes, so with a short snap length a
// packet whose header was cut fails "tcp port 80" although the packet on
// the wire would match; and "len"/"greater"/"less" test the wire length,
// not the captured one. Compiling needs libpcap (cgo, in
// internal/libpcap) at populate time; running does not.
package bpf
