package plugin

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ffpf-go/ffpf/bridges/shm"
	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

// proc is one plugin process, as ffpf runs it.
type proc struct {
	host     *Host
	path     string // the binary, as found in its directory
	name     string // its file name: the prefix of its log lines
	client   *client
	cmd      *exec.Cmd
	rpc      *rpc
	sock     *os.File // ffpf's end of the socket the descriptors cross
	log      *logWriter
	class    *functions.Class
	deadline time.Duration

	mu        sync.Mutex        // an instantiation: its descriptors, then its RPC
	token     uint64            // tags the descriptors that cross the socket
	made      int               // functions instantiated
	orderings map[string][]bool // by canonical parameters
	lens      map[string]int    // by field and canonical parameters
	states    [][]byte          // the functions' state, mapped until Close
	stats     Stats             // of the functions closed

	failed  atomic.Pointer[failure]
	stopped sync.Once
}

// failure is why a plugin's functions failed.
type failure struct {
	what   string // "did not answer a batch within 1s", ...
	killed bool   // ffpf killed it
	done   chan struct{}
	report error // set once done is closed
}

func (p *proc) checkArg(name string, r functions.Raw) error {
	var rep errReply
	if err := p.call("CheckArg", &checkArgRequest{Name: name, Value: r}, &rep); err != nil {
		return fmt.Errorf("plugin %s: %v", p.path, err)
	}
	if rep.Err != "" {
		return errors.New(rep.Err)
	}
	return nil
}

// ordered reports whether parameters ps have the setting of the class's
// ordering i; the plugin is asked once per parameter set.
func (p *proc) ordered(ps functions.Params, i int) bool {
	key := ps.Canonical()
	p.mu.Lock()
	got, ok := p.orderings[key]
	p.mu.Unlock()
	if !ok {
		var rep orderedReply
		if err := p.call("Ordered", &argsMsg{Params: ps.Args()}, &rep); err != nil || rep.Err != "" {
			return true // unknown: one lock is always correct
		}
		got = rep.Ordered
		p.mu.Lock()
		p.orderings[key] = got
		p.mu.Unlock()
	}
	return i >= len(got) || got[i]
}

// lenOf returns the length of the state field name under parameters ps;
// 0 (which the layout refuses, with the field named) when the plugin
// cannot say.
func (p *proc) lenOf(name string, ps functions.Params) int {
	key := name + "\x00" + ps.Canonical()
	p.mu.Lock()
	n, ok := p.lens[key]
	p.mu.Unlock()
	if ok {
		return n
	}
	var rep lenOfReply
	if err := p.call("LenOf", &lenOfRequest{Field: name, Params: ps.Args()}, &rep); err != nil || rep.Err != "" {
		return 0
	}
	p.mu.Lock()
	p.lens[key] = rep.N
	p.mu.Unlock()
	return rep.N
}

func contextOf(ctx *functions.Context) contextMsg {
	return contextMsg{ID: ctx.ID, Params: ctx.Params.Args(), LinkType: ctx.LinkType, Snaplen: ctx.Snaplen,
		Flowspace: ctx.Flowspace, Captures: ctx.Captures}
}

func (p *proc) validate(ctx *functions.Context) error {
	var rep errReply
	m := contextOf(ctx)
	if err := p.call("Validate", &m, &rep); err != nil {
		return fmt.Errorf("plugin %s: %v", p.path, err)
	}
	if rep.Err != "" {
		return errors.New(rep.Err)
	}
	return nil
}

