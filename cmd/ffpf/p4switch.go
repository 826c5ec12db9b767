//go:build !nogrpc

package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"gopkg.in/yaml.v3"

	"github.com/ffpf-go/ffpf/flowspaces/p4/pisa"
	"github.com/ffpf-go/ffpf/flowspaces/p4/ports"
	"github.com/ffpf-go/ffpf/flowspaces/p4/server"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// switchPort is one --port of ffpf p4 switch.
type switchPort struct {
	num   uint16
	spec  string
	iface *ports.Iface
	in    *ports.FileIn
	out   *ports.FileOut
}

func init() {
	p4Commands = append(p4Commands, p4Command{"switch", p4SwitchSynopsis, cmdP4Switch},
		p4Command{"net", p4NetSynopsis, cmdP4Net})
}

// cmdP4Switch runs the PISA model as a software switch serving
// P4Runtime, as bmv2's simple_switch_grpc does.
func cmdP4Switch(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("p4 switch", p4SwitchSynopsis, stderr)
	addr := fs.String("p4runtime", "", "the address P4Runtime is served on (host:port; port 0 picks one, printed)")
	device := fs.Uint64("device-id", 1, "the device id the controller names")
	cpu := fs.Int("cpu-port", 255, "the CPU port: packets sent to it go to the controller as PacketIn, PacketOuts enter by it")
	resources := fs.String("resources", "", "a YAML file of the switch's per-stage resources (default: a Tofino-1-like profile)")
	queue := fs.Int("queue", 64, "packets an egress queue holds")
	pace := fs.Bool("pace", false, "replay the capture files (file: ports) at the pace of their timestamps, as they were captured, not as fast as the switch takes them")
	var portSpecs, rateSpecs multiFlag
	fs.Var(&portSpecs, "port", "a port: N=IFACE (a network interface), N=file:IN.pcap (a capture replayed into it once a pipeline is pushed, its timestamps the switch's clock) or N=out:OUT.pcap (what leaves it, recorded); repeatable")
	fs.Var(&rateSpecs, "rate", "PORT=PPS: the port's egress queue drains PPS packets a second (default: at once); repeatable")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("ffpf p4 switch takes no argument %q; see 'ffpf p4 switch -h'", pos[0])
	}
	if *addr == "" {
		return usageErrorf("ffpf p4 switch needs --p4runtime ADDR")
	}
	if *device == 0 {
		return usageErrorf("--device-id 0: P4Runtime device ids are not 0")
	}
	if *cpu < 0 || *cpu >= p4gen.DropPort {
		return usageErrorf("--cpu-port %d is not a port of the switch (0 to 510)", *cpu)
	}
	if *queue < 1 || *queue > 1<<20 {
		return usageErrorf("--queue %d is out of range (1 to %d)", *queue, 1<<20)
	}
	prof := p4gen.Tofino1()
	if *resources != "" {
		if prof, err = readProfile(*resources); err != nil {
			return err
		}
	}
	rates := map[uint16]float64{}
	for _, r := range rateSpecs {
		p, v, ok := strings.Cut(r, "=")
		port, err1 := strconv.ParseUint(p, 10, 9)
		pps, err2 := strconv.ParseFloat(v, 64)
		if !ok || err1 != nil || err2 != nil || pps <= 0 || pps > 1e10 || port >= p4gen.DropPort {
			return usageErrorf("--rate %q is not PORT=PPS (a port 0 to 510, a rate above 0)", r)
		}
		rates[uint16(port)] = pps
	}
	var sps []*switchPort
	byNum := map[uint16]*switchPort{}
	for _, s := range portSpecs {
		n, spec, ok := strings.Cut(s, "=")
		num, err := strconv.ParseUint(n, 10, 9)
		if !ok || err != nil || spec == "" || num >= p4gen.DropPort {
			return usageErrorf("--port %q is not N=IFACE, N=file:IN.pcap or N=out:OUT.pcap (N a port 0 to 510)", s)
		}
		if int(num) == *cpu {
			return usageErrorf("--port %d is the CPU port", num)
		}
		if byNum[uint16(num)] != nil {
			return usageErrorf("--port %d is given twice", num)
		}
		sp := &switchPort{num: uint16(num), spec: spec}
		byNum[sp.num], sps = sp, append(sps, sp)
	}
	if len(sps) == 0 {
		return usageErrorf("ffpf p4 switch needs at least one --port")
	}
	defer func() {
		for _, sp := range sps {
			switch {
			case sp.iface != nil:
				sp.iface.Close()
			case sp.in != nil:
				sp.in.Close()
			case sp.out != nil:
				sp.out.Close()
			}
		}
	}()
	for _, sp := range sps {
		switch {
		case strings.HasPrefix(sp.spec, "file:"):
			sp.in, err = ports.OpenFileIn(strings.TrimPrefix(sp.spec, "file:"))
		case strings.HasPrefix(sp.spec, "out:"):
			sp.out, err = ports.CreateFileOut(strings.TrimPrefix(sp.spec, "out:"))
		default:
			sp.iface, err = ports.OpenIface(sp.spec)
		}
		if err != nil {
			return fmt.Errorf("port %d: %v", sp.num, err)
		}
	}

	start := time.Now()
	wall := func() uint64 { return uint64(time.Since(start).Microseconds()) }
	dev := pisa.NewDevice(uint16(*cpu), rates, *queue)
	var mu sync.Mutex
	unrouted := map[uint16]uint64{} // frames sent to a port that is not there, or is a file being replayed
	var clockMu sync.Mutex
	clock := wall // the switch's clock: the replayed file's, else wall time
	dev.Out = func(port uint16, frame []byte) {
		sp := byNum[port]
		switch {
		case sp == nil || sp.in != nil:
			mu.Lock()
			unrouted[port]++
			mu.Unlock()
		case sp.iface != nil:
			sp.iface.Write(frame)
		case sp.out != nil:
			clockMu.Lock()
			t := start.Add(time.Duration(clock()) * time.Microsecond)
			clockMu.Unlock()
			sp.out.Write(frame, t)
		}
	}
	srv := server.New(dev, server.Options{DeviceID: *device, Profile: prof, Now: func() uint64 {
		clockMu.Lock()
		defer clockMu.Unlock()
		return clock()
	}})
	defer srv.Close()
	srv.Log = func(format string, args ...any) { fmt.Fprintf(stderr, "ffpf p4 switch: "+format+"\n", args...) }
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("cannot serve P4Runtime on %s: %v", *addr, err)
	}
	g := grpc.NewServer()
	srv.Register(g)
	served := make(chan error, 1)
	go func() { served <- g.Serve(ln) }()
	var names []string
	for _, sp := range sps {
		names = append(names, fmt.Sprintf("%d=%s", sp.num, sp.spec))
	}
	fmt.Fprintf(stderr, "ffpf p4 switch: device %d serving P4Runtime on %s; ports %s, CPU port %d; no pipeline yet: forwarding nothing until a controller pushes one\n",
		*device, ln.Addr(), strings.Join(names, ", "), *cpu)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	done := make(chan struct{})
	var wg sync.WaitGroup
	readErr := make(chan error, len(sps))
	for _, sp := range sps {
		if sp.iface == nil {
			continue
		}
		wg.Add(1)
		go func(sp *switchPort) {
			defer wg.Done()
			warned := false
			err := sp.iface.Read(done, func(frame []byte) {
				if !warned && !dev.Loaded() {
					warned = true
					fmt.Fprintf(stderr, "ffpf p4 switch: port %d: frames arrive and no pipeline is pushed: dropping them\n", sp.num)
				}
				dev.Receive(sp.num, frame, wall())
			})
			if err != nil {
				readErr <- err
			}
		}(sp)
	}
	var files []*switchPort
	for _, sp := range sps {
		if sp.in != nil {
			files = append(files, sp)
		}
	}
	if len(files) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := replay(files, dev, *pace, done, &clockMu, &clock); err != nil {
				if err != errStopped {
					readErr <- err
				}
			} else {
				fmt.Fprintf(stderr, "ffpf p4 switch: the capture files are replayed\n")
			}
		}()
	} else {
		// Interface ports only: the queues drain on wall time.
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					dev.Advance(wall())
				}
			}
		}()
	}
	// A port whose socket loses frames (the switch fell behind) says so
	// once a second while it does.
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		told := map[uint16]uint64{}
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			for _, sp := range sps {
				if sp.iface == nil {
					continue
				}
				if st := sp.iface.Stats(); st.Lost+st.TooLong > told[sp.num] {
					fmt.Fprintf(stderr, "ffpf p4 switch: port %d: %d frames lost so far (%d while its socket's buffer was full, %d longer than 64 KiB)\n",
						sp.num, st.Lost+st.TooLong, st.Lost, st.TooLong)
					told[sp.num] = st.Lost + st.TooLong
				}
			}
		}
	}()
	var runErr error
	select {
	case <-sigs:
	case err := <-served:
		runErr = fmt.Errorf("serving P4Runtime: %v", err)
	case err := <-readErr:
		runErr = err
	}
	close(done)
	stopped := make(chan struct{})
	go func() { g.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(time.Second):
		g.Stop() // streams stay open until their clients leave
	}
	wg.Wait()
	dev.Flush()
	st := dev.Stats()
	mu.Lock()
	var lost []string
	for p, n := range unrouted {
		lost = append(lost, fmt.Sprintf("%d to port %d", n, p))
	}
	mu.Unlock()
	sort.Strings(lost)
	line := fmt.Sprintf("ffpf p4 switch: %d frames in (%d before a pipeline, %d failed), %d out, %d to the CPU, %d dropped by full queues, %d digests",
		st.In, st.NoPipeline, st.Errors, st.Out, st.ToCPU, st.QueueDrops, st.Digests)
	if len(lost) > 0 {
		line += "; sent nowhere: " + strings.Join(lost, ", ")
	}
	fmt.Fprintln(stderr, line)
	for _, sp := range sps {
		if sp.iface != nil {
			ps := sp.iface.Stats()
			fmt.Fprintf(stderr, "ffpf p4 switch: port %d (%s): %d frames read, %d lost while its socket's buffer was full, %d longer than 64 KiB; %d refused on sending\n",
				sp.num, sp.spec, ps.Received, ps.Lost, ps.TooLong, ps.Errors)
		}
	}
	for _, sp := range sps {
		if sp.out != nil {
			if err := sp.out.Close(); err != nil && runErr == nil {
				runErr = fmt.Errorf("port %d: %v", sp.num, err)
			}
			sp.out = nil
		}
	}
	return runErr
}

