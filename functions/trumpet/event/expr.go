package event

import (
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The predicate, by precedence from loosest to tightest:
//
//	predicate = and { "or" and } .
//	and       = cmp { "and" cmp } .
//	cmp       = sum [ ("<"|"<="|">"|">="|"=="|"!=") sum ] .   // not chained
//	sum       = term { ("+"|"-") term } .
//	term      = unary { ("*"|"/") unary } .
//	unary     = "-" unary | number [unit] | agg | state | "(" predicate ")" .
//	agg       = func "(" [ var [ "&" var ] ] ")" .               // count() only is empty
//	state     = ("ack"|"seq"|"dup") [ "_lastepoch" ] .
//
// A unary minus before a number is part of the number (Num(-5)); before
// anything else it is 0 - x.

// Functions are the aggregate functions of a predicate.
var Functions = []string{"sum", "count", "max", "min", "avg", "stddev"}

// Variables are Table 1's per-packet variables.
var Variables = []string{"volume", "ecn", "rwnd", "ttl", "rtt", "is_lost", "is_burst", "ack", "seq", "dup"}

// Flags are the variables that are 0 or 1 per packet, which '&' joins inside
// an aggregate: sum(is_lost & is_burst) counts packets both lost and in a
// burst.
var Flags = []string{"ecn", "is_lost", "is_burst"}

// StateVars are the per-flow variables a predicate may read bare, without an
// aggregate: the value at the end of the interval (ack) or at the end of the
// previous one (ack_lastepoch), as Table 2's congestion event does.
var StateVars = []string{"ack", "seq", "dup"}

// LastEpoch is the suffix of a state variable's previous-interval value.
const LastEpoch = "_lastepoch"

// units are the multipliers a number in a predicate may carry. Sizes are
// decimal (125KB is 125000 bytes, as the paper's "125 KB as 10% of a 1G link
// in 10 ms" needs); KiB, MiB and GiB are binary. Times are in nanoseconds
// (rtt > 1ms is rtt > 1000000). % is a hundredth.
var units = map[string]struct {
	exp  int     // a power of ten, applied exactly to the decimal
	mult float64 // or a multiplier, when exp is 0
}{
	"%": {exp: -2}, "K": {exp: 3}, "M": {exp: 6}, "G": {exp: 9},
	"B": {mult: 1}, "KB": {exp: 3}, "MB": {exp: 6}, "GB": {exp: 9}, "TB": {exp: 12},
	"KiB": {mult: 1 << 10}, "MiB": {mult: 1 << 20}, "GiB": {mult: 1 << 30},
	"ns": {mult: 1}, "us": {exp: 3}, "µs": {exp: 3}, "ms": {exp: 6}, "s": {exp: 9},
}

func unitNames() []string {
	return []string{"%", "K", "M", "G", "B", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "ns", "us", "ms", "s"}
}

// ParsePredicate parses a predicate and checks every function, variable and
// unit it names.
func ParsePredicate(s string) (Expr, error) {
	p := &exprParser{src: s}
	if err := p.lex(); err != nil {
		return nil, err
	}
	if len(p.toks) == 1 {
		return nil, errorf("an empty predicate (such as sum(volume) > 125KB)")
	}
	e, err := p.or(0)
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, errorf("predicate %q: unexpected %q after a complete expression", short(s), t.text)
	}
	return e, nil
}

type tokKind int

const (
	tEOF tokKind = iota
	tNum
	tIdent
	tOp
)

type token struct {
	kind tokKind
	text string
	num  float64
}

type exprParser struct {
	src  string
	toks []token
	i    int
}

// maxDepth bounds nesting so a hostile predicate cannot exhaust the stack.
const maxDepth = 200

