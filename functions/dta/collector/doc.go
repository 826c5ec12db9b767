// Package collector is DTA's collector: the memory that reports land in,
// laid out as the paper lays it out, and the queries that read it back.
//
//   - Key-Write: M slots of {checksum:32, data:32}; copy n of key K at
//     CRC-32(K ‖ n) mod M, checksum CRC-32(K). A query reads the N slots
//     and takes the plurality of those with K's checksum: a value, "not
//     found", or "collision" when the checksum's copies disagree.
//   - Postcarding: C chunks of B words (padded to 8, 32 bytes); flow x's
//     hop i at word i of chunk CRC-32(x ‖ j) mod C for copy j, holding
//     checksum(x, i) XOR g(value). A query decodes the chunk and outputs
//     the path when every word is a value of V or the blank.
//   - Append: a ring of 32-bit entries per list, written at its head a
//     batch at a time, read in order.
//   - Key-Increment: a count-min sketch of 64-bit counters at
//     CRC-32(K ‖ n) mod M, added to atomically, queried by the minimum.
//
// A report is ingested as a translator in front of the collector would
// write it (Collector.Ingest, or an Ingester per goroutine); the writes a
// translator makes after its own aggregation (Append batches, whole
// postcard paths) have calls of their own. A Server receives reports on
// several SO_REUSEPORT UDP sockets at once, a goroutine each reading
// batches with recvmmsg, and answers queries over HTTP, with Prometheus
// metrics at /metrics when given package metrics's Handler (which links
// Prometheus's client library; this package does not). The class dta-collector ingests report frames that
// reach it in a flowgraph (a capture of reports).
//
// Structures hashed by CRC-32 refuse a size that is a power of two: the
// CRC is linear, and modulo 2^k a key's copies would be overwritten
// together.
package collector
