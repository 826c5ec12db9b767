package pisa

import (
	"errors"
	"sync"

	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// Device is a switch around a pipeline: packets enter on ports, run
// through ingress, wait in the egress queue of the port they leave by
// (drained at the port's rate on the switch's clock), run through egress
// and leave, to a front-panel port or to the controller through the CPU
// port. Its methods are safe for concurrent use: the datapath (Receive,
// Advance) and the control plane (Load, Do) take one lock.
//
// Time is the switch's clock in µs (ingress_global_timestamp's unit on
// bmv2), given by whoever feeds the packets: a capture file's
// timestamps, or the time since the switch started.
type Device struct {
	mu      sync.Mutex
	model   *Model
	cpuPort uint16
	queues  map[uint16]*queue
	qcap    int
	rates   map[uint16]float64
	qk      pkt // a queued packet running egress

	// Out receives each frame leaving a front-panel port, PacketIn each
	// frame sent to the CPU port, Digest each digest: under the lock,
	// with slices valid only during the call.
	Out      func(port uint16, frame []byte)
	PacketIn func(frame []byte)
	Digest   func(t *p4gen.DigestType, values []uint64)
	// OutAt, when set, receives what Out would, with the time (µs) the
	// frame left: its queue's departure, or its arrival when the port
	// has no queue (a network of devices delivers it to the next one
	// then).
	OutAt func(port uint16, frame []byte, at uint64)

	stats DeviceStats
}

// DeviceStats counts what the device did with the packets it received:
// In = Ingressed + NoPipeline + Errors; what ingress kept went out,
// was dropped by egress or by a full queue, or waits in a queue.
type DeviceStats struct {
	In, NoPipeline, Errors  uint64
	Ingressed               uint64
	Out, ToCPU              uint64 // frames (clones included)
	QueueDrops, EgressDrops uint64
	Digests                 uint64
	DroppedAtLoad           uint64 // queued when a new pipeline replaced the old
}

// queue is a port's egress queue: a FIFO of packets, each leaving at
// its time, interval µs after the one before it.
type queue struct {
	interval float64 // µs a packet; 0: no queue (line rate)
	last     float64 // when the last packet enqueued leaves
	entries  []qentry
	head, n  int
}

type qentry struct {
	p        pkt
	data     []byte
	port     uint16
	instance uint32
	enq, deq uint64
	enqDepth uint32
}

// NewDevice returns a switch without a pipeline whose CPU port is
// cpuPort, whose ports drain at rates (packets per second; a port not
// there, or 0, sends at once), each queue holding qcap packets (64 when
// 0, bmv2's default).
func NewDevice(cpuPort uint16, rates map[uint16]float64, qcap int) *Device {
	if qcap <= 0 {
		qcap = 64
	}
	d := &Device{cpuPort: cpuPort, queues: map[uint16]*queue{}, qcap: qcap, rates: map[uint16]float64{}}
	for p, r := range rates {
		d.rates[p] = r
	}
	return d
}

// CPUPort returns the CPU port.
func (d *Device) CPUPort() uint16 { return d.cpuPort }

// ErrNoPipeline is what Do returns before a pipeline is loaded.
var ErrNoPipeline = errors.New("no pipeline is loaded")

// Load makes m the pipeline (nil: none); the packets queued for the old
// one are dropped and counted.
func (d *Device) Load(m *Model) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, q := range d.queues {
		d.stats.DroppedAtLoad += uint64(q.n)
		q.head, q.n, q.last = 0, 0, -1e300
	}
	d.model = m
	if m != nil {
		d.qk = m.newPkt()
		for _, q := range d.queues {
			for i := range q.entries {
				q.entries[i].p = pkt{}
			}
		}
	}
}

// Loaded reports whether a pipeline is loaded.
func (d *Device) Loaded() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.model != nil
}

// Do runs f on the pipeline, under the lock: the control plane's way to
// the state.
func (d *Device) Do(f func(m *Model) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.model == nil {
		return ErrNoPipeline
	}
	return f(d.model)
}

// Stats returns the counts so far.
func (d *Device) Stats() DeviceStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// Receive runs a frame arriving on port at time now (µs): first the
// departures due by now, then the frame's ingress, and the egress of
// each copy that leaves without waiting.
func (d *Device) Receive(port uint16, frame []byte, now uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.drain(float64(now))
	d.stats.In++
	m := d.model
	if m == nil {
		d.stats.NoPipeline++
		return
	}
	m.begin()
	a := p4gen.Arrival{Data: frame, Port: port, Time: now}
	p := &m.pk
	if _, err := m.ingressOf(p, a); err != nil {
		d.stats.Errors++
		return
	}
	d.stats.Ingressed++
	m.end()
	d.digests(m)
	_ = m.instances(p, a, func(p *pkt, port uint16, instance uint32) error {
		d.enqueue(m, p, port, instance, now)
		return nil
	})
}

