// Command ffpf runs packet-processing flowgraphs written in the ffpf
// expression language.
//
//	ffpf run -r trace.pcap '(bpf,expr="tcp and dst port 80") > [(pktcount)|(bytecount)]'
//	ffpf check '[(bpf,"tcp")|(bpf,"udp")] > (pktcount)'
//	ffpf place --hierarchy examples/hierarchy/two-nics.yaml '[(dev,eth0)|(dev,eth1)] > (bpf,"tcp") > (pktcount)'
//	ffpf hierarchy
//	ffpf classes
//	ffpf trumpet check examples/trumpet/table2.yaml
//	ffpf gen -o trace.pcap --packets 1000000 --seed 1
//	ffpf dta collect --listen 127.0.0.1:40040 --keywrite slots=4M,redundancy=2 --http 127.0.0.1:9100
//	ffpf dta query --server 127.0.0.1:9100 keywrite 0x0a000105
//	ffpf serve --http 127.0.0.1:9090 &
//	ffpf submit -i eth0 '(bpf,"tcp") > (pktcount)'
//	ffpf p4 check out/main.p4
//
// Exit status: 0 success, 1 runtime error, 2 usage, syntax or validation
// error.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/ffpf-go/ffpf/flowgraph"
	_ "github.com/ffpf-go/ffpf/functions/builtin"
	"github.com/ffpf-go/ffpf/internal/libpcap"
	"github.com/ffpf-go/ffpf/lang"
)

const usage = `ffpf runs packet-processing flowgraphs (Fairly Fast Packet Filters, in Go).

Usage:
  ffpf run [-r FILE | -i IFACE [-Q in|out|inout]] [-c N | --capture-count N] [-w OUT.pcap|.pcapng] [-s SNAPLEN] [--print] [--hierarchy FILE.yaml] [--flowgroup POLICY] [--workers N] [--plugins DIR] [--json] [-e EXPR]... [EXPR]...
  ffpf check [-r FILE | -i IFACE [-Q DIR]] [--plugins DIR] [-e EXPR]... [EXPR]...
  ffpf place [--hierarchy FILE.yaml] [--plugins DIR] [--dot | --json] [-e EXPR]... [EXPR]...
  ffpf hierarchy [--hierarchy FILE.yaml] [--json]
  ffpf classes [--plugins DIR] [--json]
  ffpf trumpet check [--epoch DURATION] [--words N] [-e EVENT]... [FILE]...
  ffpf mafia check [--ctrl FILE] FILE...
  ffpf run --mafia FILE [--role ROLE] [--ctrl FILE] [-r FILE | -i IFACE] ...
  ffpf gen -o FILE [--packets N] [--seed N] [--malformed F] [--vlan F] [--ipv6 F] [--flows N]
  ffpf gen -i IFACE [--pps N] [-o SENT.pcap] [--packets N] [--seed N] ...
  ffpf dta collect --listen ADDR [--keywrite slots=M,redundancy=N] [--append lists=L,size=S]
                   [--keyincrement slots=M] [--postcarding chunks=C,hops=B] [--http ADDR]
  ffpf dta query --server HTTPADDR keywrite KEY | append LIST [N] | keyincrement KEY | postcarding KEY
  ffpf serve [--socket PATH] [--flowgroup uid|gid|pid|all] [--http ADDR [--http-token TOKEN]] [--hierarchy FILE.yaml]
  ffpf submit [-r FILE | -i IFACE] [--name NAME] EXPR      (to a daemon: each takes --socket PATH or $FFPF_SOCKET)
  ffpf ls [--json] | stat [--json] [-f] ID | call ID FUNC HANDLER [ARG] | rm ID
  ffpf read [-w OUT.pcap | --print | --jsonl] ID
  ffpf p4 check FILE...
  ffpf p4 build --hierarchy FILE.yaml [-i IFACE] [-o DIR] [--json] [-e EXPR]... [EXPR]...
  ffpf p4 switch --p4runtime ADDR [--device-id N] --port N=IFACE|file:IN.pcap|out:OUT.pcap ... [--cpu-port 255]
                 [--resources FILE.yaml] [--rate PORT=PPS]...
  ffpf -D | --list-interfaces
  ffpf --version

An expression is a graph of functions:
  (bpf,expr="tcp and dst port 80") > [(pktcount)|(bytecount)]
  A > B feeds B from A; [X | Y] runs X and Y side by side (a fork after
  A, a join before B); label:term names a term that a later chain, after ";",
  reuses by its label. 'ffpf classes' lists the functions; --plugins DIR
  (or $FFPF_PLUGINS) adds the classes of the plugins there.

Run 'ffpf COMMAND -h' for a command's flags.
Exit status: 0 success, 1 runtime error, 2 usage, syntax or validation error.
`

