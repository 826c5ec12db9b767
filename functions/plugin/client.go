package plugin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
)

// ffpf's end of go-plugin's protocol (github.com/hashicorp/go-plugin
// v1.8.0, its gRPC flavour), which a plugin serves with go-plugin's own
// Serve (package sdk). ffpf speaks it without go-plugin's client, whose
// package links gRPC's reflection and health services, net/rpc and gob,
// initialised by every ffpf process whatever it runs. The protocol:
//
//   - before the start, with a checksum (go-plugin's SecureConfig), the
//     binary's SHA-256 must match;
//   - the plugin's environment is ffpf's with the cookie
//     (FFPF_PLUGIN=function-class) and the protocol versions ffpf speaks
//     (PLUGIN_PROTOCOL_VERSIONS=1) added;
//   - its first line on standard output is the handshake,
//     CORE|APP|NETWORK|ADDR|PROTOCOL[|CERT]: go-plugin's version (1), the
//     application's (ProtocolVersion), where it listens (unix, a socket's
//     path) and the protocol (grpc);
//   - ffpf connects to it with gRPC and reads its go-plugin services:
//     plugin.GRPCStdio streams what the plugin writes to os.Stdout and
//     os.Stderr (go-plugin redirects them; unread, they fill a pipe and
//     block the plugin), plugin.GRPCController's Shutdown ends it;
//   - its standard error (the descriptor: go-plugin's logger, a crash's
//     last words) is read line by line.
//
// go-plugin's messages are protobuf; the two ffpf reads are written by
// hand (pbCodec). Its broker, health, reflection and net/rpc are not used.

const (
	coreProtocol   = 1 // go-plugin's handshake line
	startTimeout   = 10 * time.Second
	shutdownWait   = 2 * time.Second // after Shutdown, before SIGKILL
	methodStdio    = "/plugin.GRPCStdio/StreamStdio"
	methodShutdown = "/plugin.GRPCController/Shutdown"
)

// launchError is why a plugin did not start: what went wrong, and the
// handshake line when one came.
type launchError struct {
	why  launchFailure
	line string
	err  error
}

type launchFailure int

const (
	checksumMismatch launchFailure = iota
	cannotRun                      // exec failed
	noHandshake                    // stdout ended (the process exited) first
	timedOut
	badLine     // a line that is not a handshake
	coreVersion // go-plugin's version is not 1
	appVersion  // another ProtocolVersion
	notGRPC     // net/rpc
	cannotDial
)

func (e *launchError) Error() string {
	switch e.why {
	case checksumMismatch:
		return "checksums did not match"
	case noHandshake:
		return "exited before its handshake"
	case timedOut:
		return "no handshake"
	case badLine, coreVersion, appVersion, notGRPC:
		return fmt.Sprintf("handshake %q", e.line)
	}
	return e.err.Error()
}

func (e *launchError) Unwrap() error { return e.err }

// client is one plugin process as ffpf runs it: the process, its gRPC
// connection, and the goroutines that read its output.
type client struct {
	cmd    *exec.Cmd
	conn   *grpc.ClientConn
	exited chan struct{} // closed once the process ended and its stderr was read to its end
	stdio  chan struct{} // closed once its stream of os.Stdout and os.Stderr ended
	cancel context.CancelFunc
	once   sync.Once
}

