package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ffpf-go/ffpf/bridges/afxdp"
	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/hierarchy"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/dev"
	"github.com/ffpf-go/ffpf/functions/export"
	"github.com/ffpf-go/ffpf/lang"
	"github.com/ffpf-go/ffpf/lang/mafia"
)

const runSynopsis = `[-r FILE | -i IFACE [-Q in|out|inout]] [-c N | --capture-count N] [-w OUT.pcap | -w OUT.pcapng] [-s SNAPLEN]
         [--print] [--hierarchy FILE.yaml] [--flowgroup POLICY] [--workers N] [--plugins DIR] [--plugin-sums FILE]
         [--json] [-e EXPR]... [EXPR]...

Runs the flowgraph until the sources end, -c packets have reached its
ends, the reader of -w's pipe goes away, or SIGINT (SIGTERM); then prints
every function's counters and state (on stderr when --print or -w - has
stdout). A signal during set-up (compiling filters, opening a FIFO without
a writer, loading programs) ends ffpf at once as killed by it, leaving
nothing behind. -c counts, as tcpdump -c counts the packets its filter
delivers, the packets that reach the ends of the graph (those -w writes,
each once; a producer's input packets, not its records), in every
flowspace: exactly N reach them, and no packet captured after the N-th
enters the graph (an XDP or tc hook lets later packets on uncounted).
--capture-count N counts instead the packets the sources capture (the
first line of the result): a bpf function's OUT then says how many of the
N it kept. Each packet keeps what the snap length allows, in every
placement, except with (dev,IFACE,steal=true): an AF_XDP frame holds at
most 1792 bytes, and a longer packet goes on to the kernel stack, counted
as the bridge's dropped (the run says so when it starts). Several
expressions (-e, or several arguments) are several requests, overlaid:
identical functions are shared. A chain that starts with a function that is
not a source is fed by -r FILE or -i IFACE.

A live capture sees the packets the interface receives and those it sends
(-Q chooses), at the lowest hook that has room: XDP for received packets
and tc egress for sent ones, or tc (TCX) for both when another program
holds the XDP hook (another ffpf run, or any other tool: XDP takes one
program per interface, tc several), or libpcap in userspace. Several runs
may capture on one interface at once; the end of the output says where
each capture was attached.

Each source has a worker (a goroutine) of its own; a live interface
captured at its XDP or tc hook is spread over a worker per ring buffer
(one per CPU) or AF_XDP socket (one per receive queue), at most --workers
(default: the cores). A function that several workers reach runs as its
class allows ('ffpf classes': stateless and mergeable ones on every worker
at once, ordered ones under one lock).`

// checkCount refuses -c or --capture-count (run's, submit's) that is not a
// number of packets, or both at once: a usage error.
func checkCount(count, captureCount int64) error {
	for _, c := range []struct {
		flag string
		n    int64
	}{{"-c", count}, {"--capture-count", captureCount}} {
		if c.n < 0 || c.n > flowspaces.MaxLimit {
			return usageErrorf("%s must be a number of packets up to %d (0: no limit)", c.flag, flowspaces.MaxLimit)
		}
	}
	if count > 0 && captureCount > 0 {
		return usageErrorf("-c and --capture-count exclude each other")
	}
	return nil
}

// runOptions are the flags shared by run, check and place.
type runOptions struct {
	file, iface string
	direction   string
	exprs       multiFlag
	// A MAFIA program (--mafia), its role on a path and its ctrl stream,
	// and the request it compiled to.
	mafia, role, ctrl string
	compiled          *mafia.Request
	hierarchy         string
	flowgroup         string
	plugins           pluginOptions
}

func (o *runOptions) register(fs *flagSet) {
	fs.StringVar(&o.file, "r", "", "read packets from `FILE` (pcap or pcapng; - is standard input) for chains without a source")
	fs.StringVar(&o.iface, "i", "", "capture on `IFACE` for chains without a source")
	dir := "with -i, capture the packets of `DIRECTION`: in (received), out (sent) or inout (both: the default, as tcpdump)"
	fs.StringVar(&o.direction, "Q", "", dir)
	fs.StringVar(&o.direction, "direction", "", dir+" (as -Q)")
	fs.Var(&o.exprs, "e", "an expression `EXPR` (repeatable: each is one request)")
	fs.StringVar(&o.mafia, "mafia", "", "a MAFIA program in `FILE`: the request it compiles to (see 'ffpf mafia check')")
	fs.StringVar(&o.role, "role", "", "with --mafia, the `ROLE` of a program with sections (first_hop, intermediate, last_hop)")
	fs.StringVar(&o.ctrl, "ctrl", "", "with --mafia, the packets of its ctrl stream (a capture `FILE`)")
	fs.StringVar(&o.hierarchy, "hierarchy", "", "place functions in the flowspace hierarchy described in `FILE.yaml` (default: the one found on this machine; see 'ffpf hierarchy')")
	fs.StringVar(&o.flowgroup, "flowgroup", flowgraph.GroupUID, "share functions and packet buffers with requests of the same `POLICY`: uid, gid, pid or all")
	o.plugins.register(fs)
}