// exitError carries an exit status.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &exitError{2, fmt.Errorf(format, args...)}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "run":
		err = cmdRun(rest, stdout, stderr)
	case "check":
		err = cmdCheck(rest, stdout, stderr)
	case "place":
		err = cmdPlace(rest, stdout, stderr)
	case "hierarchy":
		err = cmdHierarchy(rest, stdout, stderr)
	case "classes":
		err = cmdClasses(rest, stdout, stderr)
	case "gen":
		err = cmdGen(rest, stdout, stderr)
	case "trumpet":
		err = cmdTrumpet(rest, stdout, stderr)
	case "dta":
		err = cmdDTA(rest, stdout, stderr)
	case "serve":
		err = cmdServe(rest, stdout, stderr)
	case "submit":
		err = cmdSubmit(rest, stdout, stderr)
	case "ls":
		err = cmdLs(rest, stdout, stderr)
	case "stat":
		err = cmdStat(rest, stdout, stderr)
	case "call":
		err = cmdCall(rest, stdout, stderr)
	case "read":
		err = cmdRead(rest, stdout, stderr)
	case "rm":
		err = cmdRm(rest, stdout, stderr)
	case "p4":
		err = cmdP4(rest, stdout, stderr)
	case "mafia":
		err = cmdMafia(rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	case "version", "-version", "--version":
		fmt.Fprintf(stdout, "%s\n%s\n", version(), libpcap.Version())
		return 0
	case "-D", "--list-interfaces":
		err = listInterfaces(stdout)
	default:
		err = usageErrorf("unknown command %q%s; see 'ffpf help'", cmd, suggestCommand(cmd))
	}
	return report(err, stderr)
}

func suggestCommand(cmd string) string {
	if s, ok := lang.Suggest(cmd, []string{"run", "check", "place", "hierarchy", "classes", "gen", "trumpet", "dta", "p4", "mafia", "serve", "submit", "ls", "stat", "call", "read", "rm", "help", "version"}); ok {
		return fmt.Sprintf(" (did you mean %q?)", s)
	}
	return ""
}

// report prints err the way users read it (one sentence, the caret under a
// syntax error) and returns the exit status.
func report(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if code, ok := elsewhere(err); ok {
		return code
	}
	code := 1
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	} else if flowgraph.IsInvalid(err) {
		code = 2
	}
	fmt.Fprintf(stderr, "ffpf: %v\n", err)
	var le *lang.Error
	if errors.As(err, &le) {
		if c := le.Caret(); c != "" {
			fmt.Fprintf(stderr, "  %s\n", strings.ReplaceAll(c, "\n", "\n  "))
		}
	}
	return code
}

// flagSet is a command's flags and the help that -h prints.
type flagSet struct {
	*flag.FlagSet
	help func()
}

// parseInterleaved parses flags that may come before or after the
// positional arguments (ffpf run EXPR -c 10), as users of tcpdump expect.
func parseInterleaved(fs *flagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.help()
				return nil, err
			}
			return nil, usageErrorf("%v; see 'ffpf %s -h'", err, fs.Name())
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// newFlagSet returns the flags of a command; errors in them are reported in
// one sentence by parseInterleaved (exit status 2), help goes to stderr.
func newFlagSet(name, synopsis string, stderr io.Writer) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flagSet{fs, func() {
		fs.SetOutput(stderr)
		fmt.Fprintf(stderr, "Usage: ffpf %s %s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}}
}

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, "; ") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

// version is the module's version and the commit it was built from, as
// the Go toolchain recorded them in the binary ("ffpf version (devel)"
// from a checkout, with the commit unless built with -buildvcs=false).
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "ffpf version unknown, built with " + runtime.Version()
	}
	v := "ffpf version " + bi.Main.Version
	var rev, at, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if rev != "" {
		v += fmt.Sprintf(" (commit %s, %s%s)", rev, at, modified)
	}
	return v + ", built with " + bi.GoVersion + " for " + runtime.GOOS + "/" + runtime.GOARCH
}

// pcap_if_t flags (pcap/pcap.h).
const (
	ifLoopback         = 0x01
	ifUp               = 0x02
	ifRunning          = 0x04
	ifWireless         = 0x08
	ifConnectionStatus = 0x30
	ifConnected        = 0x10
	ifDisconnected     = 0x20
	ifNotApplicable    = 0x30
)

// listInterfaces prints the devices libpcap can capture on as tcpdump -D
// does: number, name, description, flags.
func listInterfaces(w io.Writer) error {
	devs, err := libpcap.Devices()
	if err != nil {
		return fmt.Errorf("cannot list the interfaces: %v", err)
	}
	for i, d := range devs {
		line := fmt.Sprintf("%d.%s", i+1, d.Name)
		if d.Description != "" {
			line += " (" + d.Description + ")"
		}
		if d.Flags != 0 {
			var names []string
			for _, f := range []struct {
				bit  uint32
				name string
			}{{ifUp, "Up"}, {ifRunning, "Running"}, {ifLoopback, "Loopback"}, {ifWireless, "Wireless"}} {
				if d.Flags&f.bit != 0 {
					names = append(names, f.name)
				}
			}
			flags := strings.Join(names, ", ")
			if flags == "" {
				flags = "none"
			}
			status := map[uint32]string{0: "Connection status unknown", ifConnected: "Connected", ifDisconnected: "Disconnected"}
			if d.Flags&ifWireless != 0 {
				status = map[uint32]string{0: "Association status unknown", ifConnected: "Associated", ifDisconnected: "Not associated"}
			}
			if s := status[d.Flags&ifConnectionStatus]; s != "" {
				flags += ", " + s
			}
			line += " [" + flags + "]"
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}
