// Package functions is the registry of function classes: for each class its
// name, parameter schema (types, defaults, units, validation), port arity,
// the execution targets (flowspace kinds) it has an implementation for, and
// the layout of the state (MBuf) its functions keep, declared so that it is
// known without instantiating one.
//
// A class lives in its own package under functions/ (with a README.md that
// documents it) and registers itself in init, CoreDNS-plugin style; the
// package functions/builtin imports them all. A function is an instance of a
// class: the flowgraph binds parameters from an expression (Class.Bind) and a
// flowspace instantiates it (Class.New or Class.NewSource); the flowgraph
// then checks the function keeps the state its class declares (Class.State).
// A class also declares how one function may run on several workers at
// once (Class.Concurrency: ordered, stateless or mergeable), which
// Register checks against its state.
//
// Files of input: a parameter that names a file is declared so (Param.File),
// and the flowgraph refuses one that names a directory or a device
// (CheckStream) when the request is checked. A file read whole (a file of
// events, a program, a file of sums, a hierarchy) is read with ReadFile: a
// regular file of at most MaxFileSize bytes, anything else refused at once.
//
// A class may also run out of process, served by a plugin with the same
// Class (functions/plugin): its function then allocates its state with
// Context.NewMBuf, which a plugin backs with memory ffpf reads.
//
// The one rule for implementations: Process runs on the datapath. It gets a
// batch, compacts it in place and must not allocate, block or call anything
// per packet that it could call per batch.
package functions
