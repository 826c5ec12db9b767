package server

import (
	"fmt"
	"sync"
	"time"

	p4 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// digester turns the datapath's digests into DigestList messages to the
// primary client, as the spec's DigestEntry section says: only for
// digests a DigestEntry enabled; buffered until max_list_size distinct
// messages or max_timeout_ns; a message sent and not acknowledged within
// ack_timeout_ns is not sent again.
type digester struct {
	s    *Server
	in   chan digestMsg
	quit chan struct{}
	once sync.Once

	mu       sync.Mutex
	pl       *pipeline // the committed one; its dcfg the digests enabled
	buf      map[uint32]*pending
	cache    map[string]cached // digest id + values → the list that sent it
	nextList uint64
	// Counts: taken from the datapath, dropped there for want of room,
	// not enabled, duplicates, sent in lists.
	Taken, Lost, Disabled, Duplicates, Sent uint64
}

type digestMsg struct {
	d    *p4gen.DigestType
	vals []uint64
}

type pending struct {
	first time.Time
	keys  []string
	msgs  [][]uint64
}

type cached struct {
	list uint64
	sent time.Time
}

func newDigester(s *Server) *digester {
	d := &digester{s: s, in: make(chan digestMsg, 4096), quit: make(chan struct{}),
		buf: map[uint32]*pending{}, cache: map[string]cached{}}
	go d.loop()
	return d
}

func (d *digester) close() { d.once.Do(func() { close(d.quit) }) }

// fromDevice takes a digest from the datapath (under the device's lock):
// a copy, never blocking.
func (d *digester) fromDevice(t *p4gen.DigestType, vals []uint64) {
	select {
	case d.in <- digestMsg{t, append([]uint64(nil), vals...)}:
	default:
		d.mu.Lock()
		d.Lost++
		d.mu.Unlock()
	}
}

func (d *digester) loop() {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case m := <-d.in:
			d.mu.Lock()
			d.take(m)
			d.mu.Unlock()
		case now := <-tick.C:
			d.mu.Lock()
			d.expire(now)
			d.mu.Unlock()
		case <-d.quit:
			return
		}
	}
}

// reset forgets buffers and the cache: a new pipeline, with the digests
// enabled in it (before a COMMIT of it, saved).
func (d *digester) reset(pl *pipeline) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pl = pl
	clear(d.buf)
	clear(d.cache)
}

func key(id uint32, vals []uint64) string { return fmt.Sprint(id, vals) }

func (d *digester) take(m digestMsg) {
	d.Taken++
	if d.pl == nil {
		d.Disabled++
		return
	}
	di := d.pl.digestOf[m.d]
	if di == nil {
		d.Disabled++
		return
	}
	cfg := d.pl.dcfg[di.id]
	if cfg == nil {
		d.Disabled++
		return
	}
	k := key(di.id, m.vals)
	if _, ok := d.cache[k]; ok {
		d.Duplicates++
		return
	}
	b := d.buf[di.id]
	if b == nil {
		b = &pending{first: time.Now()}
		d.buf[di.id] = b
	}
	for _, o := range b.keys {
		if o == k {
			d.Duplicates++
			return
		}
	}
	b.keys = append(b.keys, k)
	b.msgs = append(b.msgs, m.vals)
	if cfg.GetMaxTimeoutNs() == 0 || cfg.GetMaxListSize() == 1 || cfg.GetMaxListSize() > 0 && len(b.msgs) >= int(cfg.GetMaxListSize()) {
		d.flush(di, b, time.Now())
	}
}

// expire sends the buffers whose time is up and forgets cache entries
// older than their ack timeout.
func (d *digester) expire(now time.Time) {
	if d.pl == nil {
		return
	}
	for id, b := range d.buf {
		cfg := d.pl.dcfg[id]
		if cfg == nil {
			delete(d.buf, id)
			continue
		}
		if len(b.msgs) > 0 && now.Sub(b.first) >= time.Duration(cfg.GetMaxTimeoutNs()) {
			d.flush(d.pl.digests[id], b, now)
		}
	}
	for k, c := range d.cache {
		var id uint32
		fmt.Sscan(k, &id)
		if cfg := d.pl.dcfg[id]; cfg == nil || now.Sub(c.sent) >= time.Duration(cfg.GetAckTimeoutNs()) {
			delete(d.cache, k)
		}
	}
}

