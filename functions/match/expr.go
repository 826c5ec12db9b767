package match

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// The predicate language. Grammar, loosest binding first:
//
//	pred    = and { ("or" | "||") and }
//	and     = not { ("and" | "&&") not }
//	not     = ("not" | "!") not | cmp
//	cmp     = sum [ ("==" | "=" | "!=" | "<" | "<=" | ">" | ">=") sum ] | sum "in" ADDRESS[/LEN]
//	sum     = product { ("+" | "-") product }
//	product = unary { ("*" | "/" | "%" | "&" | "|") unary }
//	unary   = "-" unary | "(" pred ")" | NUMBER | ADDRESS | MAC | FIELD | LAYER | LABEL.NAME
//	        | FUNC "(" sum { "," sum } ")"
//
// FUNC is max(a, b), min(a, b) or bloom(M, K, v…) (the M-bit mask of a
// Bloom filter that holds one element, the values v…: functions.go).
//
// A comparison is the only thing that turns numbers into a truth value,
// and a layer name (tcp, ipv6, vlan…) is true when the packet has it.

// node is a parsed predicate.
type node struct {
	op   string // or and not == != < <= > >= in + - * / % & | neg num addr field layer state call
	pos  int    // byte offset in the predicate
	kids []*node

	name  string       // field, layer, call; state: label and name as written
	label string       // state
	isInt bool         // num
	i     int64        // num (int), MAC
	f     float64      // num (float)
	pfx   netip.Prefix // addr; a plain address has its full length
	plain bool         // addr written without /LEN
}

type token struct {
	text string
	pos  int
	word bool
}

type parser struct {
	src  string
	toks []token
	at   int
	// names are bare words that name a value the caller gives (a
	// register's old): node "name", read from env.vars.
	names []string
}

// Error is a predicate that does not parse or check.
type Error struct {
	Pos int // byte offset in the predicate
	Msg string
}

func (e *Error) Error() string { return e.Msg }

func errAt(pos int, format string, a ...any) error {
	return &Error{Pos: pos, Msg: fmt.Sprintf(format, a...)}
}

func wordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == ':'
}

