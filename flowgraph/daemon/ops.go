package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/flowgraph/daemon/client"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/hierarchy"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/lang"
)

// MaxRequests is the most requests one flowgroup may hold at once: a flood
// of submits is refused past it, and the daemon serves on.
const MaxRequests = 256

// dispatch runs op for who, and returns its result and the descriptors it
// hands over (read's ring).
func (d *Daemon) dispatch(op string, raw json.RawMessage, who *identity) (any, []int, error) {
	switch op {
	case "hello":
		return client.Hello{Version: client.Version, Daemon: d.cfg.Version, Policy: d.cfg.Policy, Flowgroup: who.group,
			UID: who.cred.UID, GID: who.cred.GID, PID: who.cred.PID, Root: who.root}, nil, nil
	case "submit":
		var a client.SubmitArgs
		if err := decodeArgs(raw, &a); err != nil {
			return nil, nil, err
		}
		r, err := d.submit(a, who)
		return r, nil, err
	case "ls":
		if err := decodeArgs(raw, &struct{}{}); err != nil {
			return nil, nil, err
		}
		d.ctl.Lock() // no function is released while its state is read
		defer d.ctl.Unlock()
		return d.list(who), nil, nil
	case "stat", "rm":
		var a client.IDArgs
		if err := decodeArgs(raw, &a); err != nil {
			return nil, nil, err
		}
		r, err := d.lookup(a.ID, who)
		if err != nil {
			return nil, nil, err
		}
		if op == "stat" {
			d.ctl.Lock()
			defer d.ctl.Unlock()
			if !d.present(r) { // removed since it was looked up
				return nil, nil, &client.Error{Code: client.CodeNotFound, Msg: "no request " + a.ID}
			}
			return d.stat(r), nil, nil
		}
		return struct{}{}, nil, d.remove(r)
	case "call":
		var a client.CallArgs
		if err := decodeArgs(raw, &a); err != nil {
			return nil, nil, err
		}
		res, err := d.call(a, who)
		return res, nil, err
	case "read":
		var a client.ReadArgs
		if err := decodeArgs(raw, &a); err != nil {
			return nil, nil, err
		}
		return d.read(a, who)
	case "unread":
		var a client.ReaderArgs
		if err := decodeArgs(raw, &a); err != nil {
			return nil, nil, err
		}
		return struct{}{}, nil, d.unread(a.Reader, who)
	case "classes":
		return d.classes(), nil, nil
	case "check":
		var a client.CheckArgs
		if err := decodeArgs(raw, &a); err != nil {
			return nil, nil, err
		}
		return d.check(a, who), nil, nil
	case "hierarchy":
		return hierarchy.DescribeWith(d.root, d.reg), nil, nil
	}
	return nil, nil, &client.Error{Code: client.CodeUnknownOp, Msg: fmt.Sprintf("no operation %q (hello, submit, ls, stat, call, read, unread, rm, classes, check, hierarchy)", op)}
}

func invalidf(format string, args ...any) error {
	return &client.Error{Code: client.CodeInvalid, Msg: fmt.Sprintf(format, args...)}
}

// defaultSource is the source term of -r FILE or -i IFACE, as ffpf run
// builds it, or the term given.
func defaultSource(term, file, iface, direction string) (string, error) {
	if term != "" {
		if file != "" || iface != "" {
			return "", invalidf("a request takes one default source: a source term, a file or an interface")
		}
		return term, nil
	}
	switch direction {
	case "", "in", "out", "inout":
	default:
		return "", invalidf("direction %q is not in, out or inout", direction)
	}
	switch {
	case file != "" && iface != "":
		return "", invalidf("a request takes a file or an interface, not both")
	case direction != "" && iface == "":
		return "", invalidf("direction is the direction of the capture on an interface")
	case file != "":
		if !strings.HasPrefix(file, "/") {
			return "", invalidf("the daemon reads files by absolute paths: %q is relative", file)
		}
		return "(pcap,file=" + strconv.Quote(file) + ")", nil
	case iface != "":
		src := "(dev,expr=" + strconv.Quote(iface)
		if direction != "" {
			src += ",direction=" + direction
		}
		return src + ")", nil
	}
	return "", nil
}

