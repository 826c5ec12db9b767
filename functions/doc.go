// Package functions is the registry of function classes: for each class its
// name, parameter schema (types, defaults, units, validation), port arity and
// the execution targets (flowspace kinds) it has an implementation for.
//
// A class lives in its own package under functions/ (with a README.md that
// documents it) and registers itself in init, CoreDNS-plugin style; the
// package functions/builtin imports them all. A function is an instance of a
// class: the flowgraph binds parameters from an expression (Class.Bind) and a
// flowspace instantiates it (Class.New or Class.NewSource).
//
// The one rule for implementations: Process runs on the datapath. It gets a
// batch, compacts it in place and must not allocate, block or call anything
// per packet that it could call per batch.
package functions
