package main

import (
	"fmt"
	"io"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/lang/p4"
)

const p4CheckSynopsis = `FILE...

Checks each FILE, a P4_16 program for v1model in the subset that ffpf's P4
back end prints, with ffpf's own checker (not p4c): syntax, names declared
before use, bit widths, v1model's externs and their arguments, constant
register and counter indices, tables and their actions, parser
transitions and V1Switch's six blocks. Prints one summary line a file and
exits 0, or prints every error as file:line:col with a caret and exits 2;
a file that cannot be read, or is larger than 1 MiB, exits 2 too.`

func cmdP4Check(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("p4 check", p4CheckSynopsis, stderr)
	files, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return usageErrorf("p4 check needs a FILE; see 'ffpf p4 check -h'")
	}
	nerr, bad := 0, 0
	for _, f := range files {
		data, err := functions.ReadFile(f, "a P4 source")
		if err != nil {
			if len(files) == 1 {
				return &exitError{2, err}
			}
			fmt.Fprintf(stderr, "ffpf: %v\n", err)
			nerr++
			bad++
			continue
		}
		src := string(data)
		prog, err := p4.Parse(f, src)
		var chk *p4.Checked
		if err == nil {
			chk, err = p4.Check(f, src, prog)
		}
		if err != nil {
			errs, ok := err.(p4.ErrorList)
			if !ok {
				errs = p4.ErrorList{err.(*p4.Error)}
			}
			fmt.Fprint(stderr, errs.Format())
			nerr += len(errs)
			bad++
			continue
		}
		fmt.Fprintf(stdout, "%s: ok (%s)\n", f, summary(chk, data))
	}
	if nerr > 0 {
		return &exitError{2, fmt.Errorf("p4 check: %d %s in %d of %d %s", nerr, plural(nerr, "error", "errors"), bad, len(files), plural(len(files), "file", "files"))}
	}
	return nil
}

// summary counts what a checked program declares.
func summary(c *p4.Checked, src []byte) string {
	var headers, states, registers, counters, tables, actions int
	for _, d := range c.Prog.Decls {
		switch d := d.(type) {
		case *p4.HeaderDecl:
			headers++
		case *p4.ParserDecl:
			states += len(d.States)
		}
	}
	for _, sym := range c.Objects {
		switch sym.Kind {
		case p4.SymTable:
			tables++
		case p4.SymAction:
			actions++
		case p4.SymInstance:
			if sym.Type.Name == "register" {
				registers++
			} else {
				counters++
			}
		}
	}
	return fmt.Sprintf("%d header types, %d parser states, %d tables, %d actions, %d registers, %d counters; %d lines of P4",
		headers, states, tables, actions, registers, counters, p4.Lines(src))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