// submit populates, instantiates and activates a request with its sink, all
// or nothing.
func (d *Daemon) submit(a client.SubmitArgs, who *identity) (*client.Request, error) {
	t0 := time.Now()
	if strings.TrimSpace(a.Expr) == "" {
		return nil, invalidf("no expression given")
	}
	if len(a.Name) > 64 || strings.ContainsAny(a.Name, " \t\n\"") {
		return nil, invalidf("a request's name is a word of at most 64 characters")
	}
	src, err := defaultSource(a.Source, a.File, a.Iface, a.Direction)
	if err != nil {
		return nil, err
	}
	if err := checkCounts(a.Count, a.CaptureCount); err != nil {
		return nil, err
	}
	d.mu.Lock()
	n := 0
	for _, r := range d.order {
		if r.group == who.group {
			n++
		}
	}
	d.mu.Unlock()
	if n >= MaxRequests {
		return nil, &client.Error{Code: client.CodeDenied, Msg: fmt.Sprintf("flowgroup %s holds %d requests, the most the daemon takes: remove some first", who.group, n)}
	}

	d.ctl.Lock()
	defer d.ctl.Unlock()
	if d.ctx.Err() != nil {
		return nil, &client.Error{Code: client.CodeFailed, Msg: "the daemon is closing"}
	}
	req, err := d.rt.Populate(a.Expr, flowgraph.RequestOptions{DefaultSource: src, Group: who.group,
		Limit: a.Count, CaptureLimit: a.CaptureCount})
	if err != nil {
		return nil, err
	}
	undo := func() { d.rt.Remove(req) }
	if err := d.checkFiles(req, who); err != nil {
		undo()
		return nil, err
	}
	sink, err := req.AttachSink("(tap)")
	if err != nil && !flowgraph.IsInvalid(err) {
		undo()
		return nil, err
	}
	if err != nil {
		// Ends of several link types: the request runs, unread.
		fmt.Fprintf(d.cfg.Log, "ffpf: %s has no reader: %v\n", a.Expr, err)
		sink = nil
	}
	if sink != nil {
		undo = func() { d.rt.Remove(sink); d.rt.Remove(req) }
	}
	if err := d.rt.Instantiate(); err != nil {
		undo()
		return nil, err
	}
	if !d.active {
		if err := d.rt.Activate(d.ctx); err != nil {
			undo()
			return nil, err
		}
		d.active = true
	}
	d.ownFiles(req, who)
	r := &request{name: a.Name, group: who.group, expr: a.Expr, source: src, req: req, sink: sink,
		keep: a.Keep || who.conn == nil, created: t0, cred: who.cred}
	if !r.keep {
		r.owner = who.conn
	}
	for _, f := range req.Functions() {
		r.fids = append(r.fids, f.ID)
	}
	if sink != nil {
		for _, f := range sink.Functions() {
			r.fids = append(r.fids, f.ID)
		}
	}
	r.activeNS = time.Since(t0).Nanoseconds()
	d.mu.Lock()
	r.id = d.newID()
	d.reqs[r.id] = r
	d.order = append(d.order, r)
	d.mu.Unlock()
	fmt.Fprintf(d.cfg.Log, "ffpf: %s submitted by uid %d pid %d in flowgroup %s: %s\n", r.id, who.cred.UID, who.cred.PID, r.group, a.Expr)
	info := d.info(r)
	return &info, nil
}

// remove takes r out of the flowgraph, its sink and readers with it.
func (d *Daemon) remove(r *request) error {
	d.mu.Lock()
	if d.reqs[r.id] != r {
		d.mu.Unlock()
		return &client.Error{Code: client.CodeNotFound, Msg: "no request " + r.id}
	}
	delete(d.reqs, r.id)
	d.order = slices.DeleteFunc(d.order, func(x *request) bool { return x == r })
	var rds []*reader
	for _, rd := range d.readers {
		if rd.req == r {
			rds = append(rds, rd)
		}
	}
	d.mu.Unlock()
	for _, rd := range rds {
		d.dropReader(rd)
	}
	d.ctl.Lock()
	defer d.ctl.Unlock()
	var errs []error
	if r.sink != nil {
		errs = append(errs, d.rt.Remove(r.sink))
	}
	errs = append(errs, d.rt.Remove(r.req))
	fmt.Fprintf(d.cfg.Log, "ffpf: %s removed\n", r.id)
	return errors.Join(errs...)
}

// present reports whether r is still held.
func (d *Daemon) present(r *request) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.reqs[r.id] == r
}

