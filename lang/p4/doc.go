// Package p4 is ffpf's own front end for the subset of P4_16 that the P4
// back end (functions/p4gen) prints for v1model: a lexer and parser
// written from the grammar of the P4_16 specification (p4lang/p4-spec), an
// AST, a canonical printer (Format: printing a parsed program and parsing
// and printing it again gives the same bytes), a checker (Check) and an
// interpreter of the checked program on packets (Switch) with v1model's
// semantics as p4gen.Switch defines them.
//
// Check is what `ffpf p4 check` runs on a program since no p4c exists on
// our machines: names declared before use, bit widths of every
// expression, assignment and cast, the v1model externs (register,
// counter, hash, random, digest, clone, mark_to_drop, update_checksum,
// verify_checksum, packet_in.extract with a varbit length,
// packet_out.emit) called with their signatures, constant register and
// counter indices within bounds, tables' keys, match kinds, actions and
// entries, actions' parameters, parser transitions, and V1Switch's six
// blocks.
//
// The sharp edge: this is a subset. Only the includes <core.p4> and
// <v1model.p4> are accepted (their declarations are built in, not read),
// there are no typedefs, enums of our own, header stacks or unions,
// signed integers, functions, switch statements or value sets, and an
// accepted program is not thereby one p4c accepts: the checker is ours,
// not p4c (README, "P4 switch").
package p4
