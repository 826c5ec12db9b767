// Package pcap holds the pcap function class: a source function that reads
// a capture file — classic pcap (all four magics: micro- or nanosecond
// timestamps, either byte order) or pcapng, told apart by their magic.
// Reader is the parser on its own, for programs such as the CLI's -r.
//
// A regular file is mapped into memory and the source's PBuf is a view of
// the mapping: each slot describes a record where it lies, so no packet is
// copied (zero-copy). For a classic pcap file an index goroutine finds the
// records ahead of Fill, following many record chains at once (index.go
// explains why and how a guessed chain is confirmed); a readahead goroutine
// maps the pages in ahead of it. A pipe or standard input is read through a
// buffer and each record is copied once into a PBuf slot.
//
// A damaged file is never a crash or a huge allocation: records are bounded
// by MaxRecordLen, every complete record before the damage is delivered,
// and the error then names the file, the record number and its byte offset.
//
// The sharp edge: when records are copied, the PBuf slot is the snap length.
// The source announces the file's snap length capped at SlotLimit (64 KB);
// a record longer than its slot is truncated, keeping its wire length, as a
// capture with that snap length would have stored it. A mapped file has no
// slots and delivers records whole, up to the run's snap length.
package pcap