// info describes r.
func (d *Daemon) info(r *request) client.Request {
	out := client.Request{ID: r.id, Name: r.name, Flowgroup: r.group, Expr: r.expr, Canonical: r.req.Canonical(),
		Source: r.source, State: "active", Keep: r.keep, Created: r.created.UnixNano(), ActiveNS: r.activeNS, Functions: []string{}}
	for _, f := range r.req.Functions() {
		out.Functions = append(out.Functions, f.ID)
	}
	if r.sink != nil {
		if fs := r.sink.Functions(); len(fs) > 0 {
			out.Sink = fs[len(fs)-1].ID
		}
	}
	if ended, err := r.req.Ended(); ended {
		out.State = "ended"
		if err != nil {
			out.State, out.Error = "failed", err.Error()
		}
	}
	if b := r.req.Budget(); b != nil { // read after Ended: final when ended
		out.Limit = &client.Limit{Packets: b.Limit(), At: "capture", Counted: b.Counted()}
		if b.AtEnds() {
			out.Limit.At = "ends"
		}
	}
	return out
}

// checkCounts refuses a packet limit (submit's count or capture_count)
// that is not a number of packets, or both at once.
func checkCounts(count, capture int64) error {
	for _, c := range []struct {
		name string
		n    int64
	}{{"count", count}, {"capture_count", capture}} {
		if c.n < 0 || c.n > flowspaces.MaxLimit {
			return invalidf("%s must be a number of packets up to %d (0: no limit)", c.name, flowspaces.MaxLimit)
		}
	}
	if count > 0 && capture > 0 {
		return invalidf("count and capture_count exclude each other")
	}
	return nil
}

// functionsOf returns the functions of reqs (each once), with how many of
// the daemon's requests share each and why each runs where it does.
func (d *Daemon) functionsOf(reqs []*request) []client.Function {
	refs := map[string]int{}
	d.mu.Lock()
	for _, r := range d.order {
		for _, f := range r.req.Functions() {
			refs[f.ID]++
		}
		if r.sink != nil {
			for _, f := range r.sink.Functions() {
				refs[f.ID]++
			}
		}
	}
	d.mu.Unlock()
	reasons := map[string]string{}
	for _, p := range d.rt.Plan().Functions {
		reasons[p.ID] = p.Reason
	}
	seen := map[string]bool{}
	out := []client.Function{}
	add := func(fs []flowgraph.FunctionState) {
		for _, f := range fs {
			if seen[f.ID] {
				continue
			}
			seen[f.ID] = true
			out = append(out, client.Function{ID: f.ID, Label: f.Label, Class: f.Class, Flowspace: f.Flowspace,
				Params: f.Params, In: f.In, Out: f.Out, Filtered: f.Filtered, Dropped: f.Dropped, Records: f.Records,
				State: f.State, Refs: refs[f.ID], Reason: reasons[f.ID]})
		}
	}
	for _, r := range reqs {
		add(r.req.Functions())
		if r.sink != nil {
			add(r.sink.Functions())
		}
	}
	return out
}

// visibleTo returns the requests who may see, in submission order.
func (d *Daemon) visibleTo(who *identity) []*request {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*request
	for _, r := range d.order {
		if visible(r, who) {
			out = append(out, r)
		}
	}
	return out
}

func (d *Daemon) list(who *identity) *client.List {
	rs := d.visibleTo(who)
	l := &client.List{Flowgroup: who.group, All: who.root, Requests: []client.Request{}}
	for _, r := range rs {
		l.Requests = append(l.Requests, d.info(r))
	}
	l.Functions = d.functionsOf(rs)
	return l
}

func (d *Daemon) stat(r *request) *client.Stat {
	st := &client.Stat{Request: d.info(r), Functions: d.functionsOf([]*request{r}), Readers: []client.Reader{}}
	for _, f := range st.Functions {
		if c, ok := d.reg.Lookup(f.Class); ok && c.IsSource() {
			st.Packets += f.Out
		}
	}
	d.mu.Lock()
	for _, rd := range d.readers {
		if rd.req == r {
			st.Readers = append(st.Readers, rd.stats())
		}
	}
	d.mu.Unlock()
	slices.SortFunc(st.Readers, func(a, b client.Reader) int { return int(a.Reader) - int(b.Reader) })
	return st
}

// call runs a handler of a function of a request who may see.
func (d *Daemon) call(a client.CallArgs, who *identity) (any, error) {
	r, err := d.lookup(a.ID, who)
	if err != nil {
		return nil, err
	}
	if a.Function == "" || a.Handler == "" {
		return nil, invalidf("call names a function of the request and one of its handlers")
	}
	d.ctl.Lock()
	defer d.ctl.Unlock()
	if !d.present(r) {
		return nil, &client.Error{Code: client.CodeNotFound, Msg: "no request " + a.ID}
	}
	res, err := r.req.Call(a.Function, a.Handler, a.Arg)
	if err != nil {
		if strings.HasPrefix(err.Error(), "no function ") {
			return nil, &client.Error{Code: client.CodeNotFound, Msg: fmt.Sprintf("request %s has no function %s", r.id, a.Function)}
		}
		return nil, &client.Error{Code: client.CodeInvalid, Msg: err.Error()}
	}
	return res, nil
}

