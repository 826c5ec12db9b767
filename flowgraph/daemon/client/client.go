package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ffpf-go/ffpf/bridges/shm"
)

// Socket returns the socket path to use: path, else $FFPF_SOCKET, else
// DefaultSocket.
func Socket(path string) string {
	if path != "" {
		return path
	}
	if s := os.Getenv("FFPF_SOCKET"); s != "" {
		return s
	}
	return DefaultSocket
}

// Client is a connection to the daemon. Its methods may be called from
// several goroutines; they take turns.
type Client struct {
	mu   sync.Mutex
	conn *net.UnixConn
	in   lineReader
	seq  uint64
	// Hello is what the daemon said about the connection.
	Hello Hello
}

// Dial connects to the daemon at Socket(path) and says hello.
func Dial(path string) (*Client, error) {
	path = Socket(path)
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		var errno unix.Errno
		switch {
		case errors.As(err, &errno) && (errno == unix.ENOENT || errno == unix.ECONNREFUSED):
			return nil, fmt.Errorf("no ffpf daemon at %s (start one with 'ffpf serve', or name its socket with --socket or FFPF_SOCKET)", path)
		case errors.As(err, &errno) && (errno == unix.EACCES || errno == unix.EPERM):
			return nil, fmt.Errorf("cannot connect to the ffpf daemon at %s: permission denied (its --socket-mode and --socket-group say who may)", path)
		}
		return nil, fmt.Errorf("cannot connect to the ffpf daemon at %s: %v", path, err)
	}
	c := &Client{conn: conn, in: lineReader{conn: conn}}
	if err := c.Do("hello", nil, &c.Hello); err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// Close ends the connection: the requests submitted through it without
// Keep are removed, its rings closed.
func (c *Client) Close() error {
	c.in.closeFiles()
	return c.conn.Close()
}

// Do sends op with args and decodes the result into result (nil: ignore
// it). A failed reply is an *Error.
func (c *Client) Do(op string, args, result any) error {
	_, err := c.do(op, args, result)
	return err
}

// do is Do that also returns the descriptors that came with the reply.
func (c *Client) do(op string, args, result any) ([]int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	m := Message{V: Version, ID: c.seq, Op: op}
	if args != nil {
		b, err := json.Marshal(args)
		if err != nil {
			return nil, err
		}
		m.Args = b
	}
	line, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if len(line)+1 > MaxMessage {
		return nil, &Error{CodeTooLarge, fmt.Sprintf("the message is %d bytes, more than the %d the protocol allows", len(line)+1, MaxMessage)}
	}
	if _, err := c.conn.Write(append(line, '\n')); err != nil {
		return nil, fmt.Errorf("the ffpf daemon went away: %v", err)
	}
	for {
		raw, err := c.in.line()
		if err != nil {
			return nil, fmt.Errorf("the ffpf daemon went away: %v", err)
		}
		var r Reply
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("the ffpf daemon answered something that is not a reply: %v", err)
		}
		if r.ID != 0 && r.ID != m.ID {
			continue // the answer to an earlier message given up on
		}
		fds := c.in.takeFiles()
		if err := r.err(); err != nil {
			closeAll(fds)
			return nil, err
		}
		if result != nil && len(r.Result) > 0 {
			if err := json.Unmarshal(r.Result, result); err != nil {
				closeAll(fds)
				return nil, fmt.Errorf("the ffpf daemon's %s result: %v", op, err)
			}
		}
		return fds, nil
	}
}

// Submit submits a request and returns it, active.
func (c *Client) Submit(a SubmitArgs) (*Request, error) {
	var r Request
	return &r, c.Do("submit", a, &r)
}

// List lists the requests and functions the caller may see.
func (c *Client) List() (*List, error) {
	var l List
	return &l, c.Do("ls", nil, &l)
}

// Stat returns a request's functions' counters and state.
func (c *Client) Stat(id string) (*Stat, error) {
	var s Stat
	return &s, c.Do("stat", IDArgs{ID: id}, &s)
}

// Call runs a handler of a request's function and returns its result.
func (c *Client) Call(id, function, handler, arg string) (any, error) {
	var v any
	return v, c.Do("call", CallArgs{ID: id, Function: function, Handler: handler, Arg: arg}, &v)
}

// Remove removes a request.
func (c *Client) Remove(id string) error { return c.Do("rm", IDArgs{ID: id}, nil) }

// Reading is a ring of a request's exported packets or records, mapped
// into this process read-only.
type Reading struct {
	Info Stream
	*shm.Receiver
	c *Client
}

// Read opens a ring that receives what the request exports from now on.
// A reader that does not keep up loses its own packets only, counted in
// the cells' Dropped and in stat's readers.
func (c *Client) Read(id string) (*Reading, error) { return c.ReadWith(ReadArgs{ID: id}) }

// ReadWith is Read with the ring's geometry.
func (c *Client) ReadWith(a ReadArgs) (*Reading, error) {
	var s Stream
	fds, err := c.do("read", a, &s)
	if err != nil {
		return nil, err
	}
	if len(fds) != 3 {
		closeAll(fds)
		return nil, fmt.Errorf("the ffpf daemon sent %d descriptors with its ring, not 3", len(fds))
	}
	r, err := shm.OpenReceiver(fds)
	if err != nil {
		return nil, err
	}
	r.Watch(connFD(c.conn), unix.POLLRDHUP)
	return &Reading{Info: s, Receiver: r, c: c}, nil
}

// Close gives the ring back.
func (r *Reading) Close() error {
	err := r.c.Do("unread", ReaderArgs{Reader: r.Info.Reader}, nil)
	r.Receiver.Close()
	return err
}

// connFD is the descriptor of conn, for poll (the connection stays
// blocking-mode managed by the runtime; poll only watches it).
func connFD(conn *net.UnixConn) int {
	rc, err := conn.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	rc.Control(func(f uintptr) { fd = int(f) })
	return fd
}

// lineReader reads newline-ended messages with recvmsg, keeping the
// descriptors that come with them.
type lineReader struct {
	conn  *net.UnixConn
	buf   []byte
	files []int
}

func (l *lineReader) line() ([]byte, error) {
	for {
		if i := bytes.IndexByte(l.buf, '\n'); i >= 0 {
			line := append([]byte(nil), l.buf[:i]...)
			l.buf = l.buf[i+1:]
			return line, nil
		}
		if len(l.buf) > MaxMessage {
			return nil, fmt.Errorf("a reply longer than %d bytes", MaxMessage)
		}
		p := make([]byte, 64<<10)
		oob := make([]byte, unix.CmsgSpace(shm.MaxFiles*4))
		n, oobn, _, _, err := l.conn.ReadMsgUnix(p, oob)
		if oobn > 0 {
			if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
				for _, m := range msgs {
					if fds, rerr := unix.ParseUnixRights(&m); rerr == nil {
						for _, fd := range fds {
							unix.CloseOnExec(fd)
						}
						l.files = append(l.files, fds...)
					}
				}
			}
		}
		l.buf = append(l.buf, p[:n]...)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, errors.New("connection closed")
		}
	}
}

func (l *lineReader) takeFiles() []int {
	f := l.files
	l.files = nil
	return f
}

func (l *lineReader) closeFiles() { closeAll(l.takeFiles()) }

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// Deadline bounds every later exchange on the connection (zero: none).
func (c *Client) Deadline(t time.Time) error { return c.conn.SetDeadline(t) }
