// Package client talks to an ffpf daemon (ffpf serve, package
// flowgraph/daemon) over its control socket: submit requests, list them,
// read their counters and state, call their functions' handlers, remove
// them, and read the packets or records a request exports through shared
// memory (bridges/shm). The ffpf commands submit, ls, stat, call, read and
// rm are its clients; a Go program embeds it the same way:
//
//	c, err := client.Dial("")                  // $FFPF_SOCKET, or /run/ffpf.sock
//	r, err := c.Submit(client.SubmitArgs{Expr: `(bpf,"tcp") > (pktcount)`, Iface: "eth0"})
//	st, err := c.Stat(r.ID)
//	s, err := c.Read(r.ID)                      // a ring of the request's packets, mapped here
//	for { b, err := s.Next(time.Second); ...; s.Release() }
//
// A request submitted through a Client lives as long as the connection,
// unless SubmitArgs.Keep asks it to outlive it (ffpf submit does).
//
// # The protocol (version 1)
//
// A connection is a unix stream socket. The daemon learns who is at the
// other end from the socket itself (SO_PEERCRED: uid, gid, pid), and its
// --flowgroup policy maps those to the connection's flowgroup; a client
// states nothing about itself. Each message is one JSON object on one
// line (at most MaxMessage bytes with its newline), each request answered
// by one reply, in order:
//
//	→ {"v":1,"id":7,"op":"stat","args":{"id":"r3f2a"}}
//	← {"v":1,"id":7,"ok":true,"result":{...}}
//	← {"v":1,"id":7,"ok":false,"code":"not_found","error":"no request r3f2a"}
//
// "v" is the protocol version: a daemon answers a version it does not
// speak with code "version" and the versions it does. "id" is the
// client's, echoed. The operations and their arguments and results are
// the types of this package: hello (Hello), submit (SubmitArgs → Request),
// ls (→ List), stat (IDArgs → Stat), call (CallArgs → any), read
// (ReadArgs → Stream), unread (ReaderArgs), rm (IDArgs), classes (→
// []Class), check (CheckArgs → Check) and hierarchy (→ the hierarchy as
// 'ffpf hierarchy --json' prints it). The reply to read carries three
// descriptors (SCM_RIGHTS, with the reply's first byte): the control
// memfd, a read-only descriptor of the ring's data and its eventfd, which
// shm.OpenReceiver opens. Error codes: malformed, too_large, version,
// unknown_op, invalid (the request's fault: exit 2 in the CLI), not_found
// (no such request in the client's flowgroup: one of another flowgroup is
// reported the same way), denied, failed (a runtime error).
//
// A request of another flowgroup is invisible: ls does not list it, and
// stat, call, read and rm answer not_found, as for an id that does not
// exist. Root (uid 0) sees and may act on every request.
//
// The sharp edge: a connection's descriptors (a read's ring) are its own;
// reading the socket with anything but this package's reader (which uses
// recvmsg) would lose them.
package client
