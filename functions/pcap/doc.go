// Package pcap holds the pcap function class: a source function that reads
// a capture file — classic pcap (all four magics: micro- or nanosecond
// timestamps, either byte order) or pcapng, told apart by their magic.
// Reader is the parser on its own, for programs such as the CLI's -r.
//
// A regular file is read with read(2) into a ring of chunks (ring.go), and
// the source's own PBuf is a view of the ring: each slot describes a record
// where read(2) put it, so each byte is copied once, from the page cache; a
// record that straddles two chunks is moved whole into the next one. On the
// machines ffpf is measured on that is faster than loading mapped
// page-cache pages, and than copying each record again out of a read
// buffer (README). FFPF_PCAP_READ=read (or OpenAccess(path, AccessRead))
// does the latter: each record is copied into a slab where a batch's
// records lie one after the other. With FFPF_PCAP_READ=mmap (or
// OpenAccess(path, AccessMap)) the file is mapped
// instead and the source's PBuf is a view of the mapping: each slot
// describes a record where it lies (zero-copy). For a classic pcap file an
// index goroutine then finds the records ahead of Fill, following many
// record chains at once (index.go explains why and how a guessed chain is
// confirmed); a readahead goroutine maps the pages in ahead of it.
//
// Records are what libpcap hands tcpdump: cut to the file's snapshot, the
// wire length as written, pseudo-headers of the other byte order converted
// (pseudo.go).
//
// A damaged file is never a crash or an allocation beyond what libpcap
// would make: records are bounded
// by the link type's maximum (MaxRecordLen for all but D-Bus, EBHSCR and
// USBPCAP, as in libpcap), every complete record before the damage is delivered,
// and the error then names the file, the record number and its byte offset.
//
// The sharp edge: records are delivered up to the file's snapshot (or the
// run's snap length) but never beyond MaxRecordLen, which only D-Bus,
// EBHSCR and USBPCAP files exceed; a caller that fills batches of its own
// PBuf gets records truncated to its slots, keeping their wire length.
package pcap
