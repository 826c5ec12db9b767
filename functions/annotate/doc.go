// Package annotate holds the annotating function classes timestamp and
// tag, MAFIA's Timestamp and Tag primitives: each writes one word of every
// packet's annotation area (buffers.PBuf.Ann, the word the flowgraph gives
// it) and passes every packet. A function after it on the packets' way
// reads the word as named state (functions.Readable): "stamp.ts",
// "t.value" in a match predicate.
//
// The sharp edge: annotation words are not cleared when a slot is reused,
// so a word is valid only for the packets its writer has seen; the
// flowgraph refuses a reader that is not after its writer.
package annotate
