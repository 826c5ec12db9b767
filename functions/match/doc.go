// Package match is the match function class, MAFIA's Match primitive: a
// predicate over a packet's fields (pkt.len, ipv4.src, tcp.dport…), the
// annotations earlier functions wrote on it and the named state of
// functions of its request (nbytes.min, total.value); the packets that
// satisfy it pass, the others are filtered.
//
// The predicate is parsed and type-checked at populate time and compiled
// at instantiation into a tree of closures over one per-function
// environment, so evaluating it allocates nothing. Headers are decoded
// once per packet, on the first field that needs them, with the bounds
// flowkey uses (4 VLAN tags, 8 IPv6 extension headers).
//
// The sharp edge: a comparison on a field the packet lacks is false, and
// not negates the whole, as in libpcap: tcp.dport != 80 is false for a UDP
// packet, not tcp.dport == 80 is true.
package match
