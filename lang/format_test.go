package lang

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestValueString(t *testing.T) {
	for _, tt := range []struct {
		v    Value
		want string
	}{
		{Value{Kind: Word, Text: "eth0"}, `eth0`},
		{Value{Kind: Word, Text: "10.0.0.1"}, `10.0.0.1`},
		{Value{Kind: Word, Text: "日本"}, `日本`},
		{Value{Kind: Word, Text: ""}, `""`},
		{Value{Kind: Word, Text: "5"}, `"5"`},
		{Value{Kind: Word, Text: "-1.5ms"}, `"-1.5ms"`},
		{Value{Kind: Word, Text: "a b"}, `"a b"`},
		{Value{Kind: Word, Text: "x#y"}, `"x#y"`},
		{Value{Kind: Word, Text: "fe80::1"}, `"fe80::1"`},
		{Value{Kind: Word, Text: "a\x01"}, `"a\x01"`},
		{Value{Kind: Word, Text: "\xff"}, `"\xff"`},
		{Value{Kind: String, Text: "tcp and dst port 80"}, `"tcp and dst port 80"`},
		{Value{Kind: String, Text: "eth0"}, `"eth0"`},
		{Value{Kind: String, Text: "a\"b\n"}, `"a\"b\n"`},
		{Value{Kind: Number, Text: "64", Unit: "KB"}, `64KB`},
		{Value{Kind: Number, Text: "-0.5"}, `-0.5`},
		{Value{Kind: Number, Text: "1", Unit: "kb"}, `"1kb"`}, // not a number: kept as text
		{Value{Kind: Number, Text: "1K", Unit: "B"}, `"1KB"`}, // would re-lex as 1 KB
	} {
		if got := tt.v.String(); got != tt.want {
			t.Errorf("%+v.String() = %s, want %s", tt.v, got, tt.want)
		}
	}
}

// A word that cannot be printed as a word is quoted and comes back as a
// String, which Equal treats as the same value.
func TestFormatQuotesBadWords(t *testing.T) {
	for _, w := range []string{"", "5", "1ms", "a b", "x#y", "a:b", "(", "a,b", "é\u00a0", "\ufeff"} {
		r := &Request{Chains: []*Chain{{Terms: []Term{&Func{Class: "f", Args: []*Arg{{Key: "k", Value: Value{Kind: Word, Text: w}}}}}}}}
		out := Format(r)
		r2, err := Parse(out)
		if err != nil {
			t.Errorf("word %q: Parse(%s): %v", w, out, err)
			continue
		}
		if !Equal(r, r2) {
			t.Errorf("word %q: %s does not round-trip", w, out)
		}
	}
}

func TestEqual(t *testing.T) {
	p := func(s string) *Request {
		r, err := Parse(s)
		if err != nil {
			t.Fatalf("Parse(%q): %v", s, err)
		}
		return r
	}
	for _, tt := range []struct {
		a, b string
		eq   bool
	}{
		{paper, "[[(DEV,expr=eth0) | (dev,expr=eth1)]>(bpf,expr=\"tcp and dst port 80\")]>[(pktcount)|(bytecount)]", true},
		{`(a,x=eth0)`, `(a,x="eth0")`, true},
		{`(a,x=5)`, `(a,x="5")`, false},
		{`(a,x=5ms)`, `(a,x=5s)`, false},
		{`(a,x=1.50)`, `(a,x=1.5)`, false},
		{`(a,x=1)`, `(a,y=1)`, false},
		{`(a,1)`, `(a,x=1)`, false},
		{`(a)`, `(b)`, false},
		{`x:(a)`, `(a)`, false},
		{`x:(a)`, `X:(a)`, false},
		{`[(a)]`, `(a)`, false},
		{`[(a)|(b)]`, `[(a)|(c)]`, false},
		{`[(a)|(b)]`, `[(a)|(b)|(c)]`, false},
		{`x`, `y`, false},
		{`x`, `x:(a)`, false},
		{`(a);(b)`, `(a)>(b)`, false},
		{`(a);(b)`, `(a)`, false},
	} {
		if got := Equal(p(tt.a), p(tt.b)); got != tt.eq {
			t.Errorf("Equal(%s, %s) = %v", tt.a, tt.b, got)
		}
	}
	if !Equal(nil, nil) || Equal(p("(a)"), nil) {
		t.Error("Equal with nil")
	}
}

// corpus is every valid input the tests know.
func corpus() []string {
	c := []string{
		paper,
		"x:(bpf,expr=\"tcp\") > (pktcount); x > (bytecount)",
		"a:[b:(x) > c:[(y)|d] | e] > f:(z,\"\\\\\",q=\"\\t\") ; d:(w) > b",
	}
	for _, tt := range validTests {
		c = append(c, tt.in)
	}
	return c
}

func TestRoundTripCorpus(t *testing.T) {
	for _, in := range corpus() {
		r, err := Parse(in)
		if err != nil {
			t.Errorf("Parse(%q): %v", in, err)
			continue
		}
		roundTrip(t, r)
	}
}

