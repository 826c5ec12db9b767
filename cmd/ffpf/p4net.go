//go:build !nogrpc

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/ffpf-go/ffpf/flowspaces/p4/p4net"
	"github.com/ffpf-go/ffpf/functions"
)

// cmdP4Net runs a path of model switches (p4net): each switch's section
// of the MAFIA program pushed over its own P4Runtime, the trace played
// through, the functions' state read at the end.
func cmdP4Net(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("p4 net", p4NetSynopsis, stderr)
	prog := fs.String("mafia", "", "the MAFIA program the switches run (default: the file's program:)")
	ctrl := fs.String("ctrl", "", "the packets of the program's ctrl stream (a capture `FILE`)")
	asJSON := fs.Bool("json", false, "print what each switch's functions measured as JSON")
	quiet := fs.Duration("quiet", time.Second, "with switches that run elsewhere (p4runtime:): the run ends once packets crossed them and their port counters stood still for a `DURATION` (or on SIGINT)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("ffpf p4 net needs one network FILE.yaml; see 'ffpf p4 net -h'")
	}
	cfg, err := p4net.Load(pos[0])
	if err != nil {
		if fe := (*functions.FileError)(nil); errors.As(err, &fe) && !fe.Refused {
			return err
		}
		return &exitError{2, err}
	}
	if *quiet <= 0 {
		return usageErrorf("--quiet %v: the switches are quiet for a time above 0", *quiet)
	}
	quietSet := false
	fs.Visit(func(f *flag.Flag) { quietSet = quietSet || f.Name == "quiet" })
	if !cfg.Elsewhere() && quietSet {
		return usageErrorf("--quiet is for switches that run elsewhere (p4runtime: in %s); a network in this process ends with its trace", pos[0])
	}
	if *prog == "" {
		*prog = cfg.ProgramPath()
	}
	if *prog == "" {
		return usageErrorf("%s names no program: give program: FILE.mafia in it, or --mafia FILE", pos[0])
	}
	res, err := compileMafia(*prog, *ctrl)
	if err != nil {
		return err
	}
	var secs []p4net.Section
	for _, r := range res.Requests {
		if err := bindAll(*prog, r); err != nil {
			return err
		}
		secs = append(secs, p4net.Section{Role: r.Role, Req: r.Req, Copies: r.Copies})
	}
	progs, err := p4net.Programs(cfg, secs, nil)
	if err != nil {
		return &exitError{2, fmt.Errorf("%s: %v", *prog, err)}
	}
	var out *p4net.Result
	var stats string
	if cfg.Elsewhere() {
		intr := catchInterrupts()
		defer intr.stop()
		intr.started()
		out, err = p4net.RunElsewhere(cfg, progs, p4net.RunOptions{Quiet: *quiet, Stop: intr.ctx.Done(),
			Logf: func(format string, args ...any) { fmt.Fprintf(stderr, "ffpf p4 net: "+format+"\n", args...) }})
		if err != nil {
			return err
		}
		stats = out.PortStats()
	} else {
		n, err := p4net.Start(cfg, nil)
		if err != nil {
			return err
		}
		defer n.Close()
		if out, err = p4net.Run(n, progs, p4net.RunOptions{}); err != nil {
			return err
		}
		if err := n.Close(); err != nil {
			return err
		}
		stats = n.Stats()
	}
	if *asJSON {
		b, err := out.JSON()
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", b)
		return err
	}
	fmt.Fprint(stdout, stats)
	for _, s := range out.Switches {
		role := ""
		if s.Role != "" {
			role = " (" + s.Role + ")"
		}
		fmt.Fprintf(stdout, "%s%s: %d copies to the controller\n", s.Name, role, s.Copies)
		for _, f := range s.Functions {
			name := f.ID
			if f.Label != "" {
				name = f.Label + ":" + f.ID
			}
			fmt.Fprintf(stdout, "  %s: %d in, %d out", name, f.In, f.Out)
			if len(f.Summary) > 0 {
				keys := make([]string, 0, len(f.Summary))
				for k := range f.Summary {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					fmt.Fprintf(stdout, " %s=%v", k, f.Summary[k])
				}
			}
			fmt.Fprintln(stdout)
		}
	}
	return nil
}
