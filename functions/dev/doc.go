// Package dev holds the dev function class: a source function on a live
// network interface, FFPF's (dev,expr=eth0). It opens a libpcap handle
// (snap length, promiscuous mode, kernel buffer size, 50 ms packet buffer
// timeout, immediate mode off) and reads the kernel's ring with zero-copy
// reads, copying each packet once into a PBuf slot. Fill returns within
// about 100 ms on an idle link; Close may run while Fill does; Drops
// reports the packets the kernel or the interface lost before the source
// saw them.
//
// The sharp edge: the snap length sizes every PBuf slot of the flowgraph.
// The default, libpcap's 262144 bytes, is safe for any link (offloads hand
// the capture packets far larger than the MTU) but costs 256 KB per slot;
// on a link whose packets you know are small, say snaplen=1518 or 9216.
package dev
