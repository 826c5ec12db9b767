// Package export holds the export function class: a function that appends
// every packet reaching it to a classic pcap file and passes the batch on
// unchanged — a tap anywhere in the flowgraph, tcpdump's -w. The file takes
// the link type of the function's input and the PBuf slot size as its snap
// length; timestamps are written in microseconds, which every pcap reader
// accepts.
//
// Each batch is written with one write call, so that a failed write is
// charged exactly to the packets it carried: they leave the batch and are
// counted as dropped (in = out + dropped), later batches are dropped whole,
// a regular file is cut back to its last whole record (a full disk never
// leaves half a record), and Close returns the first error, naming the
// file. "-" is standard output; a pipe whose reader has gone (EPIPE) ends
// the run when the program asks so (Options.Closed).
//
// The sharp edge: a write error does not stop the flowgraph. The run goes
// on and the output file ends at the failure; only the dropped counter and
// Close's error say so.
package export
