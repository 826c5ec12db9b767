package functions

// Handler is a named operation a function exposes to the program that
// runs it, as Click's elements do: read a value, reset the state, add or
// remove a trigger. The library calls it through a request
// (flowgraph.Request.Call), checked against the request's flowgroup; a Go
// flowspace runs it between two batches, under the lock Process runs
// under, so a handler sees and leaves the function consistent.
type Handler struct {
	Name    string
	Summary string
	// Call runs the handler with its argument (its syntax is the
	// handler's; "" when it takes none) and returns its result, which
	// must marshal as JSON.
	Call func(arg string) (any, error)
}

// Handlers is a function that exposes handlers.
type Handlers interface {
	Handlers() []Handler
}
