//go:build nogrpc

package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"syscall"

	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/hierarchy"
	"github.com/ffpf-go/ffpf/functions/dta/collector"
)

// This build, the lean one, leaves out ffpf's gRPC stacks and the daemon
// with Prometheus's client library (see grpc.go): what needs them says so
// with needsWhole, or hierarchy.NotBuiltError, and elsewhere runs the
// command with ffpf-grpc.

// pluginHost stands for functions/plugin's Host, which this build never
// has: plugins make the command run elsewhere.
type pluginHost struct{}

func (*pluginHost) Close() error         { return nil }
func (*pluginHost) Plugin(string) string { return "" }

func (o *pluginOptions) load(io.Writer) (*pluginHost, error) {
	dirs, err := o.dirList()
	if err != nil || len(dirs) == 0 {
		return nil, err
	}
	return nil, &needsWhole{"a plugin directory", "gRPC"}
}

func cmdP4Build([]string, io.Writer, io.Writer) error {
	return &needsWhole{"ffpf p4 build", "gRPC"}
}

func cmdP4Switch([]string, io.Writer, io.Writer) error {
	return &needsWhole{"ffpf p4 switch", "gRPC"}
}

// cmdServe stands for the daemon, which serves /metrics with Prometheus's
// client library; its clients (submit, ls, stat, call, read, rm) run here.
func cmdServe([]string, io.Writer, io.Writer) error {
	return &needsWhole{"ffpf serve", "the daemon and Prometheus's client library"}
}

func cmdP4Net([]string, io.Writer, io.Writer) error {
	return &needsWhole{"ffpf p4 net", "gRPC"}
}

func init() {
	p4Commands = append(p4Commands, p4Command{"switch", p4SwitchSynopsis, cmdP4Switch},
		p4Command{"net", p4NetSynopsis, cmdP4Net})
}

// dtaMetrics would answer the scrapes of ffpf dta collect --http with
// Prometheus's client library, which this build leaves out: the command
// runs elsewhere (its flags checked first).
var dtaMetrics func(*collector.Server) http.Handler

// A hierarchy of this build has no switch.

func isSwitchPort(flowspaces.Flowspace, string) bool    { return false }
func writeSwitches(io.Writer, *flowgraph.Runtime) error { return nil }
func switchResources(*flowgraph.Runtime) (any, error)   { return []struct{}{}, nil }

// elsewhere runs the command again with ffpf-grpc when err says it needs
// what this build leaves out: exec replaces this process, so the command's status, output and
// signals are ffpf-grpc's. It reports false for any other error, and when
// ffpf-grpc cannot be run, why, with status 1.
func elsewhere(err error) (int, bool) {
	if ee, ok := err.(*exitError); ok {
		err = ee.err
	}
	var nw *needsWhole
	var nb *hierarchy.NotBuiltError
	if !errors.As(err, &nw) && !errors.As(err, &nb) {
		return 0, false
	}
	self, serr := os.Executable()
	if serr != nil {
		fmt.Fprintf(os.Stderr, "ffpf: %v, and ffpf cannot find its own file to run %s beside it: %v\n", err, grpcSibling, serr)
		return 1, true
	}
	sibling := filepath.Join(filepath.Dir(self), grpcSibling)
	serr = syscall.Exec(sibling, append([]string{os.Args[0]}, os.Args[1:]...), os.Environ())
	fmt.Fprintf(os.Stderr, "ffpf: %v; the whole build, %s, cannot be run: %v (make build builds both)\n", err, sibling, serr)
	return 1, true
}