// launch starts the plugin cmd describes (its path, extra descriptors and
// environment set), checking its SHA-256 against sum first when sum is
// not nil, shakes hands with it and connects to it. Its standard error,
// and what it writes to os.Stdout and os.Stderr after the handshake, go
// to log.
func launch(cmd *exec.Cmd, sum []byte, log io.Writer) (*client, error) {
	if sum != nil {
		got, err := fileSum(cmd.Path)
		if err != nil {
			return nil, &launchError{why: cannotRun, err: err}
		}
		if !bytes.Equal(got, sum) {
			return nil, &launchError{why: checksumMismatch}
		}
	}
	cmd.Env = append(cmd.Env, pluginEnv(os.Environ())...)
	hs := &handshakeWriter{line: make(chan string, 1), rest: log}
	cmd.Stdout, cmd.Stderr = hs, log
	// Output that a child of the plugin keeps open does not hold its end.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, &launchError{why: cannotRun, err: err}
	}
	c := &client{cmd: cmd, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		hs.close()
		close(c.exited)
	}()
	fail := func(e *launchError) (*client, error) {
		c.kill()
		if c.conn != nil {
			c.cancel()
			c.conn.Close()
		}
		return nil, e
	}
	var line string
	select {
	case l, ok := <-hs.line:
		if !ok {
			<-c.exited
			return nil, &launchError{why: noHandshake}
		}
		line = strings.TrimSpace(l)
	case <-time.After(startTimeout):
		return fail(&launchError{why: timedOut})
	}
	network, addr, e := parseHandshake(line)
	if e != nil {
		return fail(e)
	}
	var err error
	c.conn, err = grpc.NewClient("passthrough:///plugin",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32), grpc.MaxCallSendMsgSize(math.MaxInt32)))
	if err != nil {
		return fail(&launchError{why: cannotDial, err: err})
	}
	if err := c.readStdio(log); err != nil {
		return fail(&launchError{why: cannotDial, err: err})
	}
	return c, nil
}

// handshakeWriter is a plugin's standard output: its first line goes to
// the channel line (closed without one if the output ends first), the
// rest to rest.
type handshakeWriter struct {
	mu   sync.Mutex
	line chan string
	buf  []byte
	done bool // the first line was sent, or the channel closed
	rest io.Writer
}

// maxHandshake bounds the first line: go-plugin's is under 200 bytes
// without a certificate, which ffpf does not ask for.
const maxHandshake = 4096

func (w *handshakeWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return w.rest.Write(b)
	}
	n := len(b)
	if i := bytes.IndexByte(b, '\n'); i >= 0 || len(w.buf)+len(b) > maxHandshake {
		if i < 0 {
			i = maxHandshake - len(w.buf)
		}
		w.line <- string(append(w.buf, b[:i]...))
		w.done, w.buf = true, nil
		if rest := b[min(i+1, len(b)):]; len(rest) > 0 {
			w.rest.Write(rest)
		}
		return n, nil
	}
	w.buf = append(w.buf, b...)
	return n, nil
}

// close ends the output: a partial first line is the handshake line.
func (w *handshakeWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		if len(w.buf) > 0 {
			w.line <- string(w.buf)
		}
		close(w.line)
		w.done = true
	}
}

// fileSum returns the SHA-256 of the file at path.
func fileSum(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// pluginEnv is the environment a plugin gets after its own: ffpf's,
// without go-plugin's variables that would change the protocol (mTLS,
// multiplexing, a socket directory or group), then the cookie and the
// versions ffpf speaks.
func pluginEnv(environ []string) []string {
	var env []string
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "PLUGIN_") {
			env = append(env, kv)
		}
	}
	return append(env,
		CookieKey+"="+CookieValue,
		"PLUGIN_MIN_PORT=0",
		"PLUGIN_MAX_PORT=0",
		"PLUGIN_PROTOCOL_VERSIONS="+strconv.Itoa(ProtocolVersion))
}

// parseHandshake reads go-plugin's handshake line,
// CORE|APP|NETWORK|ADDR|PROTOCOL[|CERT]: where to connect.
func parseHandshake(line string) (network, addr string, err *launchError) {
	parts := strings.Split(line, "|")
	if len(parts) < 4 {
		return "", "", &launchError{why: badLine, line: line}
	}
	if core, err := strconv.Atoi(parts[0]); err != nil {
		return "", "", &launchError{why: badLine, line: line}
	} else if core != coreProtocol {
		return "", "", &launchError{why: coreVersion, line: line}
	}
	if app, err := strconv.Atoi(parts[1]); err != nil {
		return "", "", &launchError{why: badLine, line: line}
	} else if app != ProtocolVersion {
		return "", "", &launchError{why: appVersion, line: line}
	}
	network, addr = parts[2], parts[3]
	if network != "unix" && network != "tcp" || addr == "" {
		return "", "", &launchError{why: badLine, line: line}
	}
	// No protocol is go-plugin's net/rpc, as its client reads it.
	if len(parts) < 5 || parts[4] != "grpc" {
		return "", "", &launchError{why: notGRPC, line: line}
	}
	return network, addr, nil
}

