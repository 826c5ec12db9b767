package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/flowgraph/daemon/client"
)

// conn is one client's connection to the control socket.
type conn struct {
	d   *Daemon
	nc  *net.UnixConn
	who identity
	// readers are the rings this connection was given (d.mu).
	readers []*reader
}

// newConn takes the peer's credentials from the socket and maps them to
// its flowgroup.
func (d *Daemon) newConn(nc *net.UnixConn) (*conn, error) {
	raw, err := nc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	if cerr != nil {
		return nil, fmt.Errorf("SO_PEERCRED: %v", cerr)
	}
	cr := flowgraph.Credentials{UID: int(cred.Uid), GID: int(cred.Gid), PID: int(cred.Pid)}
	group, err := flowgraph.Flowgroup(d.cfg.Policy, cr)
	if err != nil {
		return nil, err
	}
	c := &conn{d: d, nc: nc}
	c.who = identity{cred: cr, group: group, root: cr.UID == 0, conn: c}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errors.New("the daemon is closing")
	}
	d.conns[c] = true
	return c, nil
}

// serve answers the connection's messages until it closes, then removes
// what lives with it: its requests that were not kept, its rings.
func (c *conn) serve() {
	defer c.close()
	br := bufio.NewReaderSize(c.nc, client.MaxMessage)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// Too long: say so, and skip the rest of it.
			c.reply(&client.Reply{V: client.Version, Code: client.CodeTooLarge,
				Error: fmt.Sprintf("a message is one line of at most %d bytes", client.MaxMessage)}, nil)
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			if err != nil {
				return
			}
			continue
		}
		if err != nil {
			return // closed, possibly in the middle of a message: nothing to answer
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		rep, fds := c.handle(line)
		err = c.reply(rep, fds)
		closeFDs(fds)
		if err != nil {
			return
		}
	}
}

// handle answers one message, and gives the descriptors the answer carries.
func (c *conn) handle(line []byte) (*client.Reply, []int) {
	var m client.Message
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return &client.Reply{V: client.Version, Code: client.CodeMalformed,
			Error: fmt.Sprintf("a message is a JSON object on one line: %v", err)}, nil
	}
	rep := &client.Reply{V: client.Version, ID: m.ID}
	if m.V != client.Version {
		rep.Code, rep.Error, rep.Versions = client.CodeVersion, fmt.Sprintf("protocol version %d is not spoken here", m.V), []int{client.Version}
		return rep, nil
	}
	res, fds, err := c.d.dispatch(m.Op, m.Args, &c.who)
	return result(rep, res, err), fds
}

// result completes rep with res or err.
func result(rep *client.Reply, res any, err error) *client.Reply {
	if err != nil {
		rep.Code, rep.Error = codeOf(err), err.Error()
		return rep
	}
	b, merr := json.Marshal(res)
	if merr != nil {
		rep.Code, rep.Error = client.CodeFailed, merr.Error()
		return rep
	}
	rep.OK, rep.Result = true, b
	return rep
}

// codeOf classifies an error for a reply.
func codeOf(err error) string {
	var ce *client.Error
	switch {
	case errors.As(err, &ce):
		return ce.Code
	case flowgraph.IsInvalid(err):
		return client.CodeInvalid
	}
	return client.CodeFailed
}

// reply writes rep as one line; fds, if any, go with its first byte.
func (c *conn) reply(rep *client.Reply, fds []int) error {
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if len(fds) == 0 {
		_, err = c.nc.Write(b)
		return err
	}
	n, _, err := c.nc.WriteMsgUnix(b, unix.UnixRights(fds...), nil)
	if err == nil && n < len(b) {
		_, err = c.nc.Write(b[n:])
	}
	return err
}

// close ends the connection and removes what lived with it.
func (c *conn) close() {
	c.nc.Close()
	d := c.d
	d.mu.Lock()
	delete(d.conns, c)
	rds := slices.Clone(c.readers)
	c.readers = nil
	var mine []*request
	for _, r := range d.order {
		if r.owner == c && !r.keep {
			mine = append(mine, r)
		}
	}
	d.mu.Unlock()
	for _, r := range rds {
		d.dropReader(r)
	}
	for _, r := range mine {
		if err := d.remove(r); err != nil {
			fmt.Fprintf(d.cfg.Log, "ffpf: removing %s, whose connection closed: %v\n", r.id, err)
		}
	}
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// decodeArgs decodes a message's arguments strictly: an unknown field is
// an error, so that a misspelt one is not silently ignored.
func decodeArgs(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &client.Error{Code: client.CodeMalformed, Msg: fmt.Sprintf("arguments: %v", err)}
	}
	if _, err := dec.Token(); err != io.EOF {
		return &client.Error{Code: client.CodeMalformed, Msg: "arguments: more than one JSON value"}
	}
	return nil
}