// dottedQuad and macRE are compiled at their first use, not at start-up.
var dottedQuad = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$`) })

func lex(s string) ([]token, error) {
	var toks []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case wordByte(c):
			j := i
			for j < len(s) && wordByte(s[j]) {
				j++
			}
			w := s[i:j]
			if j < len(s) && s[j] == '/' && (strings.Contains(w, ":") || dottedQuad().MatchString(w)) {
				j++
				for j < len(s) && s[j] >= '0' && s[j] <= '9' {
					j++
				}
			}
			toks = append(toks, token{s[i:j], i, true})
			i = j
		default:
			op := ""
			for _, o := range []string{"==", "!=", "<=", ">=", "&&", "||", "(", ")", "<", ">", "=", "!", "+", "-", "*", "/", "%", "&", "|", ","} {
				if strings.HasPrefix(s[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return nil, errAt(i, "unexpected %q at offset %d", s[i:i+1], i)
			}
			toks = append(toks, token{op, i, false})
			i += len(op)
		}
	}
	return append(toks, token{"", len(s), false}), nil
}

// parse parses a predicate.
func parse(src string) (*node, error) { return parseNames(src, nil) }

// parseNames parses an expression that may also use the bare words of
// names.
func parseNames(src string, names []string) (*node, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	if len(toks) == 1 {
		return nil, errAt(0, "the predicate is empty")
	}
	p := &parser{src: src, toks: toks, names: names}
	n, err := p.or()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.text != "" {
		return nil, errAt(t.pos, "unexpected %q at offset %d: an operator (and, or, ==, <, +, …) or the end was expected", t.text, t.pos)
	}
	return n, nil
}

func (p *parser) peek() token { return p.toks[p.at] }
func (p *parser) next() token { t := p.toks[p.at]; p.at++; return t }

func (p *parser) is(words ...string) bool { return slices.Contains(words, p.peek().text) }

func (p *parser) binary(sub func() (*node, error), ops map[string]string) (*node, error) {
	l, err := sub()
	if err != nil {
		return nil, err
	}
	for {
		op, ok := ops[p.peek().text]
		if !ok {
			return l, nil
		}
		t := p.next()
		r, err := sub()
		if err != nil {
			return nil, err
		}
		l = &node{op: op, pos: t.pos, kids: []*node{l, r}}
	}
}

func (p *parser) or() (*node, error) {
	return p.binary(p.and, map[string]string{"or": "or", "||": "or"})
}

func (p *parser) and() (*node, error) {
	return p.binary(p.not, map[string]string{"and": "and", "&&": "and"})
}

func (p *parser) not() (*node, error) {
	if p.is("not", "!") {
		t := p.next()
		x, err := p.not()
		if err != nil {
			return nil, err
		}
		return &node{op: "not", pos: t.pos, kids: []*node{x}}, nil
	}
	return p.cmp()
}

var cmpOps = map[string]string{"==": "==", "=": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}

func (p *parser) cmp() (*node, error) {
	l, err := p.sum()
	if err != nil {
		return nil, err
	}
	t := p.peek()
	if t.text == "in" {
		p.next()
		a := p.next()
		if !a.word {
			return nil, errAt(a.pos, "in takes an address prefix (10.0.0.0/8, 2001:db8::/32) at offset %d", a.pos)
		}
		r, err := p.word(a)
		if err != nil {
			return nil, err
		}
		if r.op != "addr" {
			return nil, errAt(a.pos, "in takes an address prefix (10.0.0.0/8, 2001:db8::/32), not %q", a.text)
		}
		return &node{op: "in", pos: t.pos, kids: []*node{l, r}}, nil
	}
	op, ok := cmpOps[t.text]
	if !ok {
		return l, nil
	}
	p.next()
	r, err := p.sum()
	if err != nil {
		return nil, err
	}
	if u := p.peek(); cmpOps[u.text] != "" || u.text == "in" {
		return nil, errAt(u.pos, "comparisons do not chain (offset %d): write a < b and b < c", u.pos)
	}
	return &node{op: op, pos: t.pos, kids: []*node{l, r}}, nil
}

func (p *parser) sum() (*node, error) {
	return p.binary(p.product, map[string]string{"+": "+", "-": "-"})
}

func (p *parser) product() (*node, error) {
	return p.binary(p.unary, map[string]string{"*": "*", "/": "/", "%": "%", "&": "&", "|": "|"})
}

func (p *parser) unary() (*node, error) {
	t := p.next()
	switch {
	case t.text == "-":
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &node{op: "neg", pos: t.pos, kids: []*node{x}}, nil
	case t.text == "(":
		x, err := p.or()
		if err != nil {
			return nil, err
		}
		if u := p.next(); u.text != ")" {
			return nil, errAt(u.pos, "missing ) at offset %d, for the ( at offset %d", u.pos, t.pos)
		}
		return x, nil
	case t.word && calls[t.text] != nil && p.peek().text == "(":
		return p.call(t)
	case t.word:
		return p.word(t)
	case t.text == "":
		return nil, errAt(t.pos, "the predicate ends where a value was expected")
	}
	return nil, errAt(t.pos, "unexpected %q at offset %d: a value was expected", t.text, t.pos)
}

var macRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-fA-F]{1,2}(:[0-9a-fA-F]{1,2}){5}$`) })

var keywords = map[string]bool{"and": true, "or": true, "not": true, "in": true}

// word is a value written as a word: a number, an address, a MAC, a
// field, a layer, or named state.
func (p *parser) word(t token) (*node, error) {
	w, n := t.text, &node{pos: t.pos}
	if i := slices.Index(p.names, w); i >= 0 {
		n.op, n.name, n.i = "name", w, int64(i)
		return n, nil
	}
	switch {
	case keywords[w]:
		return nil, errAt(t.pos, "unexpected %q at offset %d: a value was expected", w, t.pos)
	case macRE().MatchString(w):
		var b [6]byte
		for i, x := range strings.Split(w, ":") {
			v, _ := strconv.ParseUint(x, 16, 8)
			b[i] = byte(v)
		}
		n.op, n.isInt = "num", true
		for _, x := range b {
			n.i = n.i<<8 | int64(x)
		}
		return n, nil
	case strings.Contains(w, ":") || dottedQuad().MatchString(strings.SplitN(w, "/", 2)[0]):
		n.op = "addr"
		if strings.Contains(w, "/") {
			pf, err := netip.ParsePrefix(w)
			if err != nil {
				return nil, errAt(t.pos, "bad address prefix %q", w)
			}
			if pf.Masked() != pf {
				return nil, errAt(t.pos, "%s has bits set beyond its /%d (did you mean %s?)", w, pf.Bits(), pf.Masked())
			}
			n.pfx = pf
			return n, nil
		}
		a, err := netip.ParseAddr(w)
		if err != nil || a.Zone() != "" {
			return nil, errAt(t.pos, "bad address %q (IPv4 10.0.0.1, IPv6 2001:db8::1, MAC 00:11:22:33:44:55)", w)
		}
		n.pfx, n.plain = netip.PrefixFrom(a, a.BitLen()), true
		return n, nil
	case w[0] >= '0' && w[0] <= '9':
		return number(t)
	case strings.Contains(w, "."):
		label, name, _ := strings.Cut(w, ".")
		if _, ok := fields[w]; ok {
			n.op, n.name = "field", w
			return n, nil
		}
		if protocols[label] {
			return nil, unknownField(t.pos, w)
		}
		if s := misspelt(label, name); s != "" {
			return nil, errAt(t.pos, "unknown field %s (did you mean %s?)", w, s)
		}
		if name == "" || strings.Contains(name, ".") || label == "" {
			return nil, errAt(t.pos, "%q is neither a packet field nor named state (LABEL.NAME)", w)
		}
		n.op, n.name, n.label = "state", name, label
		return n, nil
	}
	if _, ok := layers[w]; ok {
		n.op, n.name = "layer", w
		return n, nil
	}
	return nil, unknownField(t.pos, w)
}

