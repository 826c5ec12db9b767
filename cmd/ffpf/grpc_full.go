//go:build !nogrpc

package main

// elsewhere is where a build without gRPC runs a command that needs it
// again; this build has gRPC, so never.
func elsewhere(error) (int, bool) { return 0, false }