func (p *exprParser) lex() error {
	s := p.src
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c >= '0' && c <= '9' || c == '.':
			j := i
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '.') {
				j++
			}
			k := j
			if k < len(s) && s[k] == '%' {
				k++
			} else {
				for k < len(s) && (isLetter(s[k]) || s[k] >= 0x80 || k > j && s[k] >= '0' && s[k] <= '9') {
					k++
				}
			}
			v, err := number(s[i:j], s[j:k])
			if err != nil {
				return err
			}
			p.toks = append(p.toks, token{kind: tNum, text: s[i:k], num: v})
			i = k
		case isLetter(c):
			j := i
			for j < len(s) && (isLetter(s[j]) || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			p.toks = append(p.toks, token{kind: tIdent, text: strings.ToLower(s[i:j])})
			i = j
		default:
			op := ""
			for _, o := range []string{"<=", ">=", "==", "!=", "&&", "||", "<", ">", "+", "-", "*", "/", "(", ")", "&", "=", "!", "|", ","} {
				if strings.HasPrefix(s[i:], o) {
					op = o
					break
				}
			}
			switch op {
			case "":
				r, _ := utf8.DecodeRuneInString(s[i:])
				return errorf("predicate %q: unexpected character %q", short(s), r)
			case "=":
				return errorf("predicate %q: compare with == (a single = is not an operator)", short(s))
			case "&&", "||", "!", "|":
				return errorf("predicate %q: %s is not an operator; write and, or, and != for not equal", short(s), op)
			}
			p.toks = append(p.toks, token{kind: tOp, text: op})
			i += len(op)
		}
	}
	p.toks = append(p.toks, token{kind: tEOF, text: "end"})
	return nil
}

func isLetter(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// number converts digits with a unit; decimal units scale the decimal text
// exactly ("0.1KB" is 100, not 100.00000000000001).
func number(digits, unit string) (float64, error) {
	if strings.Count(digits, ".") > 1 || digits == "." {
		return 0, errorf("%q is not a number", digits+unit)
	}
	u, ok := units[unit]
	if len(unit) > 1 && (unit[0] == 'e' || unit[0] == 'E') && unit[1] >= '0' && unit[1] <= '9' {
		return 0, errorf("%s%s: write the exponent as a unit (K, M, G) or in full", digits, unit)
	}
	if unit != "" && !ok {
		return 0, unknown("unit", unit, unitNames())
	}
	text := digits
	if u.exp != 0 {
		text += "e" + strconv.Itoa(u.exp)
	}
	v, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, errorf("%s%s is not a finite number", digits, unit)
	}
	if u.mult != 0 {
		v *= u.mult
		if math.IsInf(v, 0) {
			return 0, errorf("%s%s is not a finite number", digits, unit)
		}
	}
	// The canonical form writes v in full: it must be the number written,
	// scaled exactly, or a threshold would print back (and be compared
	// as) another one. 15 significant digits always are.
	want, _ := new(big.Rat).SetString(text)
	if u.mult != 0 {
		want.Mul(want, new(big.Rat).SetFloat64(u.mult))
	}
	if got, _ := new(big.Rat).SetString(strconv.FormatFloat(v, 'f', -1, 64)); got.Cmp(want) != 0 {
		return 0, errorf("%s%s has more significant digits than a threshold keeps (it would be %s): write at most 15",
			digits, unit, strconv.FormatFloat(v, 'f', -1, 64))
	}
	return v, nil
}

func (p *exprParser) peek() token { return p.toks[p.i] }

func (p *exprParser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *exprParser) isOp(ops ...string) (string, bool) {
	t := p.peek()
	if t.kind != tOp && t.kind != tIdent {
		return "", false
	}
	for _, o := range ops {
		if t.text == o {
			return o, true
		}
	}
	return "", false
}

func (p *exprParser) deep(d int) error {
	if d > maxDepth {
		return errorf("predicate is nested deeper than %d", maxDepth)
	}
	return nil
}

func (p *exprParser) or(d int) (Expr, error) {
	if err := p.deep(d); err != nil {
		return nil, err
	}
	l, err := p.and(d)
	for err == nil {
		if _, ok := p.isOp("or"); !ok {
			break
		}
		p.next()
		var r Expr
		if r, err = p.and(d); err == nil {
			l = Binary{"or", l, r}
		}
	}
	return l, err
}

func (p *exprParser) and(d int) (Expr, error) {
	l, err := p.cmp(d)
	for err == nil {
		if _, ok := p.isOp("and"); !ok {
			break
		}
		p.next()
		var r Expr
		if r, err = p.cmp(d); err == nil {
			l = Binary{"and", l, r}
		}
	}
	return l, err
}

