// Package shm is the bridge across a process boundary (DESIGN.md §14): it
// carries batches of IBuf entries, and the packets they refer to, between
// two processes through shared memory, never through a socket or an RPC
// per batch.
//
// A Ring is one direction: a single sender and a single receiver. Its
// memory is two memfds. The data memfd holds Cells (one batch each: a
// header, MaxBatch entries and, for a ring that carries packets, a
// descriptor per entry) followed by the packet arena, a window of bytes
// per cell; only the sender can write it, and the receiver maps it
// read-only from a read-only descriptor, so that a receiver that writes a
// packet faults itself, never the sender. The control memfd holds the two
// indices (each on a cache line of its own: the sender writes head, the
// receiver tail), the receiver's wait flag and the sender's close flag.
// Both memfds are sealed against shrinking, so that neither side can make
// the other's accesses fault by truncating them.
//
// Notification adapts to the rate as the ring-buffer bridge does: a
// receiver that finds a cell ready takes it without a system call
// (polling, under load); one that has caught up spins a few microseconds,
// then sets its wait flag and sleeps on an eventfd, which the sender
// writes only when that flag is set (waiting, when idle). A descriptor of
// the peer (a socket, a pidfd) that hangs up wakes a sleeper too, so a
// side whose peer died learns it at once.
//
// The descriptors (Ring.Files) cross once, when the two sides are set up:
// over a unix socket (SendFiles, ReceiveFiles: SCM_RIGHTS) or as a child
// process's extra files. Nothing is allocated per batch.
//
// The sharp edge: a cell and its window belong to the sender from Reserve
// to Publish and to the receiver from Next to Release; each side must
// treat what the other wrote as untrusted input (an entry, a length, an
// offset may be anything), since the other process may be buggy.
package shm
