package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/ffpf-go/ffpf/bridges/shm"
	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/flowgraph/daemon/client"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/export"
)

// The client commands of the daemon (ffpf serve): submit, ls, stat, call,
// read, rm. Each takes --socket PATH, or $FFPF_SOCKET.

// dial connects to the daemon; a daemon that is not there is a runtime
// error (exit 1).
func dial(socket string) (*client.Client, error) { return client.Dial(socket) }

// daemonErr gives a daemon's refusal its exit status: 2 for a request
// that is wrong as written, 1 for the rest.
func daemonErr(err error) error {
	if client.IsInvalid(err) {
		return &exitError{2, err}
	}
	return err
}

func socketFlag(fs *flagSet) *string {
	return fs.String("socket", "", "the daemon's control socket `PATH` (default $FFPF_SOCKET, or "+client.DefaultSocket+")")
}

const submitSynopsis = `[-r FILE | -i IFACE [-Q in|out|inout]] [-c N | --capture-count N] [--name NAME] [--json] [--socket PATH] EXPR

Submits EXPR to the daemon and prints the request's id. The request lives
until 'ffpf rm'; when its sources end (a file read to its end, -c N
reached) it stays listed as ended, with its final state. Functions
identical to those of requests of the same flowgroup are shared. A chain
that starts with a function that is not a source is fed by -r FILE or -i
IFACE; files are named to the daemon by absolute paths and opened only if
you may.

-c N ends the request once N packets have reached its ends (its functions
that feed none, each packet once: the packets 'ffpf read' gets), as
tcpdump -c and ffpf run -c count: exactly N, and its sources read no
packet past the N-th. --capture-count N counts instead the packets its
sources capture. A request with a limit shares no function, not even its
source, with another request: it reads its own capture of the interface
(or its own pass over the file), as a second tcpdump would, so that the
limit and its final state are its own; the other requests go on, and
count nothing of it.`

func cmdSubmit(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("submit", submitSynopsis, stderr)
	socket := socketFlag(fs)
	file := fs.String("r", "", "read packets from `FILE` for chains without a source")
	iface := fs.String("i", "", "capture on `IFACE` for chains without a source")
	dir := fs.String("Q", "", "with -i, capture the packets of `DIRECTION`: in, out or inout")
	name := fs.String("name", "", "a `NAME` for the request, shown beside its id (and usable in its place)")
	count := fs.Int64("c", 0, "end the request after `N` packets reached its ends (each once, the packets 'ffpf read' gets), exactly (0: no limit)")
	captureCount := fs.Int64("capture-count", 0, "end the request after its sources captured `N` packets, exactly (0: no limit)")
	asJSON := fs.Bool("json", false, "print the request as a JSON object")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("submit takes one expression (quote it)")
	}
	if err := checkCount(*count, *captureCount); err != nil {
		return err
	}
	a := client.SubmitArgs{Expr: pos[0], Iface: *iface, Direction: *dir, Name: *name, Keep: true,
		Count: *count, CaptureCount: *captureCount}
	if *file != "" {
		if a.File, err = filepath.Abs(*file); err != nil {
			return usageErrorf("-r %s: %v", *file, err)
		}
	}
	c, err := dial(*socket)
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := c.Submit(a)
	if err != nil {
		return daemonErr(err)
	}
	if *asJSON {
		return printJSON(stdout, r)
	}
	_, err = fmt.Fprintln(stdout, r.ID)
	return err
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

const lsSynopsis = `[--json] [--socket PATH]

Lists the requests of your flowgroup (every flowgroup's for root): id,
name, flowgroup, state (active, ended, failed) and expression, then their
functions: where each runs, how many requests share it, its counters.`

func cmdLs(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("ls", lsSynopsis, stderr)
	socket := socketFlag(fs)
	asJSON := fs.Bool("json", false, "print the list as one JSON object")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("ls takes no arguments")
	}
	c, err := dial(*socket)
	if err != nil {
		return err
	}
	defer c.Close()
	l, err := c.List()
	if err != nil {
		return daemonErr(err)
	}
	if *asJSON {
		return printJSON(stdout, l)
	}
	w := bufio.NewWriter(stdout)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "REQUEST\tNAME\tFLOWGROUP\tSTATE\tLIMIT\tEXPRESSION")
	for _, r := range l.Requests {
		limit := "-"
		if r.Limit != nil {
			limit = fmt.Sprintf("%d/%d", r.Limit.Counted, r.Limit.Packets)
			if r.Limit.At == "capture" {
				limit += " captured"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, dash(r.Name), r.Flowgroup, r.State, limit, r.Canonical)
	}
	if len(l.Functions) > 0 {
		fmt.Fprintln(tw, "\nFUNCTION\tFLOWSPACE\tREFS\tIN\tOUT\tFILTERED\tDROPPED")
		for _, f := range l.Functions {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\n", f.ID, f.Flowspace, f.Refs, f.In, f.Out, f.Filtered, f.Dropped)
		}
	}
	tw.Flush()
	return w.Flush()
}

