package main

// Some of ffpf's packages are initialised by every process that links
// them, whatever it runs: gRPC's stacks, P4Runtime's (the p4 flowspace's
// controller, ffpf p4 switch's server) and the plugins' control plane,
// with protobuf and the P4Runtime types, 2 to 2.5 ms of a start-up of 8;
// and Prometheus's client library, with its protobuf types (client_model),
// which the daemon and the DTA collector serve /metrics with. make build
// therefore builds ffpf twice: bin/ffpf, the lean build, without them (the
// build tag nogrpc), and bin/ffpf-grpc, the whole of ffpf (the default
// build, go build ./cmd/ffpf). bin/ffpf runs every command itself except
// those that need what it leaves out, which it runs again, with the same
// arguments, environment and descriptors, by exec'ing bin/ffpf-grpc: ffpf
// serve (the daemon; its clients, submit, ls, stat, call, read and rm,
// stay lean), ffpf dta collect --http (its /metrics; the class
// dta-collector, in a run, serves none), ffpf p4 build, ffpf p4
// switch and ffpf p4 net, a run, check, place or classes with plugins (--plugins,
// $FFPF_PLUGINS), and any command given a hierarchy file with a p4
// flowspace. Each is found where the whole build would first need what
// the lean one lacks, before anything is read from standard input or
// written.

// grpcSibling is the whole build's file name, beside the lean build.
const grpcSibling = "ffpf-grpc"

// needsWhole is a command that needs what the lean build leaves out.
type needsWhole struct {
	what  string // the command or option: "ffpf p4 switch"
	needs string // what it needs: "gRPC"
}

func (e *needsWhole) Error() string {
	return e.what + " needs " + e.needs + ", which this ffpf was built without (-tags nogrpc)"
}
