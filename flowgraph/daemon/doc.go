// Package daemon is ffpf as a service (FFPF §2.4, §6; DESIGN.md §14): one
// flowgraph that many applications share. Applications submit requests
// over a unix control socket (the protocol is package client's); the
// socket's peer credentials (SO_PEERCRED) choose each connection's
// flowgroup by the daemon's policy (uid, gid, pid or all), identical
// functions of one flowgroup are shared and reference-counted by the
// flowgraph's overlay, and a request of another flowgroup is invisible.
// Each request ends in a sink of the daemon's own (class tap) that hands
// what reaches it to the applications reading the request, each through
// a ring of its own in shared memory (bridges/shm): a reader that does not
// keep up loses its own packets, counted, never another's.
//
// A request submitted to be kept lives until it is removed; when its
// sources end it stays listed, ended, with its final state. One that is
// not kept lives as long as the connection that submitted it. Close
// removes every request, so the eBPF programs and qdiscs the flowgraph
// attached are detached; a daemon started after one that was killed first
// removes what that one left attached (Sweep).
//
// Over HTTP (Config.HTTP, loopback by default) the daemon serves the same
// operations as JSON, Prometheus's /metrics, a stream of counters
// (server-sent events) and a web page embedded in the binary on which a
// novice composes a request. /metrics is Prometheus's client library's:
// the flowgraph read at each scrape (per request and function, bridge and
// reader, labelled by ids, classes and flowspaces, never by the traffic),
// with the library's process and Go collectors, in a registry of the
// daemon's. The library (and protobuf) are initialised by every process
// that links them, so ffpf's lean build links neither this package nor
// them: its clients are package client's. The HTTP side acts in a flowgroup of its own
// ("web"); it writes (submit, call, rm) only with the token given on the
// command line.
//
// The sharp edge: the daemon runs with its own privileges (root, to attach
// eBPF programs) on behalf of others. A request names files by absolute
// paths only, and each is checked against the client's credentials (read
// for inputs, write for outputs) before anything opens it; a live capture
// is allowed to whoever may connect, as the socket's mode and group grant
// (as a group that may run dumpcap does).
package daemon
