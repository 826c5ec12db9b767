package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/ffpf-go/ffpf/lang"
)

// p4Command is a command of 'ffpf p4'.
type p4Command struct {
	name, synopsis string
	run            func(args []string, stdout, stderr io.Writer) error
}

// p4Commands are the commands of the P4 switch flowspace, one a line:
// each part of it adds its own (check, build, switch).
var p4Commands = []p4Command{
	{"check", p4CheckSynopsis, cmdP4Check},
	{"build", p4BuildSynopsis, cmdP4Build},
}

const p4BuildSynopsis = `--hierarchy FILE.yaml [-i IFACE] [-o DIR] [--json] [-e EXPR]... [EXPR]...

Builds the program of what the expressions place on the switches of the
hierarchy, without a running switch: per switch, DIR/main.p4 (P4_16 for
v1model), DIR/p4info.txtpb (its P4Info, prototext) and DIR/resources.txt
(what it takes: stages used, the widest stage, stateful operations,
tables, actions and lines of P4, stage by stage). A hierarchy with
several switches gets a directory per switch, DIR/NAME. --json prints the
same as one object. Chains without a source run on the packets entering
at -i IFACE, a switch's interface; without -i, at the one interface the
hierarchy's switches have (several: name one). The functions that do not
fit stay above the switch: 'ffpf place' says why.`

const p4NetSynopsis = `[--mafia FILE.mafia] [--ctrl FILE] [--json] [--quiet 1s] FILE.yaml

Runs a path of model switches in one process, linked port to port as
FILE.yaml says (p4net.Config: switches and their roles, links, the hosts'
ports, routes, changes of routes), each serving P4Runtime on its own
address. The MAFIA program (--mafia, or the file's program:) is compiled
per role, each switch's section pushed to it; the trace of its in: port
plays through in time order, the copies collects send are written to
their files, and what every function measured is read from the switches
at the end and printed (--json: as one object).

Or the switches run elsewhere, as ffpf p4 switch processes whose ports
are veth interfaces or capture files: each switch of FILE.yaml names its
P4Runtime address and device id (p4runtime: 127.0.0.1:9561, device_id: 2),
and the file has routes but no links, ports or changes (the processes'
--port flags are the links and the hosts' ports). The programs are saved
on every switch, then committed last hop first (the file lists the first
hop first); the run ends once packets crossed the switches and their
port counters stood still for --quiet, or on SIGINT, and prints the
same. A switch that cannot be reached, is another device or refuses its
program: exit 1, no program committed, nothing left installed
(examples/mafia/path-processes.yaml).`

const p4SwitchSynopsis = "--p4runtime ADDR [--device-id N] --port N=IFACE|file:IN.pcap|out:OUT.pcap ... [--cpu-port 255] [--resources FILE.yaml] [--rate PORT=PPS]... [--queue N] [--pace]"

func p4Usage() string {
	var b strings.Builder
	b.WriteString("Usage:\n")
	for _, c := range p4Commands {
		fmt.Fprintf(&b, "  ffpf p4 %s %s\n", c.name, strings.SplitN(c.synopsis, "\n", 2)[0])
	}
	b.WriteString("\nThe P4 switch flowspace (README, \"P4 switch\"). Run 'ffpf p4 COMMAND -h' for a command's flags.\n")
	return b.String()
}

func cmdP4(args []string, stdout, stderr io.Writer) error {
	var names []string
	for _, c := range p4Commands {
		names = append(names, c.name)
	}
	if len(args) == 0 {
		fmt.Fprint(stderr, p4Usage())
		return usageErrorf("p4 needs a command: %s", strings.Join(names, ", "))
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, p4Usage())
		return nil
	}
	for _, c := range p4Commands {
		if c.name == cmd {
			return c.run(rest, stdout, stderr)
		}
	}
	hint := ""
	if s, ok := lang.Suggest(cmd, names); ok {
		hint = fmt.Sprintf(" (did you mean %q?)", s)
	}
	return usageErrorf("unknown p4 command %q%s; see 'ffpf p4 help'", cmd, hint)
}
