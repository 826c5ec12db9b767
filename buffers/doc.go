// Package buffers holds the datapath memory of ffpf: the PBuf that stores
// packets, the batches of IBuf entries that index into it, and the MBuf that
// holds a function's persistent state.
//
// Everything here is allocated once, when a flowgraph is instantiated; the
// datapath only reads and writes the memory it was given (FFPF §7.1). A PBuf
// is shared by every function fed from the same source; each function keeps
// its own index of the packets that reached it: its IBuf is the Entry array
// ({slot, class}) of the Batch it is given, compacted in place, so dropping
// a packet is removing an index entry, never copying packet bytes. A batch's
// entries are also what a bridge carries up for each function the flowspace
// above reads.
//
// The sharp edge: a slot is only valid while the batch that refers to it is
// being processed. Whoever needs a packet later must copy it out.
package buffers