// instantiate makes a function of the plugin's class: its rings and its
// state in shared memory, whose descriptors cross the socket once, then
// the plugin's instance of the class on them.
func (p *proc) instantiate(ctx *functions.Context) (_ functions.Function, err error) {
	if f := p.failed.Load(); f != nil {
		return nil, fmt.Errorf("plugin %s failed before: it %s", p.path, f.what)
	}
	fields, size, err := p.class.State.Layout(functions.TargetUser, ctx.Params)
	if err != nil {
		return nil, err
	}
	f := &function{p: p, rpcBatches: p.host.opts.RPCBatches, copyOnce: p.host.opts.CopyOnce}
	down, err := shm.New(shm.Geometry{Cells: cells, Window: windowFor(ctx.Snaplen)})
	if err != nil {
		return nil, err
	}
	defer down.Close()
	up, err := shm.New(shm.Geometry{Cells: cells})
	if err != nil {
		return nil, err
	}
	defer up.Close()
	if f.down, err = down.Sender(); err != nil {
		return nil, err
	}
	if f.up, err = up.Receiver(); err != nil {
		f.down.Close()
		return nil, err
	}
	defer func() {
		if err != nil {
			f.down.Close()
			f.up.Close()
		}
	}()
	f.up.Watch(int(p.sock.Fd()), unix.POLLRDHUP)
	fds := append(down.Files(shm.ReceiverSide), up.Files(shm.SenderSide)...)
	if size > 0 {
		fd, mem, err := stateMemory(size)
		if err != nil {
			return nil, err
		}
		defer unix.Close(fd)
		p.mu.Lock()
		p.states = append(p.states, mem)
		p.mu.Unlock()
		f.mbuf = buffers.NewMBufOn(mem, stateOrder(p.class.State), fields...)
		fds = append(fds, fd)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.token++
	var tag [8]byte
	binary.LittleEndian.PutUint64(tag[:], p.token)
	if err := shm.SendFiles(p.sock, tag[:], fds); err != nil {
		return nil, fmt.Errorf("plugin %s: %v", p.path, err)
	}
	var rep instantiateReply
	if err := p.call("Instantiate", &instantiateRequest{Ctx: contextOf(ctx), Token: p.token, State: size}, &rep); err != nil {
		return nil, fmt.Errorf("plugin %s: %v", p.path, err)
	}
	if rep.Err != "" {
		return nil, fmt.Errorf("%s: %s", p.class.Name, rep.Err)
	}
	f.instance = rep.Instance
	p.made++
	for _, h := range rep.Handlers {
		name := h.Name
		f.handlers = append(f.handlers, functions.Handler{Name: h.Name, Summary: h.Summary,
			Call: func(arg string) (any, error) { return f.call(name, arg) }})
	}
	if f.mbuf != nil {
		return stateful{f}, nil
	}
	return f, nil
}

// stateMemory is a memfd of size bytes, sealed against resizing, and its
// mapping here.
func stateMemory(size int) (int, []byte, error) {
	fd, err := unix.MemfdCreate("ffpf-state", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, nil, fmt.Errorf("memfd_create: %v", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return -1, nil, err
	}
	unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("mapping a state of %d bytes: %v", size, err)
	}
	return fd, mem, nil
}

func stateOrder(s *functions.State) binary.ByteOrder {
	switch s.OrderName() {
	case "big-endian":
		return binary.BigEndian
	case "little-endian":
		return binary.LittleEndian
	}
	return buffers.Native
}

// fail makes the plugin's functions fail from now on, once: what says
// why. A plugin that misbehaves (hangs, answers with entries of no batch)
// is killed; one that died is reported as it ended.
func (p *proc) fail(what string, kill bool) {
	f := &failure{what: what, killed: kill, done: make(chan struct{})}
	if !p.failed.CompareAndSwap(nil, f) {
		return
	}
	if kill && p.cmd.Process != nil {
		p.cmd.Process.Kill()
	}
	go func() {
		f.report = p.report(f)
		close(f.done)
	}()
	fmt.Fprintf(p.log.out, "ffpf: plugin %s %s; its functions drop their packets from now on\n", p.path, what)
}

// report waits (a while) for the failed plugin's process to end and says
// how it ended, with its last lines on standard error.
func (p *proc) report(f *failure) error {
	for deadline := time.Now().Add(5 * time.Second); !p.client.Exited() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	how := "is still running"
	if p.client.Exited() {
		how = p.exit()
		if f.killed {
			how += ", killed by ffpf"
		}
	}
	return fmt.Errorf("plugin %s %s (it %s)%s", p.path, f.what, how, p.lastLines(keepLines))
}

// exit says how the plugin's process ended: "exited with status 2",
// "was killed by signal 9".
func (p *proc) exit() string {
	st := p.cmd.ProcessState
	if st == nil {
		return "ended"
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("was killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
	}
	return fmt.Sprintf("exited with status %d", st.ExitCode())
}

// lastLines quotes the plugin's last n lines on standard error.
func (p *proc) lastLines(n int) string {
	lines := p.log.last(n)
	if len(lines) == 0 {
		return ""
	}
	q := make([]string, len(lines))
	for i, l := range lines {
		q[i] = fmt.Sprintf("%q", l)
	}
	return "; its last lines on stderr: " + strings.Join(q, ", ")
}

// failure returns the report of the plugin's failure, once ready, or nil.
func (p *proc) failure() error {
	f := p.failed.Load()
	if f == nil {
		return nil
	}
	<-f.done
	return f.report
}

// stop ends the plugin's process.
func (p *proc) stop() {
	p.stopped.Do(func() {
		if p.client != nil {
			p.client.Kill()
		}
		if p.sock != nil {
			p.sock.Close()
		}
	})
}

func (p *proc) unmap() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.states {
		unix.Munmap(m)
	}
	p.states = nil
}

// stateful is a function that keeps state.
type stateful struct{ *function }

// MBuf implements functions.Stateful: the plugin's state, in memory ffpf
// maps too.
func (f stateful) MBuf() *buffers.MBuf { return f.mbuf }

// Handlers implements functions.Handlers: each calls the plugin.
func (f *function) Handlers() []functions.Handler { return f.handlers }

func (f *function) call(name, arg string) (any, error) {
	if err := f.p.failure(); err != nil {
		return nil, err
	}
	var rep callReply
	if err := f.p.call("Call", &callRequest{Instance: f.instance, Handler: name, Arg: arg}, &rep); err != nil {
		return nil, fmt.Errorf("plugin %s: %v", f.p.path, err)
	}
	if rep.Err != "" {
		return nil, errors.New(rep.Err)
	}
	return rep.Result, nil
}

// processRPC is Process over gRPC, packets and all: the baseline.
func (f *function) processRPC(b *buffers.Batch) {
	req := &f.rpcReq
	req.Instance, req.Now = f.instance, b.Now
	req.E, req.Packets, req.Wire, req.TS = req.E[:0], req.Packets[:0], req.Wire[:0], req.TS[:0]
	for _, e := range b.Entries() {
		m := b.PBuf.Meta(e.Slot)
		req.E = append(req.E, e)
		req.Packets = append(req.Packets, b.PBuf.Data(e.Slot))
		req.Wire = append(req.Wire, m.WireLen)
		req.TS = append(req.TS, m.Timestamp)
	}
	var rep rpcBatch
	if err := f.p.call("Batch", req, &rep); err != nil {
		f.p.fail(fmt.Sprintf("failed a batch over RPC: %v", err), true)
		b.Dropped += b.N
		b.N = 0
		return
	}
	out, prev := 0, -1
	for _, e := range rep.E {
		if int(e.Slot) <= prev || int(e.Slot) >= b.N {
			f.p.fail("returned an entry that was not in its batch", true)
			b.Dropped += b.N - out
			b.N = out
			return
		}
		prev = int(e.Slot)
		b.E[out] = buffers.Entry{Slot: b.E[e.Slot].Slot, Class: e.Class}
		out++
	}
	b.N, b.Dropped = out, b.Dropped+int(rep.Dropped)
}

// Close implements functions.Closer: the plugin closes its instance; a
// plugin that failed is reported here, how it ended and its last lines
// on standard error. The state stays mapped until the host closes.
func (f *function) Close() error {
	if f.closed {
		return nil
	}
	f.closed = true
	defer f.up.Close()
	defer f.down.Close()
	f.p.addStats(f.statsNow())
	if err := f.p.failure(); err != nil {
		return err
	}
	var rep errReply
	if err := f.p.call("Close", &instanceMsg{Instance: f.instance}, &rep); err != nil {
		return fmt.Errorf("plugin %s: %v", f.p.path, err)
	}
	if rep.Err != "" {
		return errors.New(rep.Err)
	}
	return nil
}
