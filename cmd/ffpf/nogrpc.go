//go:build nogrpc

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/hierarchy"
)

// This build leaves out ffpf's gRPC stacks (see grpc.go): what needs them
// says so with needsGRPC, or hierarchy.NotBuiltError, and elsewhere runs
// the command with ffpf-grpc.

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
	return nil, &needsGRPC{"a plugin directory"}
}

func cmdP4Build([]string, io.Writer, io.Writer) error {
	return &needsGRPC{"ffpf p4 build"}
}

func cmdP4Switch([]string, io.Writer, io.Writer) error {
	return &needsGRPC{"ffpf p4 switch"}
}

func cmdP4Net([]string, io.Writer, io.Writer) error {
	return &needsGRPC{"ffpf p4 net"}
}

func init() {
	p4Commands = append(p4Commands, p4Command{"switch", p4SwitchSynopsis, cmdP4Switch},
		p4Command{"net", p4NetSynopsis, cmdP4Net})
}

// A hierarchy of this build has no switch.

func isSwitchPort(flowspaces.Flowspace, string) bool    { return false }
func writeSwitches(io.Writer, *flowgraph.Runtime) error { return nil }
func switchResources(*flowgraph.Runtime) (any, error)   { return []struct{}{}, nil }

// elsewhere runs the command again with ffpf-grpc when err says it needs
// gRPC: exec replaces this process, so the command's status, output and
// signals are ffpf-grpc's. It reports false for any other error, and when
// ffpf-grpc cannot be run, why, with status 1.
func elsewhere(err error) (int, bool) {
	if ee, ok := err.(*exitError); ok {
		err = ee.err
	}
	var ng *needsGRPC
	var nb *hierarchy.NotBuiltError
	if !errors.As(err, &ng) && !errors.As(err, &nb) {
		return 0, false
	}
	self, serr := os.Executable()
	if serr != nil {
		fmt.Fprintf(os.Stderr, "ffpf: %v, and ffpf cannot find its own file to run %s beside it: %v\n", err, grpcSibling, serr)
		return 1, true
	}
	sibling := filepath.Join(filepath.Dir(self), grpcSibling)
	serr = syscall.Exec(sibling, append([]string{os.Args[0]}, os.Args[1:]...), os.Environ())
	fmt.Fprintf(os.Stderr, "ffpf: %v; its build with gRPC, %s, cannot be run: %v (make build builds both)\n", err, sibling, serr)
	return 1, true
}
