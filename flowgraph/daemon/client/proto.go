package client

import (
	"encoding/json"
	"fmt"
)

// Version is the protocol version this package speaks.
const Version = 1

// MaxMessage is the longest message (a JSON line with its newline) either
// side accepts; a longer one is refused with code too_large.
const MaxMessage = 1 << 20

// DefaultSocket is where the daemon listens unless told otherwise.
const DefaultSocket = "/run/ffpf.sock"

// Message is a request to the daemon.
type Message struct {
	V    int             `json:"v"`
	ID   uint64          `json:"id,omitempty"`
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args,omitempty"`
}

// Reply is the daemon's answer to one Message.
type Reply struct {
	V      int             `json:"v"`
	ID     uint64          `json:"id,omitempty"`
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result,omitempty"`
	Code   string          `json:"code,omitempty"`
	Error  string          `json:"error,omitempty"`
	// Versions, with code "version", are the versions the daemon speaks.
	Versions []int `json:"versions,omitempty"`
}

// Error codes of a Reply.
const (
	CodeMalformed = "malformed"
	CodeTooLarge  = "too_large"
	CodeVersion   = "version"
	CodeUnknownOp = "unknown_op"
	CodeInvalid   = "invalid"
	CodeNotFound  = "not_found"
	CodeDenied    = "denied"
	CodeFailed    = "failed"
)

