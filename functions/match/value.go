package match

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

// Expr is an expression of the predicate language compiled for another
// class: a number (a register's set=, a tag's value=, a sketch's value=)
// or a condition (a register's if=), over packet fields, annotations and
// named state, and the bare names its class gives values to (a
// register's old). It is compiled once and evaluated per packet without
// allocating; one Expr serves one goroutine (the function's lock).
type Expr struct {
	i    intFn
	b    boolFn
	env  env
	vars []int64
}

// CheckExpr parses and type-checks expr as a number (cond false) or a
// condition (cond true), with names as bare words; named state is
// assumed to be a number, as at populate.
func CheckExpr(expr string, cond bool, names ...string) error {
	n, err := parseNames(expr, names)
	if err != nil {
		return err
	}
	v, err := compileNode(n, checkState)
	if err != nil {
		return err
	}
	return kindOf(n, v, cond)
}

func kindOf(n *node, v val, cond bool) error {
	if cond && v.k != kBool {
		return errAt(n.pos, "%q is %s, not a condition: compare it (x > 0)", exprText(n), kindName[v.k])
	}
	if !cond && !numeric(v.k) {
		return errAt(n.pos, "%q is %s, not a number", exprText(n), kindName[v.k])
	}
	return nil
}

func exprText(n *node) string {
	if n.name != "" {
		return n.name
	}
	return n.op
}

// Refs returns the named state expr reads, as LABEL.NAME (for the
// class's Reads).
func Refs(expr string, names ...string) ([]string, error) {
	n, err := parseNames(expr, names)
	if err != nil {
		return nil, err
	}
	return n.refs(nil), nil
}

// OnSwitch returns the first field of a switch's metadata expr reads
// (pkt.inport, switch.id …), or "": a function that reads one runs on a
// switch only.
func OnSwitch(expr string, names ...string) string {
	n, err := parseNames(expr, names)
	if err != nil {
		return ""
	}
	return n.switchField()
}

func (n *node) switchField() string {
	if n.op == "field" && fields[n.name].sw {
		return n.name
	}
	for _, k := range n.kids {
		if f := k.switchField(); f != "" {
			return f
		}
	}
	return ""
}

// UserRuns is a class's Runs for the user target when its expression
// (the parameters named) may read a switch's metadata.
func UserRuns(t functions.Target, p functions.Params, names []string, params ...string) error {
	if t != functions.TargetUser {
		return nil
	}
	for _, name := range params {
		if !p.Has(name) {
			continue
		}
		if f := OnSwitch(p.Str(name), names...); f != "" {
			return fmt.Errorf("it reads %s, which a switch has and a host does not: it runs on a switch", f)
		}
	}
	return nil
}

// NewExpr compiles expr for the function of ctx (whose state readers it
// resolves), over packets of its link type.
func NewExpr(ctx *functions.Context, expr string, cond bool, names ...string) (*Expr, error) {
	n, err := parseNames(expr, names)
	if err != nil {
		return nil, err
	}
	v, err := compileNode(n, readState(ctx))
	if err != nil {
		return nil, err
	}
	if err := kindOf(n, v, cond); err != nil {
		return nil, err
	}
	x := &Expr{env: env{lt: ctx.LinkType}, vars: make([]int64, len(names))}
	x.env.vars = x.vars
	if cond {
		x.b = v.b
	} else {
		x.i = v.asInt().i
	}
	return x, nil
}

// Set gives the i-th name the value v for the evaluations that follow.
func (x *Expr) Set(i int, v int64) { x.vars[i] = v }

// Int evaluates a number on slot i of p: false when the packet lacks a
// field it needs (or a quotient is not whole).
func (x *Expr) Int(p *buffers.PBuf, i uint32) (int64, bool) {
	x.env.set(p, i)
	return x.i(&x.env)
}

// Bool evaluates a condition on slot i of p.
func (x *Expr) Bool(p *buffers.PBuf, i uint32) bool {
	x.env.set(p, i)
	return x.b(&x.env)
}

// Field returns the name of the packet field expr is, when it is one
// (value=ipv4.id), else "".
func Field(expr string) string {
	e := strings.TrimSpace(expr)
	if _, ok := fields[e]; ok && !slices.Contains([]string{"pkt.ts"}, e) {
		return e
	}
	return ""
}
