package measure

import (
	"errors"
	"fmt"

	"github.com/ffpf-go/ffpf/functions"
)

// HashParam is hash= of the classes that position keys by their hashes
// (cms, hll, pcsa, bloom, store, a keyed counter or register). With
// hash=switch a function in userspace is its switch half: the switch's
// layout, crc32 and crc16 of the key's words and flowkey.P4Index, so
// that it keeps, cell for cell, what the same function keeps on a switch
// (a MAFIA program gives one result wherever it runs).
var HashParam = functions.Param{Name: "hash", Type: functions.String, Default: "own", Enum: []string{"own", "switch"},
	Summary: "own: the flowspace's (flowkey's 64-bit hash on a host, crc32 and crc16 on a switch); switch: a P4 switch's positions and layout in userspace too, which keep what the switch keeps cell for cell (userspace or a switch; no window= or report= in userspace)"}

// SwitchHashed reports whether the function ctx instantiates positions
// keys as a switch does: it runs on one, or was asked to (hash=switch).
func SwitchHashed(ctx *functions.Context) bool {
	return ctx.Target == functions.TargetP4 || switchHash(ctx.Params)
}

// switchHash reports whether p asks for a switch's positions (a class
// without hash= never does).
func switchHash(p functions.Params) bool { return set(p, "hash") && p.Str("hash") == "switch" }

// set reports whether p's class declares the parameter name and p sets it.
func set(p functions.Params, name string) bool {
	if c := p.Class(); c == nil {
		return false
	} else if _, ok := c.Param(name); !ok {
		return false
	}
	return p.Has(name)
}

// SwitchLayout is the State.As of those classes: with hash=switch a
// function keeps a switch's layout wherever it runs.
func SwitchLayout(t functions.Target, p functions.Params) functions.Target {
	if switchHash(p) {
		return functions.TargetP4
	}
	return t
}

// SwitchHashRuns says why a function with hash=switch and parameters p
// cannot run in a flowspace of target t (not a switch), with extra the
// class's own refusals on a switch.
func SwitchHashRuns(t functions.Target, p functions.Params, extra func(functions.Params) error) error {
	if !switchHash(p) || t == functions.TargetP4 {
		return nil
	}
	switch {
	case t == functions.TargetKernel || t == functions.TargetXDP:
		return errors.New("hash=switch runs in userspace or on a switch: eBPF positions keys by flowkey's hash")
	case set(p, "window"):
		return errors.New("window= with hash=switch runs on a switch (MAFIA's incremental reset of the switch's layout), not in userspace")
	case set(p, "report") && Reports(p):
		return errors.New("report= with hash=switch runs on a switch or with hash=own: the switch's half of a function keeps no report")
	case extra != nil:
		if err := extra(p); err != nil {
			return fmt.Errorf("hash=switch: %w", err)
		}
	}
	return nil
}

// SwitchHashOrdering: the switch's layout is kept by one pipeline, and a
// function that takes it keeps one copy (its fields are not merged).
var SwitchHashOrdering = functions.Ordering{When: "hash=switch",
	If:  switchHash,
	Why: "it keeps the switch's layout, one copy, as the switch's one pipeline does"}
