package p4gen

// Window is the switch's side of a function's window= (MAFIA's
// measurement interval with its incremental reset, §III-C), which the
// controller follows to read each window.
//
// A window is 2^Shift µs of the switch's clock (ingress_global_timestamp):
// a packet's window is its time shifted right by Shift, which needs no
// division, and windows are aligned to multiples of themselves as on the
// host's packet clock. Its mark is the window's number plus one, mod 2^32
// (0 means none). The state is kept twice, registers by halves (HalfEven,
// HalfOdd: each structure a register per half), and a packet measures
// into the half of its window's parity while clearing one cell of every
// register of the other half, MAFIA's incremental reset done by the
// packets themselves: the half of the window before is cleared during the
// window after, once the controller has read it, so that it is clean
// when the window after that begins.
//
// State[h] holds the mark of the window half h holds (0: none yet). A
// packet of window mark m claims its half h when it holds m already, none,
// or a window the controller has read and the packets have cleared since;
// otherwise the half is not clean and the packet is not measured: it
// counts in Dropped, as in the eBPF flowspaces. So a window is measured
// whole, or not at all. The first packet of each window sends a Digest
// with its mark and the mark of the window before it: the controller
// learns that windows ended (on a switch replaying a capture file the
// clock is the packets').
//
// The controller, at the end of window E (mark m), reads State[E&1]. If it
// holds m, the registers and counters of that half are window E's: it
// reads them into the function's MBuf (Register.Half) and has the Go half
// report the window; then it sets Drained's entry for parity E&1 to m
// (action Drain, its argument the mark), which lets the packets clear the
// half. If it holds another mark, window E was not measured (its packets
// are in Dropped) and the controller reports it empty. Counts are
// counters, one per half (Counter.Half), which the controller zeroes once
// it has read them and before it sets Drained: the packets clear the
// registers, the controller the counters, which take no stateful ALU.
type Window struct {
	Shift   int
	State   [2]*Register // bit<32>, one cell: the mark of the window the half holds
	Drained *Table       // key: the parity of a half (exact); Drain's argument: the mark read
	Drain   *Action
	Dropped *Counter // one cell: the packets not measured
	Digest  *DigestType
}

// Mark is a window's mark: its number plus one, mod 2^32.
func Mark(window uint64) uint64 { return (window + 1) & 0xffffffff }