// config returns the runtime configuration the flags ask for, and the
// requests' flowgroup.
func (o *runOptions) config(cfg flowgraph.Config) (flowgraph.Config, string, error) {
	return o.configFor(cfg, nil, "")
}

// configFor is config for a run of exprs with the default source src:
// when no source of theirs can run beneath userspace (files, gen), no
// function can either (none is placed below its inputs), so the flowspaces
// beneath are not looked for: that saves the eBPF probes, most of the
// start-up time of a short file replay. exprs nil means always look.
func (o *runOptions) configFor(cfg flowgraph.Config, exprs []string, src string) (flowgraph.Config, string, error) {
	group, err := flowgraph.Flowgroup(o.flowgroup, flowgraph.Self())
	if err != nil {
		return cfg, "", usageErrorf("--flowgroup: %v", err)
	}
	if o.hierarchy != "" {
		root, err := hierarchy.Load(o.hierarchy, functions.Default)
		if err != nil {
			return cfg, "", &exitError{2, err}
		}
		cfg.Hierarchy = root
	} else if exprs != nil && userspaceOnly(functions.Default, append([]string{src}, exprs...)) {
		cfg.Hierarchy = hierarchy.Userspace()
	} else {
		cfg.Hierarchy, _ = hierarchy.Discover(functions.Default)
	}
	if o.file != "" && o.file != "-" {
		if err := functions.CheckStream(o.file); err != nil {
			return cfg, "", &exitError{2, err} // a directory or a device, refused before anything runs
		}
	}
	if o.iface != "" && !simulates(cfg.Hierarchy, o.iface) {
		if err := dev.Exists(o.iface); err != nil {
			return cfg, "", &exitError{2, err} // as tcpdump says it
		}
	}
	return cfg, group, nil
}

// userspaceOnly reports whether every expression parses, names only known
// classes, and has sources ("" is skipped) all of which run in userspace
// only. Anything else (a live source, an unknown class, a syntax error, no
// source at all) answers false: then the run discovers the hierarchy as
// always, and reports its errors as always.
func userspaceOnly(reg *functions.Registry, exprs []string) bool {
	sources := 0
	for _, e := range exprs {
		if e == "" {
			continue
		}
		req, err := lang.Parse(e)
		if err != nil {
			return false
		}
		ok := true
		var walk func(cs []*lang.Chain)
		walk = func(cs []*lang.Chain) {
			for _, c := range cs {
				for _, t := range c.Terms {
					switch t := t.(type) {
					case *lang.Group:
						walk(t.Chains)
					case *lang.Func:
						cl, found := reg.Lookup(t.Class)
						if !found {
							ok = false
						} else if cl.IsSource() {
							sources++
							for _, tg := range cl.Targets {
								ok = ok && tg == functions.TargetUser
							}
						}
					}
				}
			}
		}
		walk(req.Chains)
		if !ok {
			return false
		}
	}
	return sources > 0
}

// requests returns the expressions and the default source.
func (o *runOptions) requests(pos []string) ([]string, string, error) {
	exprs := append(append([]string(nil), o.exprs...), pos...)
	if (o.role != "" || o.ctrl != "") && o.mafia == "" {
		return nil, "", usageErrorf("--role and --ctrl go with --mafia FILE")
	}
	if o.mafia != "" {
		e, err := o.mafiaRequest()
		if err != nil {
			return nil, "", err
		}
		exprs = append(exprs, e)
	}
	if len(exprs) == 0 {
		return nil, "", usageErrorf("no expression given")
	}
	switch o.direction {
	case "", "in", "out", "inout":
	default:
		return nil, "", usageErrorf("-Q: direction %q is not in, out or inout", o.direction)
	}
	switch {
	case o.file != "" && o.iface != "":
		return nil, "", usageErrorf("-r and -i exclude each other")
	case o.direction != "" && o.iface == "":
		// with -r as without a default source: one rule
		return nil, "", usageErrorf("-Q (--direction) is the direction of the capture on -i IFACE")
	case o.file != "":
		return exprs, "(pcap,file=" + strconv.Quote(o.file) + ")", nil
	case o.iface != "":
		src := "(dev,expr=" + strconv.Quote(o.iface)
		if o.direction != "" {
			src += ",direction=" + o.direction
		}
		return exprs, src + ")", nil
	}
	return exprs, "", nil
}

