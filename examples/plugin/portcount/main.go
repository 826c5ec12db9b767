// Command portcount is an ffpf plugin serving the class portcount
// (package ports), a mergeable per-key counter:
//
//	go build -o plugins/portcount ./examples/plugin/portcount
//	ffpf run -r t.pcap --plugins plugins/ '(portcount,key=dstport)'
package main

import (
	"github.com/ffpf-go/ffpf/examples/plugin/portcount/ports"
	"github.com/ffpf-go/ffpf/functions/plugin/sdk"
)

func main() { sdk.Serve(ports.Class) }