// limitWhere says where a request's limit counts packets.
func limitWhere(at string) string {
	if at == "capture" {
		return "where its sources capture them (--capture-count)"
	}
	return "at its ends (-c)"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

const statSynopsis = `[--json] [-f] [--interval D] [--socket PATH] ID

Prints a request's functions with their counters and state, and the
readers of its packets; -f prints them again every --interval until the
request is removed or ^C (with --json, one object per line).`

func cmdStat(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("stat", statSynopsis, stderr)
	socket := socketFlag(fs)
	asJSON := fs.Bool("json", false, "print one JSON object (per line with -f)")
	follow := fs.Bool("f", false, "follow: print again every interval")
	every := fs.Duration("interval", time.Second, "with -f, print every `D`")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("stat takes one request id")
	}
	if *every <= 0 {
		return usageErrorf("--interval must be positive")
	}
	c, err := dial(*socket)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for n := 0; ; n++ {
		st, err := c.Stat(pos[0])
		if err != nil {
			if n > 0 && client.IsNotFound(err) {
				return nil // removed while followed
			}
			return daemonErr(err)
		}
		if *asJSON && *follow {
			b, _ := json.Marshal(st)
			_, err = fmt.Fprintf(stdout, "%s\n", b)
		} else if *asJSON {
			err = printJSON(stdout, st)
		} else {
			err = printStat(stdout, st, n > 0)
		}
		if err != nil || !*follow {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(*every):
		}
	}
}

func printStat(out io.Writer, st *client.Stat, again bool) error {
	w := bufio.NewWriter(out)
	if again {
		fmt.Fprintln(w)
	}
	r := st.Request
	fmt.Fprintf(w, "%s", r.ID)
	if r.Name != "" {
		fmt.Fprintf(w, " (%s)", r.Name)
	}
	fmt.Fprintf(w, " %s in flowgroup %s: %s\n", r.State, r.Flowgroup, r.Canonical)
	if r.Error != "" {
		fmt.Fprintf(w, "error: %s\n", r.Error)
	}
	if l := r.Limit; l != nil {
		fmt.Fprintf(w, "%d of %d packets counted %s\n", l.Counted, l.Packets, limitWhere(l.At))
	}
	fmt.Fprintf(w, "%d packets from its sources\n", st.Packets)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fs := make([]flowgraph.FunctionState, len(st.Functions))
	for i, f := range st.Functions {
		fs[i] = flowgraph.FunctionState{ID: f.ID, Label: f.Label, Flowspace: f.Flowspace,
			In: f.In, Out: f.Out, Filtered: f.Filtered, Dropped: f.Dropped, State: f.State}
	}
	writeFunctions(tw, fs)
	if len(st.Readers) > 0 {
		fmt.Fprintln(tw, "\nREADER\tPID\tIN\tOUT\t\tDROPPED\t")
		for _, rd := range st.Readers {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t\t%d\t\n", rd.Reader, rd.PID, rd.In, rd.Out, rd.Dropped)
		}
	}
	tw.Flush()
	return w.Flush()
}

const callSynopsis = `[--socket PATH] ID FUNCTION HANDLER [ARG...]

Runs a handler of one of the request's functions (its label or its id) on
the running flowgraph and prints its result: for example, add an event to
a Trumpet monitor ('ffpf call web tr add "big: *; sum(volume) > 1MB;
5-tuple; 100ms"'). The ARGs are joined by spaces.`