var cmpOps = []string{"<", "<=", ">", ">=", "==", "!="}

func (p *exprParser) cmp(d int) (Expr, error) {
	l, err := p.sum(d)
	if err != nil {
		return nil, err
	}
	op, ok := p.isOp(cmpOps...)
	if !ok {
		return l, nil
	}
	p.next()
	r, err := p.sum(d)
	if err != nil {
		return nil, err
	}
	if op2, ok := p.isOp(cmpOps...); ok {
		return nil, errorf("predicate %q chains comparisons (%s then %s); join them with and", short(p.src), op, op2)
	}
	return Binary{op, l, r}, nil
}

func (p *exprParser) sum(d int) (Expr, error) {
	l, err := p.term(d)
	for err == nil {
		op, ok := p.isOp("+", "-")
		if !ok {
			break
		}
		p.next()
		var r Expr
		if r, err = p.term(d); err == nil {
			l = Binary{op, l, r}
		}
	}
	return l, err
}

func (p *exprParser) term(d int) (Expr, error) {
	l, err := p.unary(d)
	for err == nil {
		op, ok := p.isOp("*", "/")
		if !ok {
			break
		}
		p.next()
		var r Expr
		if r, err = p.unary(d); err == nil {
			l = Binary{op, l, r}
		}
	}
	return l, err
}

func (p *exprParser) unary(d int) (Expr, error) {
	if err := p.deep(d); err != nil {
		return nil, err
	}
	t := p.next()
	switch t.kind {
	case tNum:
		return Num(t.num), nil
	case tIdent:
		return p.ident(t)
	case tEOF:
		return nil, errorf("predicate %q ends where a value is expected", short(p.src))
	}
	switch t.text {
	case "-":
		if n := p.peek(); n.kind == tNum {
			p.next()
			return Num(-n.num), nil
		}
		x, err := p.unary(d + 1)
		if err != nil {
			return nil, err
		}
		return Binary{"-", Num(0), x}, nil
	case "(":
		e, err := p.or(d + 1)
		if err != nil {
			return nil, err
		}
		if t := p.next(); t.text != ")" || t.kind != tOp {
			return nil, errorf("predicate %q: a '(' is not closed", short(p.src))
		}
		return e, nil
	}
	return nil, errorf("predicate %q: unexpected %q where a value is expected", short(p.src), t.text)
}

