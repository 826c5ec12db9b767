// Package builtin links every function class that ships with ffpf into a
// program: import it for its side effect, as cmd/ffpf does. A class outside
// this list is linked by importing its package the same way.
package builtin

import (
	_ "github.com/ffpf-go/ffpf/functions/bpf"      // bpf: pcap-filter expressions
	_ "github.com/ffpf-go/ffpf/functions/counters" // pktcount, bytecount, counter
	_ "github.com/ffpf-go/ffpf/functions/dev"      // dev: live interface
	_ "github.com/ffpf-go/ffpf/functions/export"   // export: write pcap, pcapng, JSON lines
	_ "github.com/ffpf-go/ffpf/functions/gen"      // gen: synthetic traffic
	_ "github.com/ffpf-go/ffpf/functions/pcap"     // pcap: capture files
	_ "github.com/ffpf-go/ffpf/functions/sketch"   // cms, hll, pcsa, bloom
)
