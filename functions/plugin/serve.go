package plugin

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"

	"github.com/ffpf-go/ffpf/bridges/shm"
	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

// DefaultDeadline is how long ffpf waits for a plugin to answer a batch
// before it fails the plugin's functions, unless the class sets its own
// (Deadline).
const DefaultDeadline = time.Second

// Option is a setting of Serve.
type Option func(*server)

// Deadline sets how long ffpf waits for the plugin to answer one batch:
// a plugin that takes longer is taken for hung, killed, and its functions
// fail (their packets counted as dropped).
func Deadline(d time.Duration) Option { return func(s *server) { s.deadline = d } }

// Server serves a function class to ffpf: the plugin's half of the
// service, its instances and their batches. A plugin's main does not use
// it: package sdk's Serve runs it on go-plugin's server, the one call a
// plugin makes.
type Server struct{ s *server }

// NewServer returns the server of class c, or why a plugin cannot serve
// it. The class is the one an in-process class would register (its
// parameters, state, concurrency, handlers and New), with one rule more:
// its function allocates its state with ctx.NewMBuf, so that the state
// lives in memory ffpf reads. Call it before go-plugin's Serve, which
// sends what the plugin writes to os.Stderr to ffpf over gRPC: a plugin
// about to exit writes to the descriptor itself, which ffpf reads to the
// end before it reports the exit.
func NewServer(c *functions.Class, opts ...Option) (*Server, error) {
	if err := servable(c); err != nil {
		return nil, err
	}
	stderr = os.Stderr
	s := &server{class: c, deadline: DefaultDeadline, instances: map[uint64]*instance{}}
	for _, o := range opts {
		o(s)
	}
	if fd, err := strconv.Atoi(os.Getenv(envSocket)); err == nil {
		s.sock = os.NewFile(uintptr(fd), "ffpf-socket")
	}
	return &Server{s}, nil
}

// Register registers the class's service on g.
func (s *Server) Register(g *grpc.Server) { g.RegisterService(&serviceDesc, s.s) }

var stderr = os.Stderr

