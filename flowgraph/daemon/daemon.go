package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/flowgraph/daemon/client"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/kernel"
	"github.com/ffpf-go/ffpf/functions"
)

// Config configures a daemon.
type Config struct {
	// Socket is the control socket's path (client.DefaultSocket when "").
	// A socket file left there by a daemon that is gone is replaced; one
	// that a daemon answers on is not.
	Socket string
	// SocketMode is the socket's permission bits (0 is 0660); SocketGroup,
	// a group name or number, its group ("": the daemon's).
	SocketMode  os.FileMode
	SocketGroup string
	// Policy maps a connection's credentials to its flowgroup:
	// flowgraph.GroupUID (the default), GroupGID, GroupPID or GroupAll.
	Policy string
	// Hierarchy builds a hierarchy of flowspaces: once for the flowgraph,
	// and afresh for each placement the web page asks about. nil is
	// userspace alone.
	Hierarchy func() (flowspaces.Flowspace, error)
	// Registry is the classes requests may use (nil: functions.Default).
	Registry *functions.Registry
	// StateDir keeps the record of what the daemon attached that would
	// outlive it (clsact qdiscs), for the sweep of a later daemon ("": no
	// record is kept, and the sweep removes only the filters named after
	// processes that are gone).
	StateDir string
	// HTTP is the address of the HTTP API, /metrics and the web page ("":
	// none). Token, when set, is what a write over HTTP must present
	// (Authorization: Bearer TOKEN); without it HTTP is read-only.
	HTTP  string
	Token string
	// Version is the daemon's version line, for hello.
	Version string
	// Log receives a line per event worth an operator's eye (nil: none).
	Log io.Writer
}