// Advance sends what is due by now (µs) from the queues.
func (d *Device) Advance(now uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.drain(float64(now))
}

// Next returns the time (µs) of the earliest departure queued; false
// when no packet waits. A network of devices advances each to it in
// turn, so that a packet leaves one and enters the next in time order.
func (d *Device) Next() (uint64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var at uint64
	found := false
	for _, q := range d.queues {
		if q.n > 0 && (!found || q.entries[q.head].deq < at) {
			at, found = q.entries[q.head].deq, true
		}
	}
	return at, found
}

// Flush sends everything queued, each at its time.
func (d *Device) Flush() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.drain(1e300)
}

func (d *Device) queue(port uint16) *queue {
	q := d.queues[port]
	if q == nil {
		q = &queue{last: -1e300}
		if r := d.rates[port]; r > 0 {
			q.interval = 1e6 / r
			q.entries = make([]qentry, d.qcap)
		}
		d.queues[port] = q
	}
	return q
}

// enqueue puts a copy of p, leaving on port, in that port's queue, or
// runs its egress at once when the port has no queue.
func (d *Device) enqueue(m *Model, p *pkt, port uint16, instance uint32, now uint64) {
	q := d.queue(port)
	if q.interval == 0 {
		d.egress(m, p, port, instance, egressMeta{enqTS: uint32(now), now: now})
		return
	}
	if q.n == len(q.entries) {
		d.stats.QueueDrops++
		return
	}
	at := max(float64(now), q.last+q.interval)
	q.last = at
	e := &q.entries[(q.head+q.n)%len(q.entries)]
	e.enqDepth = uint32(q.n)
	q.n++
	e.port, e.instance, e.enq, e.deq = port, instance, now, uint64(at)
	e.data = append(e.data[:0], p.data...)
	m.locate(p)
	if len(e.p.v) != len(p.v) {
		e.p = pkt{v: make([]uint64, len(p.v)), varOff: make([]int32, len(p.varOff)),
			varLen: make([]int32, len(p.varLen)), hdrAt: make([]int32, len(p.hdrAt)), vbits: make([]uint64, len(p.vbits))}
	}
	copy(e.p.v, p.v)
	copy(e.p.vbits, p.vbits)
	copy(e.p.varOff, p.varOff)
	copy(e.p.varLen, p.varLen)
	copy(e.p.hdrAt, p.hdrAt)
	e.p.payload, e.p.dirty, e.p.ordered = p.payload, p.dirty, p.ordered
}

// drain runs egress for the queued packets due by now, earliest first.
func (d *Device) drain(now float64) {
	m := d.model
	if m == nil {
		return
	}
	for {
		var best *queue
		for _, q := range d.queues {
			if q.n > 0 && float64(q.entries[q.head].deq) <= now && (best == nil || q.entries[q.head].deq < best.entries[best.head].deq) {
				best = q
			}
		}
		if best == nil {
			return
		}
		e := &best.entries[best.head]
		best.head = (best.head + 1) % len(best.entries)
		best.n--
		p := &d.qk
		copy(p.v, e.p.v)
		copy(p.vbits, e.p.vbits)
		copy(p.varOff, e.p.varOff)
		copy(p.varLen, e.p.varLen)
		copy(p.hdrAt, e.p.hdrAt)
		p.data, p.payload, p.dirty, p.ordered, p.err = e.data, e.p.payload, e.p.dirty, e.p.ordered, nil
		p.visits, p.located = p.visits[:0], true
		p.clones = p.clones[:0]
		d.egress(m, p, e.port, e.instance, egressMeta{enqQ: e.enqDepth, deqQ: uint32(best.n),
			enqTS: uint32(e.enq), deqDelta: uint32(e.deq - e.enq), now: e.deq})
	}
}

// egress runs egress on p and hands what leaves to Out or PacketIn.
func (d *Device) egress(m *Model, p *pkt, port uint16, instance uint32, q egressMeta) {
	m.begin()
	if err := m.egressOf(p, port, instance, q); err != nil {
		d.stats.Errors++
		return
	}
	m.end()
	d.digests(m)
	if len(m.res.Out) == 0 {
		d.stats.EgressDrops++
		return
	}
	for _, o := range m.res.Out {
		if o.Port == d.cpuPort {
			d.stats.ToCPU++
			if d.PacketIn != nil {
				d.PacketIn(o.Data)
			}
			continue
		}
		d.stats.Out++
		switch {
		case d.OutAt != nil:
			d.OutAt(o.Port, o.Data, q.now)
		case d.Out != nil:
			d.Out(o.Port, o.Data)
		}
	}
}

func (d *Device) digests(m *Model) {
	for _, g := range m.res.Digests {
		d.stats.Digests++
		if d.Digest != nil {
			d.Digest(g.Type, g.Values)
		}
	}
	m.res.Digests = m.res.Digests[:0]
}
