// Package controller is ffpf's P4Runtime client: the control path from the
// p4 flowspace to a switch (DESIGN.md §13: P4Runtime is the only control
// path, so the model, bmv2 and a hardware switch differ by an address).
//
// A Client connects with a timeout, opens the stream and wins the
// arbitration (election id, primary), checks that the switch is the
// device the hierarchy names, pushes a pipeline (SetForwardingPipelineConfig
// with VERIFY_AND_COMMIT: the P4Info and the target's device config),
// writes table entries, clone sessions and digest configurations, reads
// counters and registers, receives digests (acknowledged once handled)
// and PacketIn, and sends PacketOut. Entities are named as the P4Info names
// them ("ffpf_ingress.cms_2_row0"); the client looks their ids up.
//
// The sharp edge: what a Client installs it removes again on Close, in
// the reverse order, but a pipeline cannot be taken off a switch in
// P4Runtime: it stays until the next controller pushes its own. A switch
// that refuses an entity, or answers as another device, is an error with
// the server's message; the client never retries behind the caller's back.
package controller
