package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/trumpet/event"
	"github.com/ffpf-go/ffpf/functions/trumpet/monitor"
	"github.com/ffpf-go/ffpf/lang"
)

const trumpetUsage = `Usage: ffpf trumpet check [--epoch DURATION] [--words N] [-e EVENT]... [FILE]...

Trumpet event definitions (functions/trumpet/event/README.md).
`

const trumpetCheckSynopsis = `[--epoch DURATION] [--words N] [-e EVENT]... [FILE]...

Validates the Trumpet events of each FILE (YAML with an events: list, or one
event a line) and of each -e EVENT (the one-line form
'name: filter; predicate; granularity; interval') and prints each event in
its canonical one-line form, one a line (the -e events first, then each
file's in order): the output is itself an event file. An interval must be a positive multiple of the epoch; an event
name may be defined once across all inputs; an event may need at most the
summary words a flow keeps (--words, the trumpet class's words=). A definition error is reported
as file:line and one sentence (exit status 2). A FILE must be a regular file
of at most 1 MiB: a directory, a device or a FIFO is refused at once (exit
status 2); a file that cannot be opened exits with status 1.`

func cmdTrumpet(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, trumpetUsage)
		return &exitError{2, fmt.Errorf("trumpet needs a command: check")}
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "check":
		return cmdTrumpetCheck(rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		// check is the one command: its usage, flags and all
		fs, _, _, _ := trumpetCheckFlags(stdout)
		fs.help()
		return nil
	default:
		hint := ""
		if s, ok := lang.Suggest(cmd, []string{"check"}); ok {
			hint = fmt.Sprintf(" (did you mean %q?)", s)
		}
		return usageErrorf("unknown trumpet command %q%s; see 'ffpf trumpet help'", cmd, hint)
	}
}

// trumpetCheckFlags is trumpet check's flag set, its help written to w.
func trumpetCheckFlags(w io.Writer) (fs *flagSet, epoch *string, words *int, lines *multiFlag) {
	fs = newFlagSet("trumpet check", trumpetCheckSynopsis, w)
	epoch = fs.String("epoch", event.IntervalString(event.DefaultEpoch), "the monitor's epoch, of which every interval is a multiple (at least 100us, as the class's epoch=)")
	words = fs.Int("words", 16, "the summary words a flow keeps, as the trumpet class's words= (1 to 54)")
	lines = new(multiFlag)
	fs.Var(lines, "e", "an event in the one-line form (repeatable)")
	return fs, epoch, words, lines
}

func cmdTrumpetCheck(args []string, stdout, stderr io.Writer) error {
	fs, epoch, words, linesp := trumpetCheckFlags(stderr)
	files, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	ep, err := event.ParseInterval(*epoch)
	if err == nil {
		err = event.CheckEpoch(ep) // as the class's epoch=
	}
	if err != nil {
		return usageErrorf("--epoch %s: %v", *epoch, err)
	}
	if *words < 1 || *words > monitor.MaxUnits {
		return usageErrorf("--words %d: a flow keeps 1 to %d summary words", *words, monitor.MaxUnits)
	}
	lines := *linesp
	if len(files) == 0 && len(lines) == 0 {
		return usageErrorf("trumpet check needs a FILE or -e EVENT; see 'ffpf trumpet check -h'")
	}
	var evs []event.Event
	for i, l := range lines {
		ev, err := event.ParseLine(l)
		ev.Pos = event.Pos{File: "-e", Line: i + 1} // the i-th -e, read as file:line
		if err != nil {
			return &exitError{2, fmt.Errorf("%s: %v", ev.Pos, err)}
		}
		evs = append(evs, ev)
	}
	for _, f := range files {
		fe, err := event.ParseFile(f)
		if fileErr := (*functions.FileError)(nil); errors.As(err, &fileErr) && !fileErr.Refused {
			return err // it cannot be opened: a runtime error
		}
		if err != nil {
			return &exitError{2, err}
		}
		evs = append(evs, fe...)
	}
	if err := event.ValidateAll(evs, ep); err != nil {
		return &exitError{2, err}
	}
	for i := range evs { // what the monitor refuses, the class refuses: its summary words
		if err := monitor.Check(&evs[i], int64(ep), *words); err != nil {
			return &exitError{2, fmt.Errorf("%s: %v", evs[i].Pos, err)}
		}
	}
	for _, ev := range evs {
		fmt.Fprintln(stdout, ev.String())
	}
	return nil
}
