package libpcap

/*
#include <poll.h>
#include <stdlib.h>
#include "ffpf_pcap.h"

// ffpf_pkt is where ffpf_next puts a packet: its bytes stay in libpcap's
// buffer.
struct ffpf_pkt {
	const unsigned char *data;
	long long sec, frac;
	unsigned int caplen, len;
};

// ffpf_next reads the next packet of a non-blocking handle: at once if one
// is there, or else after waiting up to msec for the handle's descriptor
// to become readable. It returns pcap_next_ex's result (1 a packet, 0 none
// came in time, -1 an error, -2 the end of a savefile): one cgo call per
// packet.
static int ffpf_next(pcap_t *p, int msec, struct ffpf_pkt *out) {
	struct pcap_pkthdr *h;
	const unsigned char *d;
	int rc = ffpf_pcap_next_ex(p, &h, &d);

	if (rc == 0) {
		struct pollfd fd = { .fd = ffpf_pcap_get_selectable_fd(p), .events = POLLIN };
		if (fd.fd >= 0)
			poll(&fd, 1, msec);
		rc = ffpf_pcap_next_ex(p, &h, &d);
	}
	if (rc < 1)
		return rc;
	out->data = d;
	out->sec = h->ts.tv_sec;
	out->frac = h->ts.tv_usec;
	out->caplen = h->caplen;
	out->len = h->len;
	return 1;
}
*/
import "C"

import (
	"errors"
	"io"
	"time"
	"unsafe"
)

// ErrTimeout is Next's result when no packet came within the read timeout.
var ErrTimeout = errors.New("libpcap: read timeout")

// Status is a pcap_activate result that is not success: an error below
// zero, a warning above it. Activate fails on warnings too.
type Status int

// The activation results ffpf names in its messages (pcap/pcap.h).
const (
	ErrNoSuchDevice   Status = C.PCAP_ERROR_NO_SUCH_DEVICE
	ErrPermDenied     Status = C.PCAP_ERROR_PERM_DENIED
	ErrIfaceNotUp     Status = C.PCAP_ERROR_IFACE_NOT_UP
	WarnPromiscNotSup Status = C.PCAP_WARNING_PROMISC_NOTSUP
)

// ActivateError is Activate's failure: the status, and libpcap's message
// (pcap_geterr, or pcap_statustostr where libpcap leaves none).
type ActivateError struct {
	Status Status
	Msg    string
}

func (e *ActivateError) Error() string { return e.Msg }

// Direction is a capture's direction, as pcap_setdirection takes it.
type Direction int

// The directions.
const (
	DirectionIn    Direction = C.PCAP_D_IN
	DirectionOut   Direction = C.PCAP_D_OUT
	DirectionInOut Direction = C.PCAP_D_INOUT
)

// Options are set on a handle before it is activated.
type Options struct {
	Snaplen int           // bytes kept per packet
	Promisc bool          // promiscuous mode
	Timeout time.Duration // packet buffer timeout, and the longest Next waits
	Buffer  int           // kernel buffer in bytes (0: libpcap's default)
}

// Handle is an activated live capture. It is not safe for concurrent use:
// its owner serialises Next, Stats and Close.
type Handle struct {
	p     *C.pcap_t
	msec  C.int
	nanos int64 // nanoseconds per unit of the timestamps' fraction
	pkt   *C.struct_ffpf_pkt
}

// Open creates a capture on device, sets o, activates it with nanosecond
// timestamps where the device gives them, and makes it non-blocking (Next
// then waits with poll, up to o.Timeout). Errors carry libpcap's words; a
// setting libpcap refuses is named ("setting the snap length: …").
func Open(device string, o Options) (*Handle, error) {
	if err := load(); err != nil {
		return nil, err
	}
	dev := C.CString(device)
	defer C.free(unsafe.Pointer(dev))
	errbuf := (*C.char)(C.calloc(C.PCAP_ERRBUF_SIZE, 1))
	defer C.free(unsafe.Pointer(errbuf))
	p := C.ffpf_pcap_create(dev, errbuf)
	if p == nil {
		return nil, errors.New(C.GoString(errbuf))
	}
	promisc := C.int(0)
	if o.Promisc {
		promisc = 1
	}
	msec := C.int(max(o.Timeout.Milliseconds(), 1))
	set := func(what string, rc C.int) error {
		if rc < 0 {
			return &SettingError{What: what, Msg: C.GoString(C.ffpf_pcap_statustostr(rc))}
		}
		return nil
	}
	err := set("snap length", C.ffpf_pcap_set_snaplen(p, C.int(o.Snaplen)))
	if err == nil {
		err = set("promiscuous mode", C.ffpf_pcap_set_promisc(p, promisc))
	}
	if err == nil {
		err = set("read timeout", C.ffpf_pcap_set_timeout(p, msec))
	}
	if err == nil && o.Buffer > 0 {
		err = set("buffer size", C.ffpf_pcap_set_buffer_size(p, C.int(o.Buffer)))
	}
	if err == nil {
		err = set("immediate mode", C.ffpf_pcap_set_immediate_mode(p, 0))
	}
	if err != nil {
		C.ffpf_pcap_close(p)
		return nil, err
	}
	C.ffpf_pcap_set_tstamp_precision(p, C.PCAP_TSTAMP_PRECISION_NANO) // kept at micro where refused
	if rc := C.ffpf_pcap_activate(p); rc != 0 {
		msg := C.GoString(C.ffpf_pcap_geterr(p))
		if msg == "" {
			msg = C.GoString(C.ffpf_pcap_statustostr(rc))
		}
		C.ffpf_pcap_close(p)
		return nil, &ActivateError{Status: Status(rc), Msg: msg}
	}
	if C.ffpf_pcap_setnonblock(p, 1, errbuf) < 0 {
		msg := C.GoString(errbuf)
		C.ffpf_pcap_close(p)
		return nil, &SettingError{What: "non-blocking mode", Msg: msg}
	}
	h := &Handle{p: p, msec: msec, nanos: 1000,
		pkt: (*C.struct_ffpf_pkt)(C.calloc(1, C.sizeof_struct_ffpf_pkt))}
	if C.ffpf_pcap_get_tstamp_precision(p) == C.PCAP_TSTAMP_PRECISION_NANO {
		h.nanos = 1
	}
	return h, nil
}

