package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ffpf-go/ffpf/functions/dta/collector"
)

const dtaUsage = `Usage:
  ffpf dta collect --listen ADDR [--keywrite slots=M[,redundancy=N]] [--append lists=L,size=S]
                   [--keyincrement slots=M[,redundancy=N]] [--postcarding chunks=C[,hops=B][,redundancy=N][,values=V]]
                   [--http ADDR] [--sockets N] [--rcvbuf BYTES]
  ffpf dta query --server HTTPADDR [--json] keywrite KEY [--redundancy N] [--consensus T]
  ffpf dta query --server HTTPADDR [--json] append LIST [N]
  ffpf dta query --server HTTPADDR [--json] keyincrement KEY [--redundancy N]
  ffpf dta query --server HTTPADDR [--json] postcarding KEY

collect is a DTA collector (Direct Telemetry Access): it allocates the
structures of the primitives it is given, receives DTA reports on UDP
(several SO_REUSEPORT sockets, one core each), writes them into memory as
a translator would, and answers queries and Prometheus scrapes (/metrics)
on --http, until interrupted; then it prints its counters as JSON.
query asks a collector: Key-Write's value for a key, or "not found" (no
copy of the key) or "collision" (copies with its checksum disagree);
Key-Increment's count; Postcarding's path ("-" for a hop not collected);
the last N (10) entries of an Append list, oldest first. A KEY is
0x-hexadecimal, decimal, or an IPv4 address (10.0.1.5).`

func cmdDTA(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageErrorf("dta needs a command: collect or query; see 'ffpf dta -h'")
	}
	switch args[0] {
	case "collect":
		return dtaCollect(args[1:], stdout, stderr)
	case "query":
		return dtaQuery(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stderr, dtaUsage)
		return nil
	}
	return usageErrorf("dta has no command %q (collect, query); see 'ffpf dta -h'", args[0])
}

// checkHostPort refuses an address that is not HOST:PORT with a port of
// 0 to 65535 or a service name of network; whether the host resolves is
// found when the collector listens.
func checkHostPort(network, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("not HOST:PORT")
	}
	if n, err := strconv.ParseUint(port, 10, 64); err == nil {
		if n > 65535 {
			return fmt.Errorf("port %d is past 65535", n)
		}
		return nil
	}
	if _, err := net.LookupPort(network, port); err != nil {
		return fmt.Errorf("%q is no port number (0 to 65535) nor %s service", port, network)
	}
	return nil
}

