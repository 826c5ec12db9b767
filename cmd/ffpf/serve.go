//go:build !nogrpc

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/flowgraph/daemon"
	"github.com/ffpf-go/ffpf/flowgraph/daemon/client"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/hierarchy"
	"github.com/ffpf-go/ffpf/functions"
)

const serveSynopsis = `[--socket PATH] [--socket-mode MODE] [--socket-group GROUP] [--flowgroup uid|gid|pid|all]
         [--hierarchy FILE.yaml] [--http ADDR] [--http-token TOKEN] [--state-dir DIR] [--plugins DIR]

Runs ffpf as a service that many applications share: one flowgraph, into
which 'ffpf submit' (and the Go package flowgraph/daemon/client) add
requests and from which 'ffpf rm' removes them. Each connection's peer
credentials choose its flowgroup by --flowgroup: requests of one
flowgroup share identical functions, and see nothing of another's (root
sees all). Whoever may open the socket (--socket-mode, --socket-group)
may submit requests, live captures included; a request names files by
absolute paths, each checked against the client's own permissions.

--http serves the same operations as JSON under /api/v1/, Prometheus's
/metrics, and a page on which to compose, check, submit and watch
requests; keep it on loopback (127.0.0.1:9090). Over HTTP nothing is
written (submit, call, rm) without the token given with --http-token.

SIGINT or SIGTERM removes every request, detaching every program and
qdisc, and ends the daemon. A daemon started after one that was killed
removes what that one left attached (clsact filters and the qdiscs
recorded in --state-dir).`

func cmdServe(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("serve", serveSynopsis, stderr)
	socket := fs.String("socket", "", "listen on the unix socket `PATH` (default $FFPF_SOCKET, or "+client.DefaultSocket+")")
	mode := fs.String("socket-mode", "0660", "the socket's permission bits, in octal (`MODE`): who may connect")
	group := fs.String("socket-group", "", "the socket's `GROUP` (a name or number; default the daemon's)")
	policy := fs.String("flowgroup", flowgraph.GroupUID, "map each connection to a flowgroup by its peer's `POLICY`: uid, gid, pid or all")
	hier := fs.String("hierarchy", "", "place functions in the flowspace hierarchy described in `FILE.yaml` (default: the one found on this machine)")
	httpAddr := fs.String("http", "", "serve the HTTP API, /metrics and the web page on `ADDR` (a port alone, :9090, is on loopback; 0.0.0.0:9090 is every address)")
	token := fs.String("http-token", "", "allow writes over HTTP (submit, call, rm) to requests that present `TOKEN` (Authorization: Bearer TOKEN)")
	stateDir := fs.String("state-dir", "", "record there what would outlive a crash of the daemon, for the next one to remove (`DIR`; default the socket's path with .state)")
	var plugins pluginOptions
	plugins.register(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("serve takes no arguments (%q)", pos[0])
	}
	m, err := strconv.ParseUint(*mode, 8, 32)
	if err != nil || m > 0o777 || m == 0 {
		return usageErrorf("--socket-mode %q: permission bits in octal, as 0660", *mode)
	}
	if _, err := flowgraph.Flowgroup(*policy, flowgraph.Self()); err != nil {
		return usageErrorf("--flowgroup: %v", err)
	}
	host, err := plugins.load(stderr)
	if err != nil {
		return err
	}
	defer host.Close()
	build := func() (flowspaces.Flowspace, error) {
		if *hier != "" {
			return hierarchy.Load(*hier, functions.Default)
		}
		root, _ := hierarchy.Discover(functions.Default)
		return root, nil
	}
	if *hier != "" {
		if _, err := build(); err != nil {
			return &exitError{2, err}
		}
	}
	path := client.Socket(*socket)
	if *stateDir == "" {
		*stateDir = path + ".state"
	}
	d, err := daemon.New(daemon.Config{Socket: path, SocketMode: os.FileMode(m), SocketGroup: *group, Policy: *policy,
		Hierarchy: build, StateDir: *stateDir, HTTP: *httpAddr, Token: *token, Version: version(), Log: stderr})
	if err != nil {
		return &exitError{2, err}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		<-sigs
		d.Close()
	}()
	fmt.Fprintf(stderr, "ffpf: serving on %s (flowgroups by %s)", path, *policy)
	if a := d.HTTPAddr(); a != "" {
		fmt.Fprintf(stderr, "; HTTP on http://%s/", a)
	}
	fmt.Fprintln(stderr)
	err = d.Serve()
	return errors.Join(err, d.Close())
}