// Daemon is a running service.
type Daemon struct {
	cfg  Config
	reg  *functions.Registry
	rt   *flowgraph.Runtime
	root flowspaces.Flowspace

	ln   *net.UnixListener
	http *httpServer

	ctx    context.Context
	cancel context.CancelFunc

	ctl    sync.Mutex // one change of the flowgraph at a time
	active bool       // the flowgraph's datapath was started (ctl held)

	mu      sync.Mutex
	reqs    map[string]*request
	order   []*request // by submission
	conns   map[*conn]bool
	readers map[uint64]*reader
	nextRd  uint64
	taps    map[string]*tap // by function id
	closed  bool

	metrics   *prometheus.Registry
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// request is a request the daemon holds: the expression's and its sink's
// requests in the flowgraph.
type request struct {
	id, name, group string
	expr, source    string
	req, sink       *flowgraph.Request
	keep            bool
	owner           *conn    // the connection it lives with, unless kept
	fids            []string // its functions' ids and its sink's
	created         time.Time
	activeNS        int64
	cred            flowgraph.Credentials
}

// webGroup is the flowgroup of the requests made over HTTP.
const webGroup = "web"

// New creates the daemon: its flowgraph (empty) and its control socket,
// after sweeping what a crashed daemon left attached. Serve starts it.
func New(cfg Config) (*Daemon, error) {
	if cfg.Policy == "" {
		cfg.Policy = flowgraph.GroupUID
	}
	if _, err := flowgraph.Flowgroup(cfg.Policy, flowgraph.Self()); err != nil {
		return nil, err
	}
	if cfg.SocketMode == 0 {
		cfg.SocketMode = 0o660
	}
	cfg.Socket = client.Socket(cfg.Socket)
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	base := cfg.Registry
	if base == nil {
		base = functions.Default
	}
	d := &Daemon{cfg: cfg, reqs: map[string]*request{}, conns: map[*conn]bool{},
		readers: map[uint64]*reader{}, taps: map[string]*tap{}}
	d.metrics = newMetrics(d)
	reg, err := base.With(d.tapClass())
	if err != nil {
		return nil, err
	}
	d.reg = reg
	gid, err := lookupGroup(cfg.SocketGroup)
	if err != nil {
		return nil, err
	}
	if cfg.StateDir != "" {
		if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
			return nil, fmt.Errorf("state directory: %v", err)
		}
		for _, s := range kernel.Sweep(cfg.StateDir) {
			fmt.Fprintf(cfg.Log, "ffpf: removed what a daemon that is gone left attached: %s\n", s)
		}
		kernel.RecordQdiscs(cfg.StateDir)
	} else {
		for _, s := range kernel.Sweep("") {
			fmt.Fprintf(cfg.Log, "ffpf: removed what a run that is gone left attached: %s\n", s)
		}
	}
	if cfg.Hierarchy != nil {
		if d.root, err = cfg.Hierarchy(); err != nil {
			return nil, err
		}
	}
	d.rt = flowgraph.New(flowgraph.Config{Registry: reg, Hierarchy: d.root})
	d.root = d.rt.Hierarchy()
	if d.ln, err = listen(cfg.Socket, cfg.SocketMode, gid); err != nil {
		return nil, err
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	if cfg.HTTP != "" {
		if d.http, err = d.newHTTP(cfg.HTTP); err != nil {
			d.ln.Close()
			os.Remove(cfg.Socket)
			return nil, err
		}
	}
	return d, nil
}

// lookupGroup returns the gid of a group name or number, -1 for "".
func lookupGroup(g string) (int, error) {
	if g == "" {
		return -1, nil
	}
	if n, err := strconv.Atoi(g); err == nil && n >= 0 {
		return n, nil
	}
	gr, err := user.LookupGroup(g)
	if err != nil {
		return 0, fmt.Errorf("--socket-group: no group %q", g)
	}
	return strconv.Atoi(gr.Gid)
}

// listen makes the control socket at path with mode and group (gid -1:
// the daemon's). A socket file nobody answers on is a dead daemon's and
// is replaced; one a daemon answers on is refused.
func listen(path string, mode os.FileMode, gid int) (*net.UnixListener, error) {
	if st, err := os.Lstat(path); err == nil {
		if st.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket: remove it, or give another --socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("a daemon already answers on %s", path)
		}
		os.Remove(path)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %s: %v", path, err)
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(path, mode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("--socket-mode: %v", err)
	}
	if gid >= 0 {
		if err := os.Chown(path, -1, gid); err != nil {
			ln.Close()
			return nil, fmt.Errorf("--socket-group: %v", err)
		}
	}
	return ln, nil
}

// Socket returns the control socket's path.
func (d *Daemon) Socket() string { return d.cfg.Socket }

// HTTPAddr returns the address the HTTP side listens on ("" for none).
func (d *Daemon) HTTPAddr() string {
	if d.http == nil {
		return ""
	}
	return d.http.ln.Addr().String()
}

// Runtime returns the daemon's flowgraph.
func (d *Daemon) Runtime() *flowgraph.Runtime { return d.rt }

// Serve accepts connections until Close; it returns nil then.
func (d *Daemon) Serve() error {
	if d.http != nil {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.http.serve()
		}()
	}
	for {
		c, err := d.ln.AcceptUnix()
		if err != nil {
			d.mu.Lock()
			closed := d.closed
			d.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// Out of descriptors, say: the ones open keep being served.
			fmt.Fprintf(d.cfg.Log, "ffpf: accept: %v\n", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		cn, err := d.newConn(c)
		if err != nil {
			fmt.Fprintf(d.cfg.Log, "ffpf: a connection: %v\n", err)
			c.Close()
			continue
		}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			cn.serve()
		}()
	}
}

// Close stops serving and removes every request: the flowgraph stops and
// releases everything, detaching every program and qdisc it attached. A
// Close while another runs waits for it.
func (d *Daemon) Close() error {
	d.closeOnce.Do(func() { d.closeErr = d.close() })
	return d.closeErr
}

func (d *Daemon) close() error {
	d.mu.Lock()
	d.closed = true
	conns := make([]*conn, 0, len(d.conns))
	for c := range d.conns {
		conns = append(conns, c)
	}
	d.mu.Unlock()
	d.ln.Close()
	if d.http != nil {
		d.http.close()
	}
	for _, c := range conns {
		c.nc.Close()
	}
	d.cancel()
	d.wg.Wait()
	d.ctl.Lock()
	defer d.ctl.Unlock()
	d.mu.Lock()
	rds := make([]*reader, 0, len(d.readers))
	for _, r := range d.readers {
		rds = append(rds, r)
	}
	d.mu.Unlock()
	for _, r := range rds {
		d.dropReader(r)
	}
	err := d.rt.Close()
	kernel.RecordQdiscs("") // nothing is attached any more: the record goes
	return err
}

// newID returns a request id no request has: "r" and 6 hex digits.
func (d *Daemon) newID() string {
	for {
		var b [3]byte
		rand.Read(b[:])
		id := "r" + hex.EncodeToString(b[:])
		if d.reqs[id] == nil {
			return id
		}
	}
}

// visible reports whether who may see r: r is of its flowgroup, or who is
// root.
func visible(r *request, who *identity) bool { return who.root || r.group == who.group }

// identity is who a connection (or the HTTP side) acts as.
type identity struct {
	cred  flowgraph.Credentials
	group string
	root  bool
	conn  *conn // nil over HTTP
	write bool  // over HTTP: the token was given
}

// lookup returns the request named id (an id, or a name unique among the
// requests who sees) if who may see it.
func (d *Daemon) lookup(id string, who *identity) (*request, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r := d.reqs[id]; r != nil && visible(r, who) {
		return r, nil
	}
	var found *request
	for _, r := range d.order {
		if r.name == id && id != "" && visible(r, who) {
			if found != nil {
				return nil, &client.Error{Code: client.CodeInvalid, Msg: fmt.Sprintf("%d requests are named %s: name one by its id", 2, id)}
			}
			found = r
		}
	}
	if found == nil {
		return nil, &client.Error{Code: client.CodeNotFound, Msg: "no request " + id}
	}
	return found, nil
}
