// Package plugin runs function classes out of process: a class served
// from a binary of its own (a plugin, of github.com/hashicorp/go-plugin),
// as FFPF's function calls extend the runtime with new code (§5).
//
// For a class author it is one call: a plugin's main is
// sdk.Serve(class) (package sdk), with the same functions.Class an
// in-process class registers (parameters, state layout, concurrency kind,
// handlers, New) and the same Process(batch) contract, so that moving a
// class in or out of process changes one line. The one rule more: the
// function allocates its state with ctx.NewMBuf, which in a plugin is
// memory ffpf maps too.
//
// For ffpf, Load starts the plugins of a directory, shakes hands with each
// (go-plugin's handshake, cookie and protocol version, which this package
// speaks without go-plugin's client; checksums before the start when the
// user gives them), asks for its class's schema and
// registers a class that stands for it: binding and validating at
// populate, instantiating and calling handlers go to the plugin over gRPC
// (the control plane). Data never does: each function's batches cross the
// process boundary through bridges/shm, a batch per round trip, packets
// copied once into an arena the plugin maps read-only (or referred to in
// place when the source's packet memory is shared, buffers/shared:
// zero-copy, which the flowspace makes it for the sources that feed a
// plugin's function, functions.SharedReader), entries and class results back on a ring of
// their own, and the function's MBuf lives in shared memory, so --json,
// readers and handlers see the state without a call. The rings' and the
// state's descriptors cross once per function, over a unix socket the
// plugin inherits.
//
// Isolation: a plugin that dies, hangs past its batch deadline, answers
// with entries that were not in its batch, or writes the arena (which
// faults it, not ffpf) fails only its own functions: from then on they
// count every packet as dropped, the batch in flight included, so that
// in = out + filtered + dropped stays exact; the rest of the flowgraph
// goes on, and the function's Close reports how the plugin ended and its
// last lines on standard error.
//
// The sharp edge: a plugin's class runs in userspace only and cannot be a
// source, a producer, clocked, a reader of named state or a writer of
// annotations (Serve refuses such a class with the reason).
package plugin
