// Package buffers holds the datapath memory of ffpf: the PBuf that stores
// packets, the IBuf and Batch that index into it, the MBuf that holds a
// function's persistent state, and a Ring that hands batches between
// goroutines.
//
// Everything here is allocated once, when a flowgraph is instantiated; the
// datapath only reads and writes the memory it was given (FFPF §7.1). A PBuf
// is shared by every function fed from the same source; each function keeps
// its own index (IBuf entries of {slot, class}), so dropping a packet is
// removing an index entry, never copying packet bytes.
//
// The sharp edge: a slot is only valid while the batch that refers to it is
// being processed. Whoever needs a packet later must copy it out.
package buffers
