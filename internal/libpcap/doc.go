// Package libpcap is how ffpf calls libpcap (the bpf tests' oracle aside): it
// compiles pcap-filter(7) expressions with libpcap's own compiler
// (pcap_compile) on the handle tcpdump would compile on (a dead handle for
// a live capture, or a handle opened on the capture file's header for a
// file, so that gencode sees what `tcpdump -r` lets it see), and it opens
// live captures for the dev class (pcap_create … pcap_activate, zero-copy
// reads of the kernel's ring, pcap_stats) and lists the devices for -D.
//
// It binds the handful of calls ffpf makes and nothing else, so that a
// binary that links it initialises no packet-decoding tables (gopacket's
// pcap package imports its layers package, whose init alone took longer
// than tcpdump's whole start-up), and it loads libpcap with dlopen(3) at
// the first call that needs it (load.c), so that a run that compiles no
// filter and captures nothing live does not map libpcap and the eight
// libraries it needs.
//
// The sharp edge: Handle.Next returns bytes in libpcap's buffer, valid only
// until the next call on the same handle; the caller copies them first.
package libpcap