// SettingError is a setting libpcap refused before or after activation.
type SettingError struct {
	What string // "snap length", "buffer size"…
	Msg  string
}

func (e *SettingError) Error() string { return "setting the " + e.What + ": " + e.Msg }

// LinkType is the capture's DLT_ value (pcap_datalink).
func (h *Handle) LinkType() int { return int(C.ffpf_pcap_datalink(h.p)) }

// Snaplen is the snap length in effect (pcap_snapshot).
func (h *Handle) Snaplen() int { return int(C.ffpf_pcap_snapshot(h.p)) }

// SetDirection sets the direction of the packets captured.
func (h *Handle) SetDirection(d Direction) error {
	if rc := C.ffpf_pcap_setdirection(h.p, C.pcap_direction_t(d)); rc < 0 {
		return &SettingError{What: "direction", Msg: h.geterr(rc)}
	}
	return nil
}

// Next returns the next packet: its captured bytes (in libpcap's buffer,
// valid until the next call), its length on the wire and its time in
// nanoseconds since the epoch. It waits up to the timeout for a packet and
// returns ErrTimeout when none came; a capture error carries libpcap's
// reason.
func (h *Handle) Next() (data []byte, wire uint32, ts int64, err error) {
	switch rc := C.ffpf_next(h.p, h.msec, h.pkt); rc {
	case 1:
		k := h.pkt
		return unsafe.Slice((*byte)(unsafe.Pointer(k.data)), int(k.caplen)), uint32(k.len),
			int64(k.sec)*1e9 + int64(k.frac)*h.nanos, nil
	case 0:
		return nil, 0, 0, ErrTimeout
	case -2: // PCAP_ERROR_BREAK: pcap_breakloop, or the end of a savefile
		return nil, 0, 0, io.EOF
	default:
		return nil, 0, 0, errors.New(h.geterr(rc))
	}
}

// Stats returns the kernel's counters: packets dropped because the buffer
// was full, and packets the interface dropped.
func (h *Handle) Stats() (drop, ifdrop uint64, err error) {
	var st C.struct_pcap_stat
	if C.ffpf_pcap_stats(h.p, &st) < 0 {
		return 0, 0, errors.New(h.geterr(-1))
	}
	return uint64(st.ps_drop), uint64(st.ps_ifdrop), nil
}

// Close closes the capture; the handle is unusable afterwards.
func (h *Handle) Close() {
	if h.p != nil {
		C.ffpf_pcap_close(h.p)
		C.free(unsafe.Pointer(h.pkt))
		h.p, h.pkt = nil, nil
	}
}

// geterr is libpcap's last message on the handle, or the words for rc.
func (h *Handle) geterr(rc C.int) string {
	if msg := C.GoString(C.ffpf_pcap_geterr(h.p)); msg != "" {
		return msg
	}
	return C.GoString(C.ffpf_pcap_statustostr(rc))
}

// Device is one device libpcap can capture on (pcap_findalldevs).
type Device struct {
	Name        string
	Description string
	Flags       uint32 // PCAP_IF_* (loopback, up, running, wireless, connection status)
}

// Devices lists the devices libpcap can capture on, in its order.
func Devices() ([]Device, error) {
	if err := load(); err != nil {
		return nil, err
	}
	errbuf := (*C.char)(C.calloc(C.PCAP_ERRBUF_SIZE, 1))
	defer C.free(unsafe.Pointer(errbuf))
	var all *C.pcap_if_t
	if C.ffpf_pcap_findalldevs(&all, errbuf) < 0 {
		return nil, errors.New(C.GoString(errbuf))
	}
	defer C.ffpf_pcap_freealldevs(all)
	var devs []Device
	for d := all; d != nil; d = d.next {
		devs = append(devs, Device{Name: C.GoString(d.name), Description: C.GoString(d.description), Flags: uint32(d.flags)})
	}
	return devs, nil
}