// readStdio starts reading plugin.GRPCStdio's stream into log, until the
// plugin ends. A plugin without the service (an older go-plugin) is read
// without it, as go-plugin's client does.
func (c *client) readStdio(log io.Writer) error {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.stdio = cancel, make(chan struct{})
	st, err := c.conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, methodStdio, grpc.ForceCodec(pbCodec{}))
	if err == nil {
		if err = st.SendMsg(&pbEmpty{}); err == nil {
			err = st.CloseSend()
		}
	}
	if code := status.Code(err); code == codes.Unavailable || code == codes.Unimplemented {
		close(c.stdio)
		return nil
	}
	if err != nil {
		close(c.stdio)
		return err
	}
	go func() {
		defer close(c.stdio)
		for {
			var d stdioData
			if err := st.RecvMsg(&d); err != nil {
				return
			}
			log.Write(d.data)
		}
	}()
	return nil
}

// Exited reports whether the process has ended (and its stderr been read
// to its end).
func (c *client) Exited() bool {
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}

// Kill ends the plugin: go-plugin's Shutdown, then SIGKILL if it has not
// exited within shutdownWait. It returns once the process has ended and
// what it wrote is in the log.
func (c *client) Kill() {
	c.once.Do(func() {
		if c.conn == nil {
			c.kill()
			return
		}
		// The plugin stops its server while it answers, which may cut
		// the answer: the call's error says nothing.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c.conn.Invoke(ctx, methodShutdown, &pbEmpty{}, &pbEmpty{}, grpc.ForceCodec(pbCodec{}))
		cancel()
		select {
		case <-c.exited:
		case <-time.After(shutdownWait):
		}
		c.kill()
		// The stream ends with the process's connection.
		select {
		case <-c.stdio:
		case <-time.After(time.Second):
		}
		c.cancel()
		c.conn.Close()
	})
}

// kill sends SIGKILL unless the process has ended, and waits for its end.
func (c *client) kill() {
	if !c.Exited() {
		c.cmd.Process.Kill()
	}
	<-c.exited
}

// pbCodec writes and reads go-plugin's own messages, which are protobuf,
// by hand: google.protobuf.Empty, and plugin.StdioData (1: channel, an
// enum; 2: data, bytes). Its name makes gRPC send them as protobuf
// ("application/grpc+proto"), for this call alone (grpc.ForceCodec): the
// process's protobuf codec stays the registered one.
type pbCodec struct{}

type pbEmpty struct{}

type stdioData struct {
	channel int // 1 stdout, 2 stderr
	data    []byte
}

func (pbCodec) Name() string { return "proto" }

func (pbCodec) Marshal(v any) ([]byte, error) {
	if _, ok := v.(*pbEmpty); ok {
		return nil, nil
	}
	return nil, fmt.Errorf("plugin: no protobuf encoding for %T", v)
}

func (pbCodec) Unmarshal(b []byte, v any) error {
	switch m := v.(type) {
	case *pbEmpty:
		return nil // an Empty's fields, if any, are unknown fields
	case *stdioData:
		for len(b) > 0 {
			num, typ, n := protowire.ConsumeTag(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
			switch {
			case num == 1 && typ == protowire.VarintType:
				x, n := protowire.ConsumeVarint(b)
				if n < 0 {
					return protowire.ParseError(n)
				}
				m.channel, b = int(x), b[n:]
			case num == 2 && typ == protowire.BytesType:
				x, n := protowire.ConsumeBytes(b)
				if n < 0 {
					return protowire.ParseError(n)
				}
				m.data, b = append(m.data[:0], x...), b[n:]
			default:
				n := protowire.ConsumeFieldValue(num, typ, b)
				if n < 0 {
					return protowire.ParseError(n)
				}
				b = b[n:]
			}
		}
		return nil
	}
	return errors.New("plugin: no protobuf decoding for this message")
}
