// Package builtin links every function class that ships with ffpf into a
// program: import it for its side effect, as cmd/ffpf does. A class outside
// this list is linked by importing its package the same way.
package builtin

import (
	_ "github.com/ffpf-go/ffpf/functions/annotate"       // timestamp, tag: annotations
	_ "github.com/ffpf-go/ffpf/functions/bpf"            // bpf: pcap-filter expressions
	_ "github.com/ffpf-go/ffpf/functions/counters"       // pktcount, bytecount, counter
	_ "github.com/ffpf-go/ffpf/functions/dev"            // dev: live interface
	_ "github.com/ffpf-go/ffpf/functions/dta/collector"  // dta-collector: a DTA collector of the reports among the frames
	_ "github.com/ffpf-go/ffpf/functions/dta/reporter"   // dta: DTA reports as frames and UDP datagrams
	_ "github.com/ffpf-go/ffpf/functions/dta/translator" // dta-translator: reports into collector memory writes
	_ "github.com/ffpf-go/ffpf/functions/export"         // export: write pcap, pcapng, JSON lines
	_ "github.com/ffpf-go/ffpf/functions/gen"            // gen: synthetic traffic
	_ "github.com/ffpf-go/ffpf/functions/match"          // match: predicates over fields, annotations, named state
	_ "github.com/ffpf-go/ffpf/functions/pcap"           // pcap: capture files
	_ "github.com/ffpf-go/ffpf/functions/sample"         // sample: 1 in N, or with probability P
	_ "github.com/ffpf-go/ffpf/functions/sketch"         // cms, hll, pcsa, bloom
	_ "github.com/ffpf-go/ffpf/functions/trumpet"        // trumpet: event triggers
)