// roundTrip checks Format → Parse gives an equal request with the same value
// kinds, and that Format is idempotent.
func roundTrip(t *testing.T, r *Request) {
	t.Helper()
	out := Format(r)
	r2, err := Parse(out)
	if err != nil {
		t.Errorf("Parse(Format(...)) of %q: %v", out, err)
		return
	}
	if !Equal(r, r2) {
		t.Errorf("Format round trip not Equal:\n %s\n %s", dumpFold(r, true), dumpFold(r2, true))
		return
	}
	if a, b := dumpFold(r, true), dumpFold(r2, true); a != b {
		t.Errorf("Format round trip changed kinds:\n %s\n %s", a, b)
	}
	if out2 := Format(r2); out2 != out {
		t.Errorf("Format not idempotent:\n %s\n %s", out, out2)
	}
}

type gen struct {
	rnd    *rand.Rand
	labels []string
}

var (
	wordRunes   = []rune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._/~!@$%^&*{}<'\\+`?éß日本😀\u200b")
	stringRunes = []rune("ab \"\\\n\t\r\x00\x7f#:;,()[]|>=é日😀\u2028\ufeff")
	units       = []string{"", "ns", "us", "ms", "s", "m", "h", "B", "KB", "MB", "GB", "K", "M", "G"}
)

func (g *gen) word() string {
	for {
		n := 1 + g.rnd.IntN(8)
		rs := make([]rune, n)
		for i := range rs {
			rs[i] = wordRunes[g.rnd.IntN(len(wordRunes))]
		}
		if s := string(rs); isWord(s) {
			return s
		}
	}
}

func (g *gen) digits() string {
	b := make([]byte, 1+g.rnd.IntN(4))
	for i := range b {
		b[i] = byte('0' + g.rnd.IntN(10))
	}
	return string(b)
}

func (g *gen) value() Value {
	switch g.rnd.IntN(3) {
	case 0:
		return Value{Kind: Word, Text: g.word()}
	case 1:
		var b strings.Builder
		for range g.rnd.IntN(8) {
			if g.rnd.IntN(10) == 0 {
				b.WriteByte(0xff) // strings may hold any bytes, through escapes
			} else {
				b.WriteRune(stringRunes[g.rnd.IntN(len(stringRunes))])
			}
		}
		return Value{Kind: String, Text: b.String()}
	}
	text := g.digits()
	if g.rnd.IntN(3) == 0 {
		text = "-" + text
	}
	if g.rnd.IntN(3) == 0 {
		text += "." + g.digits()
	}
	return Value{Kind: Number, Text: text, Unit: units[g.rnd.IntN(len(units))]}
}

func (g *gen) label() string {
	if g.rnd.IntN(3) > 0 {
		return ""
	}
	l := g.word()
	g.labels = append(g.labels, l)
	return l
}

func (g *gen) term(depth int) Term {
	switch k := g.rnd.IntN(10); {
	case k < 6 || depth > 4:
		f := &Func{Label: g.label(), Class: g.word()}
		for i := range g.rnd.IntN(4) {
			a := &Arg{Key: g.word(), Value: g.value()}
			if i == 0 && g.rnd.IntN(2) == 0 {
				a.Key = ""
			}
			f.Args = append(f.Args, a)
		}
		return f
	case k < 8:
		gr := &Group{Label: g.label()}
		for range 1 + g.rnd.IntN(3) {
			gr.Chains = append(gr.Chains, g.chain(depth+1))
		}
		return gr
	}
	if len(g.labels) > 0 && g.rnd.IntN(2) == 0 {
		return &Ref{Name: g.labels[g.rnd.IntN(len(g.labels))]}
	}
	return &Ref{Name: g.word()}
}

func (g *gen) chain(depth int) *Chain {
	c := &Chain{}
	for range 1 + g.rnd.IntN(3) {
		c.Terms = append(c.Terms, g.term(depth))
	}
	return c
}

func (g *gen) request() *Request {
	g.labels = g.labels[:0]
	r := &Request{}
	for range 1 + g.rnd.IntN(3) {
		r.Chains = append(r.Chains, g.chain(0))
	}
	return r
}

func TestRoundTripRandom(t *testing.T) {
	g := &gen{rnd: rand.New(rand.NewPCG(1, 2))}
	n := 5000
	if testing.Short() {
		n = 500
	}
	for range n {
		roundTrip(t, g.request())
		if t.Failed() {
			return
		}
	}
}

// Hand-built requests may hold nils; nothing may panic on them.
func TestNilsDoNotPanic(t *testing.T) {
	var nf *Func
	var ng *Group
	var nr *Ref
	r := &Request{Chains: []*Chain{nil, {Terms: []Term{nil, nf, ng, nr, &Func{Class: "a", Args: []*Arg{nil}}, &Group{Chains: []*Chain{nil}}}}}}
	_ = Format(r)
	_ = Check(r, schema)
	if !Equal(r, r) {
		t.Error("a request with nils is not Equal to itself")
	}
	if Format(nil) != "" {
		t.Error("Format(nil)")
	}
	if Word.String() != "word" || String.String() != "string" || Number.String() != "number" || ValueKind(9).String() != "ValueKind(9)" {
		t.Error("ValueKind.String")
	}
}
