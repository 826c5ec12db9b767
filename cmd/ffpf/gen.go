package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ffpf-go/ffpf/functions/dev"
	"github.com/ffpf-go/ffpf/functions/gen"
)

const genSynopsis = `(-o FILE | -i IFACE [--tx packet|xdp] [--pool N] [--pps N] [-o SENT.pcap]) [--packets N] [--seed N] [--malformed F] [--vlan F] [--ipv6 F] [--flows N]

Writes a synthetic, deterministic trace (classic pcap, Ethernet): the same
flags give the same bytes. The traffic mixes TCP, UDP, ICMP and ARP over IPv4
and IPv6, some of it VLAN-tagged, with heavy-tailed flow sizes; --malformed
adds truncated and malformed frames. "-o -" writes to standard output.

With -i it transmits the trace on the interface instead (root), paced at
--pps packets per second or as fast as the interface takes them; frames the
interface refuses (too long for its MTU) are skipped and counted. -o then
records the frames that went out, for comparison. --tx packet (the default)
writes each frame to an AF_PACKET socket (~1 Mpps on a veth); --tx xdp has
the kernel send them through XDP live frames (Linux 5.18; several Mpps): the
trace's first --pool frames (default min(--packets, 8192)) go out in order
and, with more --packets, again and again. On a veth, XDP frames only reach a
peer that has an XDP program attached or GRO on (ethtool -K PEER gro on): gen
refuses to send otherwise, and warns if the peer took fewer frames than sent.`

func cmdGen(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("gen", genSynopsis, stderr)
	out := fs.String("o", "", "write the trace to `FILE`")
	packets := fs.Int64("packets", 1000000, "number of packets")
	seed := fs.Uint64("seed", 1, "random seed")
	malformed := fs.Float64("malformed", 0, "fraction of truncated and malformed frames (0..1)")
	vlan := fs.Float64("vlan", 0.05, "fraction of VLAN-tagged frames (0..1)")
	ipv6 := fs.Float64("ipv6", 0.2, "fraction of IPv6 among IP packets (0..1)")
	flows := fs.Int("flows", 10000, "number of distinct flows")
	snaplen := fs.Int("s", 0, "snap length recorded in the file header (0: the longest frame generated)")
	iface := fs.String("i", "", "transmit the trace on `IFACE` instead of writing it")
	pps := fs.Float64("pps", 0, "packets per second: with -i, sent (0: top speed); with -o alone, the rate of the trace's timestamps (0: 1,000,000)")
	tx := fs.String("tx", "packet", "with -i: how to transmit, `packet|xdp`: AF_PACKET or XDP live frames")
	pool := fs.Int("pool", 0, "with --tx xdp: distinct frames sent, then repeated (0: min(--packets, 8192))")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return usageErrorf("gen takes no arguments (did you mean -o %s?)", pos[0])
	case *out == "" && *iface == "":
		return usageErrorf("gen needs -o FILE or -i IFACE")
	case *pps < 0:
		return usageErrorf("--pps must be positive (0: top speed)")
	case *packets <= 0:
		return usageErrorf("--packets must be positive")
	case *flows <= 0:
		return usageErrorf("--flows must be positive")
	case *tx != "packet" && *tx != "xdp":
		return usageErrorf("--tx must be packet or xdp")
	case *pool != 0 && *tx != "xdp":
		return usageErrorf("--pool goes with --tx xdp")
	case *pool < 0 || *pool > gen.MaxXDPPool:
		return usageErrorf("--pool must be between 1 and %d (0: the default)", gen.MaxXDPPool)
	}
	for name, f := range map[string]float64{"malformed": *malformed, "vlan": *vlan, "ipv6": *ipv6} {
		if f < 0 || f > 1 {
			return usageErrorf("--%s must be between 0 and 1", name)
		}
	}
	cfg := gen.Config{Seed: *seed, Packets: *packets, Malformed: *malformed, VLAN: *vlan, IPv6: *ipv6, Flows: *flows}
	if *iface == "" {
		cfg.Rate = *pps // the timestamps'; the frames are the same at any rate
	}
	if *iface != "" {
		if err := dev.Exists(*iface); err != nil {
			return &exitError{2, err} // as run -i says it
		}
		return transmit(*iface, *out, cfg, *pps, *tx == "xdp", *pool, stderr)
	}

	var w io.Writer = stdout
	var f *os.File
	if *out != "-" {
		if f, err = os.Create(*out); err != nil {
			return err
		}
		w = f
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	err = gen.WritePcap(bw, cfg, *snaplen)
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", *out, err)
	}
	return nil
}

// transmit sends the trace on iface (through XDP or AF_PACKET) and, with
// out, records what went out.
func transmit(iface, out string, cfg gen.Config, pps float64, xdp bool, pool int, stderr io.Writer) error {
	var record func([]byte, time.Time) error
	var f *os.File
	var bw *bufio.Writer
	if out != "" {
		var err error
		if f, err = os.Create(out); err != nil {
			return err
		}
		defer f.Close()
		bw = bufio.NewWriterSize(f, 1<<20)
		pw, err := gen.NewPcapWriter(bw, gen.MaxFrameLen)
		if err != nil {
			return err
		}
		record = func(b []byte, ts time.Time) error { return pw.Write(b, len(b), ts.UnixNano()) }
	}
	start := time.Now()
	var n, skipped int64
	var err error
	if xdp {
		n, skipped, err = gen.TransmitXDP(iface, cfg, pps, pool, record)
	} else {
		n, skipped, err = gen.Transmit(iface, cfg, pps, record)
	}
	// A peer that took only part of the frames is worth a warning, not a
	// failure: the frames did go out; it is the receiver that overflowed.
	var loss *gen.PeerLossError
	if errors.As(err, &loss) && loss.Received > 0 {
		fmt.Fprintf(stderr, "ffpf gen: warning: %v\n", err)
		err = nil
	}
	if bw != nil {
		if ferr := bw.Flush(); err == nil {
			err = ferr
		}
	}
	el := time.Since(start)
	fmt.Fprintf(stderr, "sent %d packets on %s in %v (%.0f pps); %d refused by the interface\n",
		n, iface, el.Round(time.Millisecond), float64(n)/el.Seconds(), skipped)
	return err
}