func cmdCall(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("call", callSynopsis, stderr)
	socket := socketFlag(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 3 {
		return usageErrorf("call takes a request id, a function and a handler (and its argument)")
	}
	c, err := dial(*socket)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := c.Call(pos[0], pos[1], pos[2], strings.Join(pos[3:], " "))
	if err != nil {
		return daemonErr(err)
	}
	if s, ok := res.(string); ok {
		_, err = fmt.Fprintln(stdout, s)
		return err
	}
	return printJSON(stdout, res)
}

const rmSynopsis = `[--socket PATH] ID...

Removes requests: their functions that no other request shares leave the
flowgraph, with their programs; shared ones stay.`

func cmdRm(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("rm", rmSynopsis, stderr)
	socket := socketFlag(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageErrorf("rm takes request ids")
	}
	c, err := dial(*socket)
	if err != nil {
		return err
	}
	defer c.Close()
	var errs []error
	for _, id := range pos {
		if err := c.Remove(id); err != nil {
			errs = append(errs, daemonErr(err))
		}
	}
	return errors.Join(errs...)
}

const readSynopsis = `[-w OUT.pcap | --print | --jsonl] [-c N] [--socket PATH] ID

Reads what the request exports (the packets, or records, that reach its
ends) from now on, through a ring of shared memory that the daemon fills
and this process maps read-only: -w writes a capture file (pcapng for a
name ending in .pcapng; - is standard output), --print a line per packet
(the default), --jsonl records as JSON lines. It ends after -c packets,
when the request is removed, or at ^C, and says on stderr how many it read
and how many it lost for reading too slowly (others lose nothing of it).`

func cmdRead(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("read", readSynopsis, stderr)
	socket := socketFlag(fs)
	out := fs.String("w", "", "write the packets to `OUT.pcap` (.pcapng: pcapng; -: standard output)")
	printLines := fs.Bool("print", false, "print a line per packet, as tcpdump does")
	jsonl := fs.Bool("jsonl", false, "print records as JSON lines")
	count := fs.Int64("c", 0, "stop after `N` packets (0: no limit)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("read takes one request id")
	}
	n := 0
	for _, b := range []bool{*out != "", *printLines, *jsonl} {
		if b {
			n++
		}
	}
	if n > 1 {
		return usageErrorf("-w, --print and --jsonl exclude each other")
	}
	if *count < 0 {
		return usageErrorf("-c must be a number of packets")
	}
	c, err := dial(*socket)
	if err != nil {
		return err
	}
	defer c.Close()
	rd, err := c.Read(pos[0])
	if err != nil {
		return daemonErr(err)
	}
	defer rd.Close()
	link := functions.LinkType(rd.Info.LinkType)
	var sink functions.Function
	exp := export.Options{}
	if f, ok := stdout.(*os.File); ok {
		exp.Stdout = f
	}
	switch {
	case *jsonl:
		if link != functions.LinkRecord {
			return usageErrorf("--jsonl prints records, but request %s exports packets (%v): use --print or -w", pos[0], link)
		}
		sink, err = export.CreateJSONLWith("-", exp)
	case *out != "" && export.IsPcapng(*out):
		sink, err = export.CreateNgWith(*out, link, rd.Info.Snaplen, exp)
	case *out != "":
		sink, err = export.CreateFieldWith(*out, uint32(link), rd.Info.Snaplen, exp)
	default:
		p := newPrinter(stdout, link)
		sink = p
	}
	if err != nil {
		return err
	}
	if cl, ok := sink.(functions.Closer); ok {
		defer cl.Close()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pbuf := buffers.NewPBufView(rd.Arena(), rd.Info.Cells*buffers.MaxBatch)
	b := &buffers.Batch{PBuf: pbuf, Cap: buffers.MaxBatch}
	var got, lost uint64
	why := "the request was removed"
	for ctx.Err() == nil && (*count == 0 || int64(got) < *count) {
		cell, err := rd.Next(200 * time.Millisecond)
		if errors.Is(err, shm.ErrTimeout) {
			continue
		}
		if errors.Is(err, shm.ErrClosed) {
			break
		}
		if errors.Is(err, shm.ErrPeerGone) {
			why = "the daemon went away"
			break
		}
		if err != nil {
			return err
		}
		lost += uint64(cell.Dropped)
		b.Reset()
		b.Base = uint32(cell.Index * buffers.MaxBatch)
		b.Now = cell.Now
		k := min(int(cell.N), buffers.MaxBatch)
		if *count > 0 {
			k = min(k, int(*count-int64(got)))
		}
		for i := range k {
			d := &cell.D[i]
			if _, ok := cell.Packet(i); !ok {
				continue // the daemon would not write this: skipped, not trusted
			}
			b.AppendRef(uint64(cell.Offset)+uint64(d.Off), d.CapLen, d.WireLen, d.TS)
			b.E[b.N-1].Class = cell.E[i].Class
		}
		got += uint64(b.N)
		sink.Process(b)
		rd.Release()
	}
	if ctx.Err() != nil {
		why = "interrupted"
	} else if *count > 0 && int64(got) >= *count {
		why = fmt.Sprintf("-c %d reached", *count)
	}
	fmt.Fprintf(stderr, "ffpf: %d packets read, %d lost for reading too slowly (%s)\n", got, lost, why)
	return nil
}