func (p *exprParser) ident(t token) (Expr, error) {
	name := t.text
	if n := p.peek(); n.kind == tOp && n.text == "(" {
		if !contains(Functions, name) {
			return nil, unknown("function", name, Functions)
		}
		p.next()
		a := Agg{Func: name}
		if v := p.peek(); v.kind != tIdent && (v.kind != tOp || v.text != ")") {
			return nil, errorf("%s( takes a variable name, as in %s(volume), not %q", name, name, v.text)
		}
		if v := p.peek(); v.kind == tIdent {
			p.next()
			a.Var = v.text
			if base, ok := strings.CutSuffix(a.Var, LastEpoch); ok && contains(StateVars, base) {
				a.Var, a.Prev = base, true
			}
			if o := p.peek(); o.kind == tOp && o.text == "&" {
				p.next()
				v2 := p.next()
				if v2.kind != tIdent {
					return nil, errorf("predicate %q: & joins two variables, as in sum(is_lost & is_burst)", short(p.src))
				}
				a.And = v2.text
			}
		}
		if c := p.next(); c.kind != tOp || c.text != ")" {
			if c.text == "&" {
				return nil, errorf("%s(...) joins at most two variables with &", name)
			}
			return nil, errorf("predicate %q: %s( is not closed after its variable", short(p.src), name)
		}
		return a, checkAgg(a)
	}
	if contains(Functions, name) {
		return nil, errorf("%s is a function: write %s(variable)", name, name)
	}
	a := Agg{Var: name}
	if base, ok := strings.CutSuffix(name, LastEpoch); ok {
		a.Var, a.Prev = base, true
	}
	if contains(Variables, a.Var) && !contains(StateVars, a.Var) {
		return nil, errorf("%s is a per-packet variable: aggregate it, as in sum(%s) or max(%s)", name, a.Var, a.Var)
	}
	return a, checkAgg(a)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// stateNames are the bare names a predicate accepts, for suggestions.
func stateNames() []string {
	var out []string
	for _, v := range StateVars {
		out = append(out, v, v+LastEpoch)
	}
	return out
}

// checkAgg checks an aggregate's function and variables.
func checkAgg(a Agg) error {
	if a.Func == "" {
		if !contains(StateVars, a.Var) {
			return unknown("variable", a.Var+map[bool]string{true: LastEpoch}[a.Prev],
				append(append([]string{}, Variables...), stateNames()...))
		}
		if a.And != "" {
			return errorf("%s is a bare state variable and joins nothing with &", a.Var)
		}
		return nil
	}
	if !contains(Functions, a.Func) {
		return unknown("function", a.Func, Functions)
	}
	if a.Prev {
		if contains(StateVars, a.Var) {
			return errorf("%s(%s%s): a %s value is read bare, without an aggregate", a.Func, a.Var, LastEpoch, LastEpoch)
		}
		return errorf("%s(%s): only the state variables ack, seq and dup have a %s value", a.Func, a.Var, LastEpoch)
	}
	if a.Func == "count" {
		if a.Var != "" {
			return errorf("count() counts packets and takes no variable; sum(%s) counts the packets where a flag is set", a.Var)
		}
		return nil
	}
	if a.Var == "" {
		return errorf("%s() needs a variable, such as %s(volume)", a.Func, a.Func)
	}
	for _, v := range []string{a.Var, a.And} {
		if v != "" && !contains(Variables, v) {
			return unknown("variable", v, Variables)
		}
	}
	if a.And != "" && (!contains(Flags, a.Var) || !contains(Flags, a.And)) {
		return errorf("%s(%s & %s): & joins only the flags %s", a.Func, a.Var, a.And, strings.Join(Flags, ", "))
	}
	return nil
}

// ExprString prints e canonically: operators spaced, numbers in full
// ("125000", not "125KB"), parentheses only where the tree needs them.
func ExprString(e Expr) string {
	var b strings.Builder
	writeExpr(&b, e)
	return b.String()
}

func prec(op string) int {
	switch op {
	case "or":
		return 1
	case "and":
		return 2
	case "<", "<=", ">", ">=", "==", "!=":
		return 3
	case "+", "-":
		return 4
	case "*", "/":
		return 5
	}
	return 6
}

func writeExpr(b *strings.Builder, e Expr) {
	switch e := e.(type) {
	case Num:
		b.WriteString(strconv.FormatFloat(float64(e), 'f', -1, 64))
	case Agg:
		b.WriteString(e.String())
	case Binary:
		p := prec(e.Op)
		// The left operand needs parentheses when it binds more loosely, or
		// as tightly for a comparison (comparisons do not chain); the right
		// one also when it binds as tightly (operators group to the left).
		lp, rp := false, false
		if l, ok := e.L.(Binary); ok {
			q := prec(l.Op)
			lp = q < p || q == p && p == 3
		}
		if r, ok := e.R.(Binary); ok {
			rp = prec(r.Op) <= p
		}
		writeSide(b, e.L, lp)
		b.WriteString(" " + e.Op + " ")
		writeSide(b, e.R, rp)
	default:
		b.WriteString("?")
	}
}

func writeSide(b *strings.Builder, e Expr, paren bool) {
	if paren {
		b.WriteByte('(')
	}
	writeExpr(b, e)
	if paren {
		b.WriteByte(')')
	}
}

// String prints "sum(volume)", "count()", "sum(is_lost & is_burst)", "ack"
// or "ack_lastepoch".
func (a Agg) String() string {
	if a.Func == "" {
		if a.Prev {
			return a.Var + LastEpoch
		}
		return a.Var
	}
	if a.And != "" {
		return a.Func + "(" + a.Var + " & " + a.And + ")"
	}
	return a.Func + "(" + a.Var + ")"
}
