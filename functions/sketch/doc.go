// Package sketch holds the approximate structures of the measurement
// classes — count-min sketch, HyperLogLog, PCSA, Bloom and counting Bloom
// filters — and a tracker of the K largest keys. Each structure works in
// memory it is given (a view of a function's MBuf, see buffers.MBuf.Uint64s),
// so eBPF, P4 and plugins can read the same bytes; none allocates per
// update, and all are updated from a key's 64-bit hash (flowkey.Spec.Hash),
// deriving further positions by flowkey.Index.
//
// Updates are atomic (sync/atomic on the counters and words), so state may
// be read while the datapath runs and per-CPU copies merge with Merge.
// The sharp edge: an estimate holds its stated bound only for hashes of
// distinct keys; two keys with the same hash are one key to every sketch.
package sketch
