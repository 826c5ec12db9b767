package main

import (
	"fmt"
	"io"
)

const p4Usage = `Usage:
  ffpf p4 switch --p4runtime ADDR [--device-id N] --port N=IFACE|file:IN.pcap|out:OUT.pcap ...
                 [--cpu-port 255] [--resources FILE.yaml] [--rate PORT=PPS]... [--queue N]
`

// cmdP4 is the p4 command group: the P4 switch flowspace's tools.
func cmdP4(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, p4Usage)
		return usageErrorf("ffpf p4 needs a command")
	}
	switch args[0] {
	case "switch":
		return cmdP4Switch(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, p4Usage)
		return nil
	}
	return usageErrorf("unknown command %q of ffpf p4; see 'ffpf p4 help'", args[0])
}