// flush sends a buffer as one DigestList to the primary.
func (d *digester) flush(di *digestInfo, b *pending, now time.Time) {
	defer delete(d.buf, di.id)
	st := d.s.livePrimary.Load()
	if st == nil {
		return
	}
	d.nextList++
	list := &p4.DigestList{DigestId: di.id, ListId: d.nextList, Timestamp: now.UnixNano()}
	for _, vals := range b.msgs {
		var members []*p4.P4Data
		for _, v := range vals {
			members = append(members, &p4.P4Data{Data: &p4.P4Data_Bitstring{Bitstring: bytesOf(v)}})
		}
		list.Data = append(list.Data, &p4.P4Data{Data: &p4.P4Data_Struct{Struct: &p4.P4StructLike{Members: members}}})
	}
	d.Sent += uint64(len(b.msgs))
	if d.pl.dcfg[di.id].GetAckTimeoutNs() > 0 {
		for _, k := range b.keys {
			d.cache[k] = cached{list: list.ListId, sent: now}
		}
	}
	st.send(&p4.StreamMessageResponse{Update: &p4.StreamMessageResponse_Digest{Digest: list}})
}

// ack forgets the cache entries of an acknowledged list.
func (d *digester) ack(st *stream, a *p4.DigestListAck) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pl == nil || d.pl.digests[a.GetDigestId()] == nil {
		st.send(&p4.StreamMessageResponse{Update: &p4.StreamMessageResponse_Error{Error: &p4.StreamError{
			CanonicalCode: int32(codes.InvalidArgument), Message: fmt.Sprintf("no digest id %d", a.GetDigestId()),
			Details: &p4.StreamError_DigestListAck{DigestListAck: &p4.DigestListAckError{DigestListAck: a}}}}})
		return
	}
	for k, c := range d.cache {
		if c.list == a.GetListId() {
			delete(d.cache, k)
		}
	}
}

// configure applies a DigestEntry write to pl.
func (d *digester) configure(pl *pipeline, t p4.Update_Type, e *p4.DigestEntry) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	id := e.GetDigestId()
	if pl.digests[id] == nil {
		return status.Errorf(codes.NotFound, "no digest id %#x", id)
	}
	_, on := pl.dcfg[id]
	switch t {
	case p4.Update_INSERT, p4.Update_MODIFY:
		if e.GetConfig() == nil {
			return status.Errorf(codes.InvalidArgument, "digest %#x: a config is needed", id)
		}
		c := e.GetConfig()
		if c.GetMaxTimeoutNs() < 0 || c.GetMaxListSize() < 0 || c.GetAckTimeoutNs() < 0 {
			return status.Errorf(codes.InvalidArgument, "digest %#x: a negative config value", id)
		}
		if t == p4.Update_INSERT && on {
			return status.Errorf(codes.AlreadyExists, "digest %#x is already enabled", id)
		}
		if t == p4.Update_MODIFY && !on {
			return status.Errorf(codes.NotFound, "digest %#x is not enabled", id)
		}
		pl.dcfg[id] = c
	case p4.Update_DELETE:
		if !on {
			return status.Errorf(codes.NotFound, "digest %#x is not enabled", id)
		}
		delete(pl.dcfg, id)
		if pl == d.pl {
			delete(d.buf, id)
		}
	default:
		return status.Errorf(codes.InvalidArgument, "update type %v", t)
	}
	return nil
}

// entries returns pl's enabled digests' configs (id 0: all).
func (d *digester) entries(pl *pipeline, id uint32) ([]*p4.DigestEntry, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if id != 0 && pl.digests[id] == nil {
		return nil, status.Errorf(codes.NotFound, "no digest id %#x", id)
	}
	var out []*p4.DigestEntry
	for i, c := range pl.dcfg {
		if id == 0 || i == id {
			out = append(out, &p4.DigestEntry{DigestId: i, Config: c})
		}
	}
	return out, nil
}