// errStopped is replay's when the switch stops before the files are
// replayed.
var errStopped = errors.New("stopped")

// replay feeds the capture files' frames to the switch in time order,
// once a pipeline is pushed; their timestamps are the switch's clock (µs
// since one before the first frame: a switch's time is never 0 at a
// packet, MAFIA's unset timestamp, as on ffpf p4 net's path). With pace,
// a frame enters when as much wall time has passed since the first as
// its timestamp says. Then it sends what the queues hold.
func replay(files []*switchPort, dev *pisa.Device, pace bool, done <-chan struct{}, clockMu *sync.Mutex, clock *func() uint64) error {
	for !dev.Loaded() {
		select {
		case <-done:
			return errStopped
		case <-time.After(10 * time.Millisecond):
		}
	}
	type head struct {
		sp    *switchPort
		frame []byte
		t     time.Time
		ok    bool
	}
	heads := make([]head, len(files))
	var base time.Time
	for i, sp := range files {
		f, t, err := sp.in.Next()
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		heads[i] = head{sp, bytes.Clone(f), t, err == nil}
		if err == nil && (base.IsZero() || t.Before(base)) {
			base = t
		}
	}
	var now uint64
	clockMu.Lock()
	*clock = func() uint64 { return now }
	clockMu.Unlock()
	began := time.Now()
	for {
		select {
		case <-done:
			return errStopped
		default:
		}
		best := -1
		for i, h := range heads {
			if h.ok && (best < 0 || h.t.Before(heads[best].t)) {
				best = i
			}
		}
		if best < 0 {
			dev.Flush()
			return nil
		}
		h := &heads[best]
		since := max(0, h.t.Sub(base))
		if wait := since - time.Since(began); pace && wait > 0 {
			select {
			case <-done:
				return errStopped
			case <-time.After(wait):
			}
		}
		t := uint64(since.Microseconds()) + 1
		clockMu.Lock()
		now = t
		clockMu.Unlock()
		dev.Receive(h.sp.num, h.frame, t)
		f, ts, err := h.sp.in.Next()
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		h.frame, h.t, h.ok = bytes.Clone(f), ts, err == nil
	}
}

// readProfile reads a resource profile (p4gen.Profile's fields, YAML);
// a field out of range is a usage error naming it.
func readProfile(path string) (p4gen.Profile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return p4gen.Profile{}, fmt.Errorf("--resources: %v", err)
	}
	prof := p4gen.Tofino1()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&prof); err != nil && !errors.Is(err, io.EOF) {
		return p4gen.Profile{}, usageErrorf("--resources %s: %v", path, err)
	}
	if err := prof.Validate(); err != nil {
		return p4gen.Profile{}, usageErrorf("--resources %s: %v", path, err)
	}
	return prof, nil
}
