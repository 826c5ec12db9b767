package functions

import "github.com/ffpf-go/ffpf/buffers"

// LinkRecord is the link type of ffpf's own records (events, window
// reports, summaries): LINKTYPE_USER0, the first of the link types pcap
// reserves for private use, so a capture of records is a valid pcap file.
// The format is package functions/record's.
const LinkRecord LinkType = 147

func init() { linkNames[LinkRecord] = "FFPF_RECORD" }

// Producer is a function whose output is records it writes, not the
// packets it receives: a window report, an event, a telemetry frame, a
// modified copy of a packet. It owns a PBuf, writes records into it, and
// hands batches of them to its dependents exactly as a source does.
//
// The flowspace gives it emit before the first batch: emit carries a batch
// of records to the producer's dependents, synchronously, and returns when
// they are done with it, so the producer may reuse its slots. A producer
// calls it from Process, Tick or Flush, never from another goroutine. The
// batch's entries are accounted as the producer's records (Records).
type Producer interface {
	SetEmit(emit func(b *buffers.Batch))
	// Records is how many records it has emitted.
	Records() uint64
}

// IsProducer reports whether a function of the class with parameters p
// outputs records rather than the packets it receives.
func (c *Class) IsProducer(p Params) bool { return c.Produces != nil && c.Produces(p) }