func cmdRun(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("run", runSynopsis, stderr)
	var o runOptions
	o.register(fs)
	count := fs.Int64("c", 0, "stop after `N` packets reached the ends of the flowgraph (each once, the packets -w writes), exactly, in every flowspace (0: no limit)")
	captureCount := fs.Int64("capture-count", 0, "stop after the sources captured `N` packets in all, exactly, in every flowspace (0: no limit)")
	out := fs.String("w", "", "write the packets that reach the end of the flowgraph to `OUT.pcap` (a name ending in .pcapng: pcapng, with nanosecond timestamps; - is standard output, and the counters then go to stderr; a pipe whose reader goes away ends the run, exit 0)")
	asJSON := fs.Bool("json", false, "print the result as one JSON object")
	snaplen := fs.Int("s", flowgraph.DefaultSnaplen, "keep at most `SNAPLEN` bytes of each packet (0: the default, as in tcpdump)")
	printLines := fs.Bool("print", false, printHelp)
	progress := fs.Bool("progress", true, "show progress on stderr when it is a terminal and the sources know their length (files, gen, -c)")
	var workers workersFlag
	fs.Var(&workers, "workers", "spread the packets of one live interface over at most `N` workers: its ring buffers (one per CPU) or AF_XDP sockets (one per receive queue), each read by a worker of its own (default: GOMAXPROCS, the cores); every other source has one worker")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	exprs, src, err := o.requests(pos)
	if err != nil {
		return err
	}
	if err := checkCount(*count, *captureCount); err != nil {
		return err
	}
	if *snaplen == 0 {
		*snaplen = flowgraph.DefaultSnaplen // tcpdump's -s 0
	}
	if *snaplen < 0 || *snaplen > flowgraph.DefaultSnaplen {
		return usageErrorf("-s must be a number of bytes up to %d (0: the default, %d), as tcpdump's", flowgraph.DefaultSnaplen, flowgraph.DefaultSnaplen)
	}
	if *printLines && *asJSON {
		return usageErrorf("--print and --json exclude each other")
	}
	host, err := o.plugins.load(stderr)
	if err != nil {
		return err
	}
	defer host.Close()
	// ^C or SIGTERM from here on ends set-up at once, or stops the run
	// (see interrupts).
	intr := catchInterrupts()
	defer intr.stop()
	ctx := intr.ctx
	cfg, group, err := o.configFor(flowgraph.Config{Limit: *count, CaptureLimit: *captureCount, Snaplen: *snaplen, Workers: workers.n}, exprs, src)
	if err != nil {
		return err
	}
	// A pipe whose reader has gone (ffpf run -w - | head) ends the run
	// as the end of the input would, and ^C interrupts a write blocked on
	// a pipe nobody empties: see export.Options.
	runCtx, endRun := context.WithCancel(ctx)
	defer endRun()
	exp := export.Options{Context: ctx, Closed: func(string) { endRun() }}
	if f, ok := stdout.(*os.File); ok {
		exp.Stdout = f
	}
	var printTo io.Writer
	if *printLines {
		printTo = stdout
	}
	if cfg.Registry, err = cliRegistry(printTo, exp); err != nil {
		return err
	}
	rt := flowgraph.New(cfg)
	for _, e := range exprs {
		if _, err := rt.Populate(e, flowgraph.RequestOptions{DefaultSource: src, Group: group}); err != nil {
			return o.mafiaPlace(e, err)
		}
	}
	if *out != "" {
		if _, err := rt.AttachSink("(export,file=" + strconv.Quote(*out) + ")"); err != nil {
			return err
		}
	}
	if *printLines {
		if _, err := rt.AttachSink("(print)"); err != nil {
			return err
		}
	}
	// The counters go to standard output, unless packets do: --print's
	// lines, or a capture file written there (-w -, -w /dev/stdout).
	results := stdout
	if toStdout := exportsToStdout(rt, stdout); toStdout != "" {
		if *printLines {
			return usageErrorf("--print and %s both write to standard output", toStdout)
		}
		results = stderr
	} else if *printLines {
		results = stderr
	}
	if err := rt.Instantiate(); err != nil {
		return err
	}
	noteLimits(rt, stderr)
	intr.started()
	if err := rt.Activate(runCtx); err != nil {
		rt.Close()
		return err
	}
	var bar *progressBar
	if *progress && isTerminal(stderr) {
		bar = startProgress(rt, stderr)
	}
	runErr := rt.Wait()
	bar.finish()
	closeErr := rt.Close()

	if err := printResult(rt, *asJSON, results); err != nil {
		return err
	}
	return errors.Join(runErr, closeErr)
}

