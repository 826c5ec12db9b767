// Package gen holds the gen function class: a source function that writes
// deterministic synthetic Ethernet traffic straight into PBuf slots, so that
// a flowgraph can be tested, benchmarked and fuzzed without a NIC or a
// capture file. Generator is the traffic model on its own (Next writes one
// frame into any buffer, WritePcap a whole trace, as `ffpf gen` does).
//
// The traffic is a realistic mix — TCP connections with handshakes, data
// and teardowns, DNS, NTP, QUIC and other UDP, ICMP and ICMPv6, ARP, IPv4
// and IPv6, 802.1Q and QinQ tags, Zipf-popular flows, bimodal sizes, valid
// checksums — plus, on request, a fraction of adversarial frames
// (truncated, bogus IP lengths, fragments, runts, unknown ethertypes,
// IPv6 extension chains) for the "never crash on malformed input" rule.
//
// The sharp edge: a trace is a function of its Config and of this package's
// version. Timestamps are synthetic (Start plus i/Rate), not wall-clock
// time, and a change to the traffic model changes the bytes of every trace:
// tests must compare against a generator, never against stored bytes.
package gen
