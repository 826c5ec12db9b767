package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/ffpf-go/ffpf/functions/gen"
)

const genSynopsis = `(-o FILE | -i IFACE [--pps N] [-o SENT.pcap]) [--packets N] [--seed N] [--malformed F] [--vlan F] [--ipv6 F] [--flows N]

Writes a synthetic, deterministic trace (classic pcap, Ethernet): the same
flags give the same bytes. The traffic mixes TCP, UDP, ICMP and ARP over IPv4
and IPv6, some of it VLAN-tagged, with heavy-tailed flow sizes; --malformed
adds truncated and malformed frames. "-o -" writes to standard output.

With -i it transmits the trace on the interface instead (AF_PACKET; root),
paced at --pps packets per second or as fast as the interface takes them;
frames the interface refuses (too long for its MTU) are skipped and
counted. -o then records the frames that went out, for comparison.`

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
	pps := fs.Float64("pps", 0, "with -i: packets per second (0: top speed)")
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
	}
	for name, f := range map[string]float64{"malformed": *malformed, "vlan": *vlan, "ipv6": *ipv6} {
		if f < 0 || f > 1 {
			return usageErrorf("--%s must be between 0 and 1", name)
		}
	}
	cfg := gen.Config{Seed: *seed, Packets: *packets, Malformed: *malformed, VLAN: *vlan, IPv6: *ipv6, Flows: *flows}
	if *iface != "" {
		return transmit(*iface, *out, cfg, *pps, stderr)
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

// transmit sends the trace on iface and, with out, records what went out.
func transmit(iface, out string, cfg gen.Config, pps float64, stderr io.Writer) error {
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
		pw := pcapgo.NewWriter(bw)
		if err := pw.WriteFileHeader(gen.MaxFrameLen, layers.LinkTypeEthernet); err != nil {
			return err
		}
		record = func(b []byte, ts time.Time) error {
			return pw.WritePacket(gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(b), Length: len(b)}, b)
		}
	}
	start := time.Now()
	n, skipped, err := gen.Transmit(iface, cfg, pps, record)
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
