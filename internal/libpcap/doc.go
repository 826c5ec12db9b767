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
// than tcpdump's whole start-up). Filters are compiled by libpcap linked
// statically, without its D-Bus backend (nodbus.c); live captures and the
// device list use the shared libpcap, loaded with dlopen(3) at the first
// call that needs it (load.c). So a run maps no library but libc unless it
// captures live: mapping libpcap and the eight libraries it needs took
// more than a millisecond of every start.
//
// The sharp edges: filters are compiled by the libpcap ffpf was built with
// (libpcap.a), live captures by the one installed; and Handle.Next returns
// bytes in libpcap's buffer, valid only until the next call on the same
// handle, so the caller copies them first.
package libpcap