func unknownField(pos int, w string) error {
	all := append(FieldNames(), layerNames()...)
	if s := near(w, all); s != "" {
		return errAt(pos, "unknown field %s (did you mean %s?)", w, s)
	}
	return errAt(pos, "unknown field %s: fields are %s; layers %s; named state is LABEL.NAME", w,
		strings.Join(FieldNames(), " "), strings.Join(layerNames(), " "))
}

func layerNames() []string {
	var s []string
	for n := range layers {
		s = append(s, n)
	}
	slices.Sort(s)
	return s
}

// misspelt returns the field label.name means when label is a misspelt
// protocol (tpc.dport): a label that looks like a protocol and is
// followed by one of its fields is taken for a typo, not named state.
func misspelt(label, name string) string {
	for _, f := range FieldNames() {
		p, n, _ := strings.Cut(f, ".")
		if n == name && distance(label, p) <= 1 && len(label) > 1 {
			return f
		}
	}
	return ""
}

// near returns the name of names closest to w, if close enough to be
// what was meant.
func near(w string, names []string) string {
	best, bd := "", 3
	for _, n := range names {
		if d := distance(w, n); d < bd {
			best, bd = n, d
		}
	}
	return best
}

// distance is the edit distance with transpositions (optimal string
// alignment): tpc is one edit from tcp.
func distance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+c)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

var units = map[string]float64{"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30,
	"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}

// number parses a number with an optional unit: 80, 0x1f, 0.01, 1.5K,
// 125KB, 100ms. A whole value is an integer, exactly; others are floats.
func number(t token) (*node, error) {
	w, n := t.text, &node{op: "num", pos: t.pos}
	if strings.HasPrefix(w, "0x") || strings.HasPrefix(w, "0X") {
		v, err := strconv.ParseUint(w[2:], 16, 64)
		if err != nil || v > math.MaxInt64 {
			return nil, errAt(t.pos, "bad hexadecimal number %q", w)
		}
		n.isInt, n.i = true, int64(v)
		return n, nil
	}
	i := strings.IndexFunc(w, func(r rune) bool { return r != '.' && (r < '0' || r > '9') })
	if i < 0 {
		i = len(w)
	}
	digits, unit := w[:i], w[i:]
	mult, ok := units[unit]
	if !ok {
		return nil, errAt(t.pos, "%q has an unknown unit %q (K M G, KB MB GB, ns us ms s)", w, unit)
	}
	if !strings.Contains(digits, ".") {
		v, err := strconv.ParseInt(digits, 10, 64)
		if err == nil && (mult == 1 || v <= math.MaxInt64/int64(mult)) {
			n.isInt, n.i = true, v*int64(mult)
			return n, nil
		}
	}
	f, err := strconv.ParseFloat(digits, 64)
	if err != nil {
		return nil, errAt(t.pos, "bad number %q", w)
	}
	f *= mult
	if f == math.Trunc(f) && math.Abs(f) < 1<<62 {
		n.isInt, n.i = true, int64(f)
		return n, nil
	}
	n.f = f
	return n, nil
}

// labels returns the labels of the named state n reads, in order of
// first use.
func (n *node) labels(out []string) []string {
	if n.op == "state" && !slices.Contains(out, n.label) {
		out = append(out, n.label)
	}
	for _, k := range n.kids {
		out = k.labels(out)
	}
	return out
}

// refs returns the named state n reads, as LABEL.NAME, in order of first
// use.
func (n *node) refs(out []string) []string {
	if n.op == "state" && !slices.Contains(out, n.label+"."+n.name) {
		out = append(out, n.label+"."+n.name)
	}
	for _, k := range n.kids {
		out = k.refs(out)
	}
	return out
}

// headers says whether n reads packet headers (anything beyond pkt.*).
func (n *node) headers() bool {
	if n.op == "layer" || n.op == "field" && !strings.HasPrefix(n.name, "pkt.") {
		return true
	}
	return slices.ContainsFunc(n.kids, (*node).headers)
}

var errNoBool = errors.New("not a truth value")