// workersFlag is --workers: a number of workers, 1 or more.
type workersFlag struct{ n int }

func (w *workersFlag) String() string {
	if w.n == 0 {
		return ""
	}
	return strconv.Itoa(w.n)
}

func (w *workersFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return errors.New("the number of workers is a whole number, 1 or more")
	}
	w.n = n
	return nil
}

// cliRegistry is the default registry with the classes bound to the
// command's streams: export writing as exp says and, if printTo is set,
// print writing its lines there.
func cliRegistry(printTo io.Writer, exp export.Options) (*functions.Registry, error) {
	if printTo == nil {
		return functions.Default.With(export.NewClass(exp))
	}
	return functions.Default.With(export.NewClass(exp), printClass(printTo))
}

// exportsToStdout returns how the first export function of rt that
// writes to standard output names it ("-w -", "-w /dev/stdout"), or "".
func exportsToStdout(rt *flowgraph.Runtime, stdout io.Writer) string {
	var out os.FileInfo
	if f, ok := stdout.(*os.File); ok {
		out, _ = f.Stat()
	}
	for _, f := range rt.Functions() {
		path, _ := f.Params["file"].(string)
		if f.Class != "export" || path == "" {
			continue
		}
		if path == "-" {
			return "-w -"
		}
		if st, err := os.Stat(path); err == nil && out != nil && os.SameFile(st, out) {
			return "-w " + path
		}
	}
	return ""
}

// noteLimits says, before the run starts, where a placement keeps less of
// a packet than the snap length allows.
func noteLimits(rt *flowgraph.Runtime, w io.Writer) {
	for _, f := range rt.Functions() {
		if f.Class == "dev" && f.Params["steal"] == true && strings.HasPrefix(f.Flowspace, "xdp:") {
			fmt.Fprintf(w, "ffpf: %s: steal=true: packets longer than %d bytes do not fit an AF_XDP frame; they go on to the kernel stack and count as the bridge's dropped\n",
				f.ID, afxdp.MaxFrame)
		}
	}
}

// result is the --json document (DESIGN.md §7).
type result struct {
	Packets   uint64                    `json:"packets"`
	ElapsedNS int64                     `json:"elapsed_ns"`
	Functions []flowgraph.FunctionState `json:"functions"`
	Bridges   []flowgraph.BridgeState   `json:"bridges"`
}

// printResult prints the counters and state of rt's functions and bridges
// to out, in one write: tabwriter writes a cell at a time.
func printResult(rt *flowgraph.Runtime, asJSON bool, out io.Writer) error {
	w := bufio.NewWriter(out)
	if err := writeResult(rt, asJSON, w); err != nil {
		return err
	}
	return w.Flush()
}

func writeResult(rt *flowgraph.Runtime, asJSON bool, w io.Writer) error {
	r := result{Packets: rt.Packets(), ElapsedNS: rt.Elapsed().Nanoseconds(), Functions: rt.Functions(), Bridges: rt.Bridges()}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	el := time.Duration(r.ElapsedNS)
	fmt.Fprintf(w, "%d packets in %v (%s)\n", r.Packets, el.Round(time.Microsecond), formatRate(r.Packets, el))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	writeFunctions(tw, r.Functions)
	for _, fs := range sortedKeys(rt.Attachments()) {
		for _, a := range rt.Attachments()[fs] {
			fmt.Fprintf(tw, "\n%s attached on %s", fs, a)
		}
		fmt.Fprintln(tw)
	}
	if len(r.Bridges) > 0 {
		fmt.Fprintln(tw, "\nBRIDGE\tSTRATEGY\tIN\tOUT\tCOPIED\tDROPPED\t")
		for _, b := range r.Bridges {
			fmt.Fprintf(tw, "%s > %s\t%s\t%d\t%d\t%d\t%d\t\n", b.From, b.To, b.Strategy, b.In, b.Out, b.Copied, b.Dropped)
		}
	}
	return tw.Flush()
}

// writeFunctions writes the table of functions: a header, then a row per
// function with its counters and state.
func writeFunctions(tw io.Writer, fs []flowgraph.FunctionState) {
	fmt.Fprintln(tw, "FUNCTION\tFLOWSPACE\tIN\tOUT\tFILTERED\tDROPPED\tSTATE")
	for _, f := range fs {
		id := f.ID
		if f.Label != "" {
			id += " (" + f.Label + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\n", id, f.Flowspace, f.In, f.Out, f.Filtered, f.Dropped, formatState(f.State))
	}
}

func formatState(s map[string]any) string {
	keys := sortedKeys(s)
	out := ""
	for i, k := range keys {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%s=%v", k, s[k])
	}
	return out
}