// server is the plugin's half of the service.
type server struct {
	class     *functions.Class
	deadline  time.Duration
	sock      *os.File // descriptors from ffpf
	sockMu    sync.Mutex
	pending   map[uint64][]int // received for another token than the receiver's
	mu        sync.Mutex
	next      uint64
	instances map[uint64]*instance
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (s *server) schema() (*schemaReply, error) {
	return &schemaReply{Schema: describe(s.class, s.deadline)}, nil
}

func (s *server) checkArg(r *checkArgRequest) (*errReply, error) {
	return &errReply{Err: errText(s.class.CheckArg(r.Name, r.Value))}, nil
}

func (s *server) bind(args []functions.Arg) (functions.Params, error) {
	return s.class.Bind(args)
}

func (s *server) lenOf(r *lenOfRequest) (*lenOfReply, error) {
	p, err := s.bind(r.Params)
	if err != nil {
		return &lenOfReply{Err: err.Error()}, nil
	}
	if s.class.State != nil {
		for _, f := range s.class.State.Fields {
			if f.Name == r.Field && f.LenOf != nil {
				return &lenOfReply{N: f.LenOf(p)}, nil
			}
		}
	}
	return &lenOfReply{Err: fmt.Sprintf("class %s has no state field %s of a length from its parameters", s.class.Name, r.Field)}, nil
}

func (s *server) ordered(r *argsMsg) (*orderedReply, error) {
	p, err := s.bind(r.Params)
	if err != nil {
		return &orderedReply{Err: err.Error()}, nil
	}
	rep := &orderedReply{}
	for _, o := range s.class.OrderedWhen {
		rep.Ordered = append(rep.Ordered, o.If(p))
	}
	return rep, nil
}

func (s *server) context(m *contextMsg) (*functions.Context, error) {
	p, err := s.bind(m.Params)
	if err != nil {
		return nil, err
	}
	return &functions.Context{ID: m.ID, Params: p, LinkType: m.LinkType, Snaplen: m.Snaplen, Flowspace: m.Flowspace,
		Captures: m.Captures, Target: functions.TargetUser}, nil
}

func (s *server) validate(m *contextMsg) (*errReply, error) {
	ctx, err := s.context(m)
	if err == nil && s.class.Validate != nil {
		err = s.class.Validate(ctx)
	}
	return &errReply{Err: errText(err)}, nil
}

// receive returns the descriptors ffpf sent tagged with token. The
// instances' goroutines receive too (packet memory to map): a message for
// another waits in pending for the one it is for.
func (s *server) receive(token uint64) ([]int, error) {
	if s.sock == nil {
		return nil, fmt.Errorf("the plugin was started without %s: it cannot receive its rings", envSocket)
	}
	s.sockMu.Lock()
	defer s.sockMu.Unlock()
	if fds, ok := s.pending[token]; ok {
		delete(s.pending, token)
		return fds, nil
	}
	for {
		tag, fds, err := shm.ReceiveFiles(s.sock)
		if err != nil {
			return nil, err
		}
		if len(tag) != 8 {
			closeAll(fds)
			continue
		}
		got := binary.LittleEndian.Uint64(tag)
		if got == token {
			return fds, nil
		}
		if s.pending == nil {
			s.pending = map[uint64][]int{}
		}
		// Those of an instantiation that failed before it asked for them
		// are never taken: keep the last few only.
		for t, old := range s.pending {
			if len(s.pending) < maxPending {
				break
			}
			closeAll(old)
			delete(s.pending, t)
		}
		s.pending[got] = fds
	}
}

const maxPending = 64

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

func (s *server) instantiate(r *instantiateRequest) (*instantiateReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fds, err := s.receive(r.Token)
	if err != nil {
		return &instantiateReply{Err: err.Error()}, nil
	}
	in, err := s.newInstance(&r.Ctx, fds, r.State)
	if err != nil {
		return &instantiateReply{Err: err.Error()}, nil
	}
	s.next++
	s.instances[s.next] = in
	rep := &instantiateReply{Instance: s.next}
	if h, ok := in.fn.(functions.Handlers); ok {
		in.handlers = h.Handlers()
		for _, x := range in.handlers {
			rep.Handlers = append(rep.Handlers, handlerInfo{Name: x.Name, Summary: x.Summary})
		}
	}
	go in.serve(s)
	return rep, nil
}

func (s *server) instance(id uint64) (*instance, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.instances[id]
	if in == nil {
		return nil, fmt.Errorf("no instance %d", id)
	}
	return in, nil
}

func (s *server) call(r *callRequest) (*callReply, error) {
	in, err := s.instance(r.Instance)
	if err != nil {
		return &callReply{Err: err.Error()}, nil
	}
	for _, h := range in.handlers {
		if h.Name != r.Handler {
			continue
		}
		in.mu.Lock()
		v, err := h.Call(r.Arg)
		in.mu.Unlock()
		if err != nil {
			return &callReply{Err: err.Error()}, nil
		}
		out, err := json.Marshal(v)
		if err != nil {
			return &callReply{Err: fmt.Sprintf("handler %s: its result does not marshal as JSON: %v", h.Name, err)}, nil
		}
		return &callReply{Result: out}, nil
	}
	return &callReply{Err: fmt.Sprintf("no handler %q", r.Handler)}, nil
}

func (s *server) closeInstance(r *instanceMsg) (*errReply, error) {
	s.mu.Lock()
	in := s.instances[r.Instance]
	delete(s.instances, r.Instance)
	s.mu.Unlock()
	if in == nil {
		return &errReply{Err: fmt.Sprintf("no instance %d", r.Instance)}, nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	var err error
	if c, ok := in.fn.(functions.Closer); ok {
		err = c.Close()
	}
	return &errReply{Err: errText(err)}, nil
}

// batch processes a batch sent over RPC (the baseline): the same
// instance, packets copied out of the message.
func (s *server) batch(r *rpcBatch) (*rpcBatch, error) {
	in, err := s.instance(r.Instance)
	if err != nil {
		return nil, err
	}
	b := &in.rpc // ffpf sends one batch at a time per instance
	if b.PBuf == nil {
		snap := in.snaplen
		if snap <= 0 {
			snap = 65535
		}
		b.PBuf = buffers.NewPBuf(buffers.MaxBatch, snap)
		b.Cap = buffers.MaxBatch
	}
	b.Reset()
	for i, pkt := range r.Packets {
		b.Append(pkt, r.Wire[i], r.TS[i])
		b.E[i].Class = r.E[i].Class
	}
	b.Now = r.Now
	in.process(b)
	rep := &rpcBatch{Dropped: uint32(b.Dropped), E: make([]buffers.Entry, b.N)}
	copy(rep.E, b.E[:b.N])
	return rep, nil
}

// instance is a function the plugin runs for ffpf: its rings, its state
// and the goroutine that serves its batches.
type instance struct {
	fn       functions.Function
	handlers []functions.Handler
	mu       sync.Mutex // Process and the handlers, one at a time
	down     *shm.Receiver
	up       *shm.Sender
	arenas   [1 + maxArenas]arena // 0: the down ring's windows; then the memory ffpf mapped here
	batch    buffers.Batch
	rpc      buffers.Batch
	snaplen  int
	touched  byte // what answer's loads read: kept, so that they are not optimised away
}

// newInstance opens the rings and the state whose descriptors are fds
// (down ring: 3, up ring: 3, the state: 1 when size > 0) and instantiates
// the class on them.
func (s *server) newInstance(m *contextMsg, fds []int, size int) (in *instance, err error) {
	want := 6
	if size > 0 {
		want = 7
	}
	if len(fds) != want {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("%d descriptors, want %d", len(fds), want)
	}
	in = &instance{snaplen: m.Snaplen}
	if in.down, err = shm.OpenReceiver(fds[0:3]); err != nil {
		for _, fd := range fds[3:] {
			unix.Close(fd)
		}
		return nil, err
	}
	if in.up, err = shm.OpenSender(fds[3:6]); err != nil {
		in.down.Close()
		if size > 0 {
			unix.Close(fds[6])
		}
		return nil, err
	}
	defer func() {
		if err != nil {
			in.down.Close()
			in.up.Close()
		}
	}()
	var state []byte
	if size > 0 {
		state, err = unix.Mmap(fds[6], 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		unix.Close(fds[6])
		if err != nil {
			return nil, fmt.Errorf("mapping the state: %v", err)
		}
	}
	ctx, err := s.context(m)
	if err != nil {
		return nil, err
	}
	ctx.Memory = func(n int) ([]byte, error) {
		if n != size {
			return nil, fmt.Errorf("the state takes %d bytes, ffpf laid out %d", n, size)
		}
		return state, nil
	}
	fn, err := s.class.New(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.class.CheckState(functions.TargetUser, ctx.Params, fn); err != nil {
		return nil, err
	}
	if st, ok := fn.(functions.Stateful); ok && size > 0 && unsafe.SliceData(st.MBuf().Bytes()) != unsafe.SliceData(state) {
		return nil, fmt.Errorf("class %s keeps its state in memory of its own: allocate it with ctx.NewMBuf, so that ffpf can read it", s.class.Name)
	}
	switch fn.(type) {
	case functions.Clocked, functions.Flusher, functions.Producer:
		return nil, fmt.Errorf("class %s: a plugin's function cannot be clocked, flushed or produce records", s.class.Name)
	}
	in.fn = fn
	in.arenas[0] = in.newArena(in.down.Arena())
	in.batch = buffers.Batch{PBuf: in.arenas[0].pbuf, Cap: buffers.MaxBatch}
	return in, nil
}

// arena is memory the packets of a cell lie in, as this process maps it
// (read-only), and a PBuf that views it.
type arena struct {
	mem  []byte
	pbuf *buffers.PBuf
}

func (in *instance) newArena(mem []byte) arena {
	return arena{mem: mem, pbuf: buffers.NewPBufView(mem, in.down.Geometry().Cells*buffers.MaxBatch)}
}

// serve answers the cells of the down ring on the up ring until ffpf
// closes the ring; if ffpf goes away, so does the plugin.
func (in *instance) serve(s *server) {
	in.down.Watch(int(s.sock.Fd()), unix.POLLRDHUP)
	defer in.down.Close()
	defer in.up.Close()
	defer func() {
		for _, a := range in.arenas[1:] {
			if a.mem != nil {
				unix.Munmap(a.mem)
			}
		}
	}()
	for {
		c, err := in.down.Next(-1)
		if err == shm.ErrClosed {
			return
		}
		if err != nil {
			os.Exit(1) // ffpf is gone, or broke its ring
		}
		out, err := in.up.Reserve()
		if err != nil || out == nil {
			os.Exit(1) // ffpf did not take its answers before sending more
		}
		if c.Status == statusMap {
			in.mapArena(s, c, out)
		} else {
			in.answer(c, out)
		}
		st := in.down.Stats
		out.Aux = [4]uint64{st.Spun, st.Slept, st.Waited, in.up.Wakes}
		in.down.Release()
		in.up.Publish()
	}
}

// mapArena maps the packet memory a cell of statusMap announces, whose
// descriptor crossed the socket, read-only: a write to it faults this
// process, never ffpf.
func (in *instance) mapArena(s *server, c, out *shm.Cell) {
	out.Seq, out.N, out.Dropped, out.Status = c.Seq, 0, 0, statusRefused
	k, token, off, size := c.Aux[0], c.Aux[1], c.Aux[2], c.Aux[3]
	fds, err := s.receive(token)
	if err != nil {
		fmt.Fprintf(stderr, "ffpf plugin: receiving packet memory: %v\n", err)
		return
	}
	defer closeAll(fds)
	if k < 1 || k > maxArenas || in.arenas[k].mem != nil || len(fds) != 1 || size == 0 || size > 1<<46 || off%uint64(os.Getpagesize()) != 0 {
		fmt.Fprintf(stderr, "ffpf plugin: a request to map packet memory %d that cannot be honoured\n", k)
		return
	}
	mem, err := unix.Mmap(fds[0], int64(off), int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		fmt.Fprintf(stderr, "ffpf plugin: mapping %d bytes of packet memory: %v\n", size, err)
		return
	}
	in.arenas[k] = in.newArena(mem)
	out.Status = 0
}

// answer processes the batch of cell c and writes what passed into out:
// each kept entry as the index of its packet in c, with its class. An
// entry whose descriptor lies outside its memory counts as dropped.
func (in *instance) answer(c, out *shm.Cell) {
	out.Seq, out.Now, out.Status = c.Seq, c.Now, 0
	k := c.Aux[0]
	if k > maxArenas || in.arenas[k].mem == nil {
		out.N, out.Dropped, out.Status = 0, 0, statusBad
		return
	}
	a := &in.arenas[k]
	mem, base := c.Window, uint64(c.Offset)
	if k > 0 {
		mem, base = a.mem, 0
	}
	b := &in.batch
	b.Reset()
	b.PBuf = a.pbuf
	b.Base = uint32(c.Index * buffers.MaxBatch)
	b.Now = c.Now
	n := min(int(c.N), buffers.MaxBatch)
	bad := 0
	var touch byte
	for i := range n {
		pkt, ok := c.PacketIn(i, mem)
		if !ok {
			bad++
			continue
		}
		// Load each packet's first bytes now, all of them independent of
		// each other, so that the memory fetches them in parallel: the
		// class's parsing then finds its headers in cache instead of
		// waiting for memory packet after packet.
		if len(pkt) > 0 {
			touch ^= pkt[0] ^ pkt[min(len(pkt)-1, 64)]
		}
		// Slot Base+i is entry i's packet, so that an answer's index is
		// the entry's in the cell.
		d, slot := &c.D[i], b.Base+uint32(i)
		*a.pbuf.Meta(slot) = buffers.Meta{Timestamp: d.TS, Offset: base + d.Off, CapLen: d.CapLen, WireLen: d.WireLen}
		b.E[b.N] = buffers.Entry{Slot: slot, Class: c.E[i].Class}
		b.N++
	}
	in.touched = touch
	in.process(b)
	for j, e := range b.E[:b.N] {
		out.E[j] = buffers.Entry{Slot: e.Slot - b.Base, Class: e.Class}
	}
	out.N, out.Dropped = uint32(b.N), uint32(b.Dropped+bad)
}

// process runs the function on b, under its lock. A panic ends the
// plugin with its value on the last line of stderr, where ffpf's report
// of the plugin's exit shows it.
func (in *instance) process(b *buffers.Batch) {
	in.mu.Lock()
	defer in.mu.Unlock()
	defer func() {
		if v := recover(); v != nil {
			stderr.Write(debug.Stack())
			fmt.Fprintf(stderr, "panic in Process: %v\n", v)
			os.Exit(2)
		}
	}()
	in.fn.Process(b)
}