func dtaCollect(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("dta collect", "--listen ADDR [--keywrite SPEC] [--append SPEC] [--keyincrement SPEC] [--postcarding SPEC] [--http ADDR] [--sockets N] [--rcvbuf BYTES]", stderr)
	listen := fs.String("listen", "", "receive reports on UDP `ADDR` (host:port; DTA's port is 40040)")
	kw := fs.String("keywrite", "", "host Key-Write: `slots=M[,redundancy=N]` (N: the copies a query assumes, default 2)")
	ap := fs.String("append", "", "host Append: `lists=L,size=S` (S entries per list)")
	ki := fs.String("keyincrement", "", "host Key-Increment: `slots=M[,redundancy=N]`")
	pc := fs.String("postcarding", "", "host Postcarding: `chunks=C[,hops=B][,redundancy=N][,values=V]` (B default 5, N 1, hop values 0 to V-1, V default 16M)")
	httpAddr := fs.String("http", "", "answer queries and /metrics on `ADDR` (host:port)")
	sockets := fs.Int("sockets", 0, "UDP sockets, one ingesting goroutine each (0: one per core)")
	rcvbuf := fs.Int("rcvbuf", 0, "receive buffer of each socket in `BYTES` (0: 4 MiB)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("dta collect takes no arguments, not %q", pos[0])
	}
	if *listen == "" {
		return usageErrorf("dta collect needs --listen ADDR")
	}
	if *sockets < 0 || *sockets > 1024 || *rcvbuf < 0 {
		return usageErrorf("--sockets is 1 to 1024 (0: one per core), --rcvbuf a positive size")
	}
	cfg := collector.ServerConfig{Listen: *listen, HTTP: *httpAddr, Sockets: *sockets, RcvBuf: *rcvbuf}
	var perr error
	set := func(spec string, parse func(string) error) {
		if spec != "" && perr == nil {
			perr = parse(spec)
		}
	}
	set(*kw, func(s string) (err error) { cfg.KeyWrite, err = collector.ParseKeyWrite(s); return })
	set(*ap, func(s string) (err error) { cfg.Append, err = collector.ParseAppend(s); return })
	set(*ki, func(s string) (err error) { cfg.KeyIncrement, err = collector.ParseKeyIncrement(s); return })
	set(*pc, func(s string) (err error) { cfg.Postcarding, err = collector.ParsePostcarding(s); return })
	if perr != nil {
		return usageErrorf("%v", perr)
	}
	if err := cfg.Config.Validate(); err != nil {
		return usageErrorf("%v", err)
	}
	if err := cfg.Config.CheckMemory(); err != nil {
		return usageErrorf("%v", err)
	}
	for _, a := range []struct{ flag, addr, net string }{{"--listen", *listen, "udp"}, {"--http", *httpAddr, "tcp"}} {
		if err := checkHostPort(a.net, a.addr); a.addr != "" && err != nil {
			return usageErrorf("%s %s: %v", a.flag, a.addr, err)
		}
	}
	if *httpAddr != "" {
		if dtaMetrics == nil {
			return &needsWhole{"ffpf dta collect --http", "Prometheus's client library (its /metrics)"}
		}
		cfg.Metrics = dtaMetrics
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := collector.NewServer(cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	c := s.Collector().Config()
	var hosts []string
	if c.KeyWrite.Enabled() {
		hosts = append(hosts, fmt.Sprintf("keywrite %d slots (N=%d)", c.KeyWrite.Slots, c.KeyWrite.Redundancy))
	}
	if c.Append.Enabled() {
		hosts = append(hosts, fmt.Sprintf("append %d lists of %d", c.Append.Lists, c.Append.Size))
	}
	if c.KeyIncrement.Enabled() {
		hosts = append(hosts, fmt.Sprintf("keyincrement %d counters (N=%d)", c.KeyIncrement.Slots, c.KeyIncrement.Redundancy))
	}
	if c.Postcarding.Enabled() {
		hosts = append(hosts, fmt.Sprintf("postcarding %d chunks of %d hops (N=%d, %d values)", c.Postcarding.Chunks, c.Postcarding.Hops, c.Postcarding.Redundancy, c.Postcarding.Values))
	}
	line := fmt.Sprintf("dta collect: reports on udp %s", s.Addr())
	if h := s.HTTPAddr(); h != nil {
		line += fmt.Sprintf(", queries on http://%s", h)
	}
	fmt.Fprintf(stderr, "%s; %s, %d MiB\n", line, strings.Join(hosts, ", "), (c.Bytes()+1<<20-1)>>20)
	<-ctx.Done()
	stop()
	s.Close()
	b, err := json.MarshalIndent(s.Stats(), "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", b)
	return err
}

func dtaQuery(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("dta query", "--server HTTPADDR [--json] (keywrite KEY [--redundancy N] [--consensus T] | append LIST [N] | keyincrement KEY [--redundancy N] | postcarding KEY)", stderr)
	server := fs.String("server", "", "the collector's HTTP endpoint, `HTTPADDR` (host:port, its --http)")
	asJSON := fs.Bool("json", false, "print the collector's answer as JSON")
	red := fs.Int("redundancy", 0, "keywrite, keyincrement: the copies `N` to read (0: the collector's default)")
	cons := fs.Int("consensus", 0, "keywrite: votes `T` a value needs (0: the plurality)")
	timeout := fs.Duration("timeout", 10*time.Second, "give up after `DURATION`")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if *server == "" {
		return usageErrorf("dta query needs --server HTTPADDR")
	}
	hostPort := *server
	if u, err := url.Parse(*server); err == nil && strings.Contains(*server, "://") {
		hostPort = u.Host // a URL names its host:port too
		if u.Port() == "" {
			hostPort = net.JoinHostPort(u.Hostname(), "80")
		}
	}
	if err := checkHostPort("tcp", hostPort); err != nil {
		return usageErrorf("--server %s: %v", *server, err)
	}
	if len(pos) == 0 {
		return usageErrorf("dta query needs a query: keywrite KEY, append LIST [N], keyincrement KEY or postcarding KEY")
	}
	prim, rest := pos[0], pos[1:]
	q := url.Values{}
	switch prim {
	case "keywrite", "keyincrement", "postcarding":
		if len(rest) != 1 {
			return usageErrorf("dta query %s takes one KEY", prim)
		}
		if _, err := collector.ParseKey(rest[0]); err != nil {
			return usageErrorf("%v", err)
		}
		q.Set("key", rest[0])
	case "append":
		if len(rest) < 1 || len(rest) > 2 {
			return usageErrorf("dta query append takes a LIST and optionally N")
		}
		if l, err := strconv.ParseUint(rest[0], 0, 32); err != nil || l >= collector.MaxLists {
			return usageErrorf("%q is not a list id", rest[0])
		}
		q.Set("list", rest[0])
		if len(rest) == 2 {
			if n, err := strconv.Atoi(rest[1]); err != nil || n < 0 || n > 1<<20 {
				return usageErrorf("%q is not a number of entries (0 to %d)", rest[1], 1<<20)
			}
			q.Set("n", rest[1])
		}
	default:
		return usageErrorf("dta query has no primitive %q (keywrite, append, keyincrement, postcarding)", prim)
	}
	if *red != 0 {
		if *red < 1 || *red > collector.MaxRedundancy || (prim != "keywrite" && prim != "keyincrement") {
			return usageErrorf("--redundancy is 1 to %d, for keywrite and keyincrement", collector.MaxRedundancy)
		}
		q.Set("redundancy", strconv.Itoa(*red))
	}
	if *cons != 0 {
		if *cons < 1 || *cons > collector.MaxRedundancy || prim != "keywrite" {
			return usageErrorf("--consensus is 1 to %d, for keywrite", collector.MaxRedundancy)
		}
		q.Set("consensus", strconv.Itoa(*cons))
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	a, err := (&collector.Client{Server: *server}).Query(ctx, prim, q)
	if err != nil {
		var qe *collector.QueryError
		if errors.As(err, &qe) && qe.Code == 400 {
			return usageErrorf("%v", err)
		}
		return err
	}
	if *asJSON {
		b, err := json.Marshal(a)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", b)
		return err
	}
	var out strings.Builder
	switch {
	case prim == "append":
		for _, e := range a.Entries {
			fmt.Fprintf(&out, "%d\n", e)
		}
	case a.Status != "found":
		out.WriteString(a.Status + "\n")
	case prim == "postcarding":
		hops := make([]string, len(a.Hops))
		for i, h := range a.Hops {
			hops[i] = "-"
			if h != nil {
				hops[i] = strconv.FormatUint(uint64(*h), 10)
			}
		}
		out.WriteString(strings.Join(hops, " ") + "\n")
	case a.Value != nil:
		fmt.Fprintf(&out, "%d\n", *a.Value)
	}
	_, err = io.WriteString(stdout, out.String())
	return err
}
