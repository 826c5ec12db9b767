package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/lang"
	"github.com/ffpf-go/ffpf/lang/mafia"
)

const mafiaUsage = `Usage: ffpf mafia check [--ctrl FILE] FILE...

MAFIA programs (lang/mafia, examples/mafia/README.md). A program also runs
where an expression does: ffpf run --mafia FILE, ffpf place --mafia FILE,
ffpf p4 build --mafia FILE [--role ROLE].
`

const mafiaCheckSynopsis = `[--ctrl FILE] FILE...

Checks each MAFIA program (syntax, declarations, types, streams, where each
state is updated and read) and prints the ffpf request it becomes, one line
(a program with sections: one line per role, after "# at ROLE:"). Each
request's functions are checked as ffpf check checks them, but not placed:
a program may read a switch's metadata (pkt.output_port, queue lengths,
switch.id), which only a switch has (pkt.input_port a host has too: the
source's position among its sources, from 1). An error is FILE:LINE:COLUMN, one sentence and the line
with a caret (exit status 2). A FILE must be a regular file of at most
1 MiB.`

func cmdMafia(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, mafiaUsage)
		return &exitError{2, fmt.Errorf("mafia needs a command: check")}
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "check":
		return cmdMafiaCheck(rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, mafiaUsage)
		return nil
	default:
		hint := ""
		if s, ok := lang.Suggest(cmd, []string{"check"}); ok {
			hint = fmt.Sprintf(" (did you mean %q?)", s)
		}
		return usageErrorf("unknown mafia command %q%s; see 'ffpf mafia help'", cmd, hint)
	}
}

func cmdMafiaCheck(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("mafia check", mafiaCheckSynopsis, stderr)
	ctrl := fs.String("ctrl", "", "the packets of the ctrl stream (a capture `FILE`)")
	files, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return usageErrorf("mafia check needs a FILE; see 'ffpf mafia check -h'")
	}
	for _, f := range files {
		res, err := compileMafia(f, *ctrl)
		if err != nil {
			return err
		}
		for _, r := range res.Requests {
			if err := bindAll(f, r); err != nil {
				return err
			}
			if r.Role != "" {
				fmt.Fprintf(stdout, "# at %s:\n", r.Role)
			}
			fmt.Fprintln(stdout, r.Expr())
		}
	}
	return nil
}

// mafiaError is an error in a MAFIA program: the file, then the
// positioned error (whose caret report prints).
type mafiaError struct {
	file string
	err  *lang.Error
}

func (e *mafiaError) Error() string { return e.file + ":" + e.err.Error() }
func (e *mafiaError) Unwrap() error { return e.err }

// compileMafia reads, parses and compiles the program in path, with ctrl
// (a capture file, or "") as the ctrl stream's packets.
func compileMafia(path, ctrl string) (*mafia.Result, error) {
	data, err := functions.ReadFile(path, "a MAFIA program")
	if fe := (*functions.FileError)(nil); errors.As(err, &fe) && !fe.Refused {
		return nil, err // it cannot be opened: a runtime error
	}
	if err != nil {
		return nil, &exitError{2, err}
	}
	p, err := mafia.Parse(string(data))
	var res *mafia.Result
	if err == nil {
		o := mafia.Options{}
		if ctrl != "" {
			o.Ctrl = "(pcap,file=" + strconv.Quote(ctrl) + ")"
		}
		res, err = mafia.Compile(p, o)
	}
	var le *lang.Error
	if errors.As(err, &le) {
		return nil, &exitError{2, &mafiaError{path, le}}
	}
	if err != nil {
		return nil, &exitError{2, fmt.Errorf("%s: %v", path, err)}
	}
	return res, nil
}

// bindAll checks the parameters of each function of r as its class does,
// and reports a refusal at the step of the program the function comes
// from.
func bindAll(path string, r *mafia.Request) error {
	i := 0
	var walk func([]*lang.Chain) error
	walk = func(cs []*lang.Chain) error {
		for _, ch := range cs {
			for _, t := range ch.Terms {
				switch t := t.(type) {
				case *lang.Group:
					if err := walk(t.Chains); err != nil {
						return err
					}
				case *lang.Func:
					at := i
					i++
					c, ok := functions.Default.Lookup(t.Class)
					if !ok {
						return fmt.Errorf("%s: the request names class %s, which this ffpf lacks", path, t.Class)
					}
					var args []functions.Arg
					for _, a := range t.Args {
						args = append(args, functions.Arg{Key: a.Key, Value: functions.Raw{Kind: functions.RawKind(a.Value.Kind), Text: a.Value.Text, Unit: a.Value.Unit}})
					}
					if _, err := c.Bind(args); err != nil {
						pos := r.Origins[at]
						return &exitError{2, fmt.Errorf("%s:%s: %s: %v (in %s)", path, pos, t.Class, err, r.Expr())}
					}
				}
			}
		}
		return nil
	}
	return walk(r.Req.Chains)
}

// mafiaRequest returns the request of the program that o names (--mafia,
// with --role for a program with sections), and keeps it so that an error
// populating it points into the program (mafiaPlace).
func (o *runOptions) mafiaRequest() (string, error) {
	res, err := compileMafia(o.mafia, o.ctrl)
	if err != nil {
		return "", err
	}
	var roles []string
	for _, r := range res.Requests {
		if r.Role == o.role {
			o.compiled = r
			return r.Expr(), nil
		}
		roles = append(roles, r.Role)
	}
	if o.role == "" {
		return "", usageErrorf("%s runs on a path of switches (sections at %s): give --role, or run it with ffpf p4 net", o.mafia, strings.Join(roles, ", "))
	}
	if roles[0] == "" {
		return "", usageErrorf("%s has no sections: --role %s names none", o.mafia, o.role)
	}
	return "", usageErrorf("%s has no section at %s (it has %s)", o.mafia, o.role, strings.Join(roles, ", "))
}

// mafiaPlace turns an error about the compiled request expr (positioned in
// its text) into one about the program: the step its function comes from,
// the program's line under the caret, the request after.
func (o *runOptions) mafiaPlace(expr string, err error) error {
	var le *lang.Error
	if o.compiled == nil || expr != o.compiled.Expr() || !errors.As(err, &le) || le.Src != expr {
		return err
	}
	data, rerr := functions.ReadFile(o.mafia, "a MAFIA program")
	if rerr != nil {
		return err
	}
	i, n := -1, 0
	var walk func([]*lang.Chain)
	walk = func(cs []*lang.Chain) {
		for _, ch := range cs {
			for _, t := range ch.Terms {
				switch t := t.(type) {
				case *lang.Group:
					walk(t.Chains)
				case *lang.Func:
					if t.Pos.Offset <= le.Pos.Offset {
						i = n
					}
					n++
				}
			}
		}
	}
	walk(o.compiled.Req.Chains)
	if i < 0 || i >= len(o.compiled.Origins) || o.compiled.Origins[i].Line == 0 {
		return err
	}
	msg := le.Msg + " (in the request " + expr + ")"
	pe := &lang.Error{Pos: o.compiled.Origins[i], Msg: msg, Src: string(data)}
	return &exitError{2, &mafiaError{o.mafia, pe}}
}
