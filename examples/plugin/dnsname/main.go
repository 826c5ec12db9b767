// Command dnsname is an ffpf plugin: it serves the class dnsname (package
// dns) from a process of its own. Build it into a plugin directory and
// give ffpf that directory:
//
//	go build -o plugins/dnsname ./examples/plugin/dnsname
//	ffpf run -r t.pcap --plugins plugins/ '(bpf,"udp port 53") > (dnsname,suffix=".example.com") > (pktcount)'
//
// Compiled into ffpf instead, the same class is registered with
// functions.Register(dns.Class): one line.
package main

import (
	"github.com/ffpf-go/ffpf/examples/plugin/dnsname/dns"
	"github.com/ffpf-go/ffpf/functions/plugin/sdk"
)

func main() { sdk.Serve(dns.Class) }
