// Package flowkey turns a packet into a flow key: the fields a measurement
// groups packets by (the 5-tuple and its parts with prefix lengths, VLAN,
// MACs), parsed from a key spec such as "srcip/24,dstport". It is the
// library the measurement, Trumpet and DTA classes share; it registers no
// class.
//
// A Key is a fixed array of 64-bit words, so the datapath copies no
// variable-length data and a key hashes in a few multiplications. Extract
// reads the captured bytes of a packet of any link type ffpf sources
// produce (Ethernet with 802.1Q/802.1ad tags, LINUX_SLL, LINUX_SLL2, RAW,
// IPV4, IPV6, NULL, LOOP) and never beyond them; every loop in it has a
// fixed bound (MaxVLANTags, MaxIPv6Ext), so an eBPF program can compute the
// identical key, word for word.
//
// The hash, which the eBPF side reimplements exactly (64-bit multiply, xor
// and shifts; no tables):
//
//	h = seed ^ 0x243f6a8885a308d3
//	for each of the spec's Words() words w: h = (h ^ w) * 0x9e3779b97f4a7c15; h ^= h >> 32
//	h ^= h >> 33; h *= 0xff51afd7ed558ccd; h ^= h >> 33; h *= 0xc4ceb9fe1a85ec53; h ^= h >> 33
//
// and a structure needing several positions derives them from that one
// value by double hashing (Index): g_i = uint32(h) + i·uint32(h>>32) mod
// 2^32, position_i = (g_i · n) >> 32.
//
// The sharp edge: a packet without the layer a field needs has no key
// (Extract returns false) and the caller must count it, not drop it
// silently; ports and VLAN are the exceptions, absent within a key.
package flowkey