// classes lists the classes a request may use (the daemon's tap left out).
func (d *Daemon) classes() []client.Class {
	out := []client.Class{}
	for _, c := range d.reg.All() {
		if c.Name == tapClassName {
			continue
		}
		k := client.Class{Name: c.Name, Summary: c.Summary, Source: c.IsSource(), MinInputs: c.MinInputs,
			MaxInputs: c.MaxInputs, Targets: []string{}}
		for _, t := range c.Targets {
			k.Targets = append(k.Targets, string(t))
		}
		k.Params = Params(c)
		out = append(out, k)
	}
	return out
}

// Params describes a class's parameters as the protocol does (and 'ffpf
// classes --json').
func Params(c *functions.Class) []client.Param {
	out := []client.Param{}
	for _, p := range c.Params {
		out = append(out, client.Param{Name: p.Name, Type: p.Type.String(), Default: p.Default,
			Required: p.Required, Unit: p.Unit, Summary: p.Summary, Enum: p.Enum})
	}
	return out
}

// check validates an expression as submit would and places it on a fresh
// copy of the daemon's hierarchy, changing nothing of the flowgraph.
func (d *Daemon) check(a client.CheckArgs, who *identity) *client.Check {
	fail := func(err error) *client.Check {
		c := &client.Check{Error: err.Error()}
		var le *lang.Error
		if errors.As(err, &le) {
			c.Error, c.Line, c.Col, c.Caret = le.Msg, le.Pos.Line, le.Pos.Col, le.Caret()
		}
		return c
	}
	src, err := defaultSource(a.Source, a.File, a.Iface, a.Direction)
	if err != nil {
		return fail(err)
	}
	// A hierarchy of its own: placing into the flowgraph's would change it.
	root := hierarchy.Userspace()
	if d.cfg.Hierarchy != nil {
		if root, err = d.cfg.Hierarchy(); err != nil {
			return fail(err)
		}
	}
	rt := flowgraph.New(flowgraph.Config{Registry: d.reg, Hierarchy: root})
	defer rt.Close()
	req, err := rt.Populate(a.Expr, flowgraph.RequestOptions{DefaultSource: src, Unfed: src == "", Group: who.group})
	if err != nil {
		return fail(err)
	}
	plan, err := json.Marshal(rt.Plan())
	if err != nil {
		return fail(err)
	}
	return &client.Check{OK: true, Canonical: req.Canonical(), Plan: plan}
}

// checkFiles refuses a request naming a file who may not read (an input)
// or write (an output), or naming one by a relative path.
func (d *Daemon) checkFiles(req *flowgraph.Request, who *identity) error {
	for _, f := range req.Functions() {
		c, ok := d.reg.Lookup(f.Class)
		if !ok {
			continue
		}
		for _, p := range c.Params {
			path, _ := f.Params[p.Name].(string)
			if p.File == functions.NoFile || path == "" {
				continue
			}
			if path == "-" {
				return invalidf("%s: %s=-: the daemon has no standard input or output of yours; read the request with 'ffpf read'", f.ID, p.Name)
			}
			if !strings.HasPrefix(path, "/") {
				return invalidf("%s: %s=%s: the daemon opens files by absolute paths only", f.ID, p.Name, path)
			}
			if err := mayAccess(path, who.cred, p.File == functions.FileWrite); err != nil {
				return &client.Error{Code: client.CodeDenied, Msg: fmt.Sprintf("%s: %v", f.ID, err)}
			}
			// Opening a FIFO waits for its other end, and submits are made
			// one at a time: only root may make the others wait so.
			if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() && !who.root {
				return &client.Error{Code: client.CodeDenied, Msg: fmt.Sprintf("%s: %s is not a regular file: only root may have the daemon open a FIFO or a device", f.ID, path)}
			}
		}
	}
	return nil
}

// ownFiles gives the files the request's functions write to the user who
// submitted it, who may write there (checkFiles).
func (d *Daemon) ownFiles(req *flowgraph.Request, who *identity) {
	if who.cred.UID == os.Geteuid() {
		return
	}
	for _, f := range req.Functions() {
		c, ok := d.reg.Lookup(f.Class)
		if !ok {
			continue
		}
		for _, p := range c.Params {
			if path, _ := f.Params[p.Name].(string); p.File == functions.FileWrite && path != "" {
				os.Lchown(path, who.cred.UID, who.cred.GID)
			}
		}
	}
}
