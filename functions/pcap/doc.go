// Package pcap holds the pcap function class: a source function that reads
// a capture file — classic pcap (all four magics: micro- or nanosecond
// timestamps, either byte order) or pcapng, told apart by their magic — and
// copies each record once, from one read buffer into a PBuf slot. Reader is
// the same parser on its own, for programs such as the CLI's -r.
//
// A damaged file is never a crash or a huge allocation: records are bounded
// by MaxRecordLen, every complete record before the damage is delivered,
// and the error then names the file, the record number and its byte offset.
//
// The sharp edge: the PBuf slot is the snap length. A source announces the
// file's snap length capped at SlotLimit (64 KB) as its MaxCapLen; a record
// longer than the slot it lands in is truncated, keeping its wire length,
// exactly as a capture with that snap length would have stored it.
package pcap