// Error is a reply that failed.
type Error struct {
	Code string
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// IsInvalid reports whether err is the request's own fault (a syntax error,
// an unknown class, a bad parameter): exit status 2 in the CLI.
func IsInvalid(err error) bool {
	e, ok := err.(*Error)
	return ok && (e.Code == CodeInvalid || e.Code == CodeMalformed || e.Code == CodeTooLarge || e.Code == CodeUnknownOp)
}

// IsNotFound reports whether err says there is no such request (or none
// in the caller's flowgroup).
func IsNotFound(err error) bool {
	e, ok := err.(*Error)
	return ok && e.Code == CodeNotFound
}

// Hello is the answer to hello: who the daemon takes the connection for.
type Hello struct {
	Version   int    `json:"version"`
	Daemon    string `json:"daemon"`    // its version line
	Policy    string `json:"policy"`    // uid, gid, pid or all
	Flowgroup string `json:"flowgroup"` // the connection's
	UID       int    `json:"uid"`
	GID       int    `json:"gid"`
	PID       int    `json:"pid"`
	Root      bool   `json:"root"` // sees every flowgroup
}

// SubmitArgs are a submit's arguments.
type SubmitArgs struct {
	Expr string `json:"expr"`
	// Source (a source term, e.g. "(gen,packets=0)"), File or Iface feed
	// the chains that start with a function that is not a source, as ffpf
	// run's -r and -i; Direction is -Q's.
	Source    string `json:"source,omitempty"`
	File      string `json:"file,omitempty"`
	Iface     string `json:"iface,omitempty"`
	Direction string `json:"direction,omitempty"`
	Name      string `json:"name,omitempty"` // a name of the submitter's, shown beside the id
	// Keep makes the request outlive the connection: it lives until rm.
	Keep bool `json:"keep,omitempty"`
	// Count is a packet limit of the request's own (ffpf submit -c): it
	// ends once exactly Count packets reached its ends (its functions
	// that feed none, each packet once: the packets its readers get).
	// CaptureCount counts instead the packets its sources capture
	// (--capture-count). At most one is set, up to 2,147,483,647 (0:
	// none). A request with a limit shares no function with another, so
	// that its limit and its final state are its own; the others go on.
	Count        int64 `json:"count,omitempty"`
	CaptureCount int64 `json:"capture_count,omitempty"`
}

// IDArgs name a request: its id, or its name when that is unique in the
// caller's flowgroup.
type IDArgs struct {
	ID string `json:"id"`
}

// CallArgs are a handler call's arguments.
type CallArgs struct {
	ID       string `json:"id"`
	Function string `json:"function"` // its label in the request, or its id
	Handler  string `json:"handler"`
	Arg      string `json:"arg,omitempty"`
}

// ReadArgs ask for a ring of the request's exported packets or records.
// Cells and Window size it (0: the daemon's defaults; see shm.Geometry).
type ReadArgs struct {
	ID     string `json:"id"`
	Cells  int    `json:"cells,omitempty"`
	Window int    `json:"window,omitempty"`
}

// ReaderArgs name a ring a read gave.
type ReaderArgs struct {
	Reader uint64 `json:"reader"`
}

// CheckArgs are what the web page's editor checks as one types: the
// expression and its default source.
type CheckArgs struct {
	Expr      string `json:"expr"`
	Source    string `json:"source,omitempty"`
	File      string `json:"file,omitempty"`
	Iface     string `json:"iface,omitempty"`
	Direction string `json:"direction,omitempty"`
}

// Request is a request as the daemon lists it.
type Request struct {
	ID        string `json:"id"`
	Name      string `json:"name,omitempty"`
	Flowgroup string `json:"flowgroup"`
	Expr      string `json:"expr"`
	Canonical string `json:"canonical"`
	Source    string `json:"source,omitempty"` // the default source term, if any
	// State is "active", "ended" (its sources ended, or its Limit was
	// reached: the state is final) or "failed" (a source failed: Error
	// says how).
	State   string `json:"state"`
	Error   string `json:"error,omitempty"`
	Keep    bool   `json:"keep"`
	Created int64  `json:"created_ns"` // Unix time in ns
	// Functions are the ids of its functions, in topological order; Sink
	// is the one that hands its packets to readers.
	Functions []string `json:"functions"`
	Sink      string   `json:"sink"`
	// ActiveNS is how long submit took from the message to the datapath
	// running the request's functions.
	ActiveNS int64 `json:"active_ns"`
	// Limit is its own packet limit (SubmitArgs.Count or CaptureCount),
	// nil for none.
	Limit *Limit `json:"limit,omitempty"`
}

// Limit is a request's own packet limit: Packets counted at its ends (At
// "ends": ffpf submit -c) or where its sources capture them ("capture":
// --capture-count), of which Counted are counted so far. The request
// ends when Counted reaches Packets.
type Limit struct {
	Packets int64  `json:"packets"`
	At      string `json:"at"`
	Counted int64  `json:"counted"`
}

// Function is a function's identity, placement, counters and state: the
// object of 'ffpf run --json', with how many requests share it.
type Function struct {
	ID        string         `json:"id"`
	Label     string         `json:"label"`
	Class     string         `json:"class"`
	Flowspace string         `json:"flowspace"`
	Params    map[string]any `json:"params"`
	In        uint64         `json:"in"`
	Out       uint64         `json:"out"`
	Filtered  uint64         `json:"filtered"`
	Dropped   uint64         `json:"dropped"`
	Records   uint64         `json:"records,omitempty"`
	State     map[string]any `json:"state"`
	Refs      int            `json:"refs"`   // requests that share it
	Reason    string         `json:"reason"` // why it runs where it does
}

// Reader is a ring a read gave, and what crossed it: In packets offered,
// Out put into the ring, Dropped lost because the reader had not emptied
// it (in = out + dropped).
type Reader struct {
	Reader  uint64 `json:"reader"`
	PID     int    `json:"pid"`
	In      uint64 `json:"in"`
	Out     uint64 `json:"out"`
	Dropped uint64 `json:"dropped"`
}

// List is the answer to ls.
type List struct {
	Flowgroup string     `json:"flowgroup"`
	All       bool       `json:"all"` // root: every flowgroup's
	Requests  []Request  `json:"requests"`
	Functions []Function `json:"functions"`
}

// Stat is the answer to stat.
type Stat struct {
	Request   Request    `json:"request"`
	Functions []Function `json:"functions"`
	Readers   []Reader   `json:"readers"`
	// Packets is what the request's sources brought in.
	Packets uint64 `json:"packets"`
}

// Stream is the answer to read, before its descriptors are opened.
type Stream struct {
	Reader   uint64 `json:"reader"`
	Function string `json:"function"`  // the sink the ring is fed by
	LinkType uint32 `json:"link_type"` // of every packet: a pcap LINKTYPE, or ffpf's records
	Snaplen  int    `json:"snaplen"`
	Cells    int    `json:"cells"`
	Window   int    `json:"window"`
}

// Class is a function class as the web page's palette shows it.
type Class struct {
	Name      string   `json:"name"`
	Summary   string   `json:"summary"`
	Source    bool     `json:"source"`
	MinInputs int      `json:"min_inputs"`
	MaxInputs int      `json:"max_inputs"`
	Targets   []string `json:"targets"`
	Params    []Param  `json:"params"`
}

// Param is a class's parameter.
type Param struct {
	Name     string   `json:"name"`
	Type     string   `json:"type"`
	Default  string   `json:"default,omitempty"`
	Required bool     `json:"required"`
	Unit     string   `json:"unit,omitempty"`
	Summary  string   `json:"summary"`
	Enum     []string `json:"enum,omitempty"`
}

// Check is the answer to check: the canonical form and where each
// function would run, or the error with its position.
type Check struct {
	OK        bool   `json:"ok"`
	Canonical string `json:"canonical,omitempty"`
	Error     string `json:"error,omitempty"`
	// Line and Col locate a syntax or validation error (1-based; 0: none),
	// Caret is the expression's line with a caret under the spot.
	Line  int    `json:"line,omitempty"`
	Col   int    `json:"col,omitempty"`
	Caret string `json:"caret,omitempty"`
	// Plan is the placement, as 'ffpf place --json' gives it.
	Plan json.RawMessage `json:"plan,omitempty"`
}

func (r *Reply) err() error {
	if r.OK {
		return nil
	}
	if r.Code == CodeVersion {
		return &Error{r.Code, fmt.Sprintf("%s (the daemon speaks protocol versions %v, this client %d)", r.Error, r.Versions, Version)}
	}
	return &Error{r.Code, r.Error}
}
