package main

// ffpf's gRPC stacks, P4Runtime's (the p4 flowspace's controller, ffpf p4
// switch's server) and the plugins' control plane, with protobuf and the
// P4Runtime types, are initialised by every process that links them,
// whatever it runs: 2 to 2.5 ms of a start-up of 8. make build therefore
// builds ffpf twice: bin/ffpf without them (the build tag nogrpc), and
// bin/ffpf-grpc, the whole of ffpf (the default build, go build
// ./cmd/ffpf). bin/ffpf runs every command itself except those that need
// gRPC, which it runs again, with the same arguments, environment and
// descriptors, by exec'ing bin/ffpf-grpc: ffpf p4 build, ffpf p4
// switch and ffpf p4 net, a run, check, place or classes with plugins (--plugins,
// $FFPF_PLUGINS), and any command given a hierarchy file with a p4
// flowspace. Each is found where the whole build would first need gRPC,
// before anything is read from standard input or written.

// grpcSibling is the whole build's file name, beside the build without
// gRPC.
const grpcSibling = "ffpf-grpc"

// needsGRPC is a command that needs what a build without gRPC leaves
// out.
type needsGRPC struct{ what string }

func (e *needsGRPC) Error() string {
	return e.what + " needs gRPC, which this ffpf was built without (-tags nogrpc)"
}
