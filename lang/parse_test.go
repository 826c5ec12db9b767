package lang

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

const paper = `[[(dev,expr=eth0)|(dev,expr=eth1)] > (BPF,expr="tcp and dst port 80")] > [(pktcount)|(bytecount)]`

// dump prints an AST with value kinds and units made explicit, so table
// tests see what Format deliberately hides.
func dump(r *Request) string { return dumpFold(r, false) }

// dumpFold is dump with class names lowercased when fold is set.
func dumpFold(r *Request, fold bool) string {
	var b strings.Builder
	dumpChains(&b, r.Chains, "; ", fold)
	return b.String()
}

func dumpChains(b *strings.Builder, cs []*Chain, sep string, fold bool) {
	for i, c := range cs {
		if i > 0 {
			b.WriteString(sep)
		}
		for j, t := range c.Terms {
			if j > 0 {
				b.WriteString(" > ")
			}
			switch t := t.(type) {
			case *Func:
				if t.Label != "" {
					b.WriteString(t.Label + ":")
				}
				class := t.Class
				if fold {
					class = strings.ToLower(class)
				}
				b.WriteString("(" + class)
				for _, a := range t.Args {
					b.WriteString(" ")
					if a.Key != "" {
						b.WriteString(a.Key + "=")
					}
					switch a.Value.Kind {
					case Word:
						b.WriteString("w:" + a.Value.Text)
					case String:
						b.WriteString("s:" + strconv.Quote(a.Value.Text))
					case Number:
						b.WriteString("n:" + a.Value.Text + "|" + a.Value.Unit)
					}
				}
				b.WriteString(")")
			case *Group:
				if t.Label != "" {
					b.WriteString(t.Label + ":")
				}
				b.WriteString("[")
				dumpChains(b, t.Chains, " | ", fold)
				b.WriteString("]")
			case *Ref:
				b.WriteString("@" + t.Name)
			}
		}
	}
}

var validTests = []struct{ in, dump, format string }{
	{paper,
		`[[(dev expr=w:eth0) | (dev expr=w:eth1)] > (BPF expr=s:"tcp and dst port 80")] > [(pktcount) | (bytecount)]`,
		`[[(dev,expr=eth0) | (dev,expr=eth1)] > (bpf,expr="tcp and dst port 80")] > [(pktcount) | (bytecount)]`},
	// The paper's layout, across lines.
	{"[[(dev,expr=eth0)|(dev,expr=eth1)] >\n   (BPF,expr=\"tcp and dest 80\")] > [(pktcount)|(bytecount)]",
		`[[(dev expr=w:eth0) | (dev expr=w:eth1)] > (BPF expr=s:"tcp and dest 80")] > [(pktcount) | (bytecount)]`,
		`[[(dev,expr=eth0) | (dev,expr=eth1)] > (bpf,expr="tcp and dest 80")] > [(pktcount) | (bytecount)]`},
	{`[(bpf,"tcp")|(bpf,"udp")] > (pktcount)`,
		`[(bpf s:"tcp") | (bpf s:"udp")] > (pktcount)`,
		`[(bpf,"tcp") | (bpf,"udp")] > (pktcount)`},
	{`x:(bpf,expr="tcp") > (pktcount); x > (bytecount)`,
		`x:(bpf expr=s:"tcp") > (pktcount); @x > (bytecount)`,
		`x:(bpf,expr="tcp") > (pktcount); x > (bytecount)`},
	{`(sample,rate=1ms,size=64KB,n=1M)`,
		`(sample rate=n:1|ms size=n:64|KB n=n:1|M)`,
		`(sample,rate=1ms,size=64KB,n=1M)`},
	{`(a)`, `(a)`, `(a)`},
	{`(a);`, `(a)`, `(a)`},
	{`(a);(b);`, `(a); (b)`, `(a); (b)`},
	{`  ( A , b = c )  `, `(A b=w:c)`, `(a,b=c)`},
	{`g:[(a)|(b)] > g`, `g:[(a) | (b)] > @g`, `g:[(a) | (b)] > g`},
	{`[(a)]`, `[(a)]`, `[(a)]`},
	{`[(a) > (b) | (c)] > [(d) | e]`, `[(a) > (b) | (c)] > [(d) | @e]`, `[(a) > (b) | (c)] > [(d) | e]`},
	{`[[[[(a)]]]]`, `[[[[(a)]]]]`, `[[[[(a)]]]]`},
	{`x`, `@x`, `x`},
	{`x > y; z`, `@x > @y; @z`, `x > y; z`},
	// Numbers: every unit, a sign, a fraction; case-sensitive units.
	{`(n,a=1ns,b=2us,c=3ms,d=4s,e=5m,f=6h,g=7B,h=8KB,i=9MB,j=10GB,k=11K,l=12M,m=13G)`,
		`(n a=n:1|ns b=n:2|us c=n:3|ms d=n:4|s e=n:5|m f=n:6|h g=n:7|B h=n:8|KB i=n:9|MB j=n:10|GB k=n:11|K l=n:12|M m=n:13|G)`,
		`(n,a=1ns,b=2us,c=3ms,d=4s,e=5m,f=6h,g=7B,h=8KB,i=9MB,j=10GB,k=11K,l=12M,m=13G)`},
	{`(n,-3,x=1.5,y=-0.25s,z=007)`, `(n n:-3| x=n:1.5| y=n:-0.25|s z=n:007|)`, `(n,-3,x=1.5,y=-0.25s,z=007)`},
	// Not numbers: words.
	{`(w,eth0,a=10.0.0.1,b=a.pcap,c=-5x,d=1e5,e=1kb,f=5.,g=.5,h=-,i=+5,j=1.2.3,k=0x10,l=1Ms)`,
		`(w w:eth0 a=w:10.0.0.1 b=w:a.pcap c=w:-5x d=w:1e5 e=w:1kb f=w:5. g=w:.5 h=w:- i=w:+5 j=w:1.2.3 k=w:0x10 l=w:1Ms)`,
		`(w,eth0,a=10.0.0.1,b=a.pcap,c=-5x,d=1e5,e=1kb,f=5.,g=.5,h=-,i=+5,j=1.2.3,k=0x10,l=1Ms)`},
	// Words may hold any non-delimiter, including non-ASCII.
	{`(w,a=/tmp/x.pcap,b=~!@$%^&*{}<'\/,c=héllo,d=日本)`,
		`(w a=w:/tmp/x.pcap b=w:~!@$%^&*{}<'\/ c=w:héllo d=w:日本)`,
		`(w,a=/tmp/x.pcap,b=~!@$%^&*{}<'\/,c=héllo,d=日本)`},
	// Strings: Go escapes, delimiters and '#' inside.
	{`(s,a="",b="a\"b\\c\n\t\x41\u00e9\U0001F600",c="[x|y] > (z);#:=,")`,
		`(s a=s:"" b=s:"a\"b\\c\n\tAé😀" c=s:"[x|y] > (z);#:=,")`,
		`(s,a="",b="a\"b\\c\n\tAé😀",c="[x|y] > (z);#:=,")`},
	{`(s,"\xff")`, `(s s:"\xff")`, `(s,"\xff")`},
	// Comments and assorted white space.
	{"# leading comment\n(a) # trailing\n> (b)#x\r\n;\t(c)\u00a0>\u2028(d)\ufeff# end", `(a) > (b); (c) > (d)`, `(a) > (b); (c) > (d)`},
	{"(a,b=x#comment\n)", `(a b=w:x)`, `(a,b=x)`},
	{"\ufeff(a)", `(a)`, `(a)`},
}

func TestParseValid(t *testing.T) {
	for _, tt := range validTests {
		r, err := Parse(tt.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if got := dump(r); got != tt.dump {
			t.Errorf("Parse(%q):\n got  %s\n want %s", tt.in, got, tt.dump)
		}
		if got := Format(r); got != tt.format {
			t.Errorf("Format(Parse(%q)):\n got  %s\n want %s", tt.in, got, tt.format)
		}
	}
}

func TestPositions(t *testing.T) {
	src := "x:(bpf, expr=\"tcp\", 5ms)\n  > [(a) | y]"
	r, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	c := r.Chains[0]
	f := c.Terms[0].(*Func)
	g := c.Terms[1].(*Group)
	y := g.Chains[1].Terms[0].(*Ref)
	for _, tt := range []struct {
		name      string
		got, want Pos
	}{
		{"chain", c.Pos, Pos{0, 1, 1}},
		{"label", f.LabelPos, Pos{0, 1, 1}},
		{"func", f.Pos, Pos{2, 1, 3}},
		{"func.TermPos", f.TermPos(), Pos{2, 1, 3}},
		{"class", f.ClassPos, Pos{3, 1, 4}},
		{"arg0", f.Args[0].Pos, Pos{8, 1, 9}},
		{"key0", f.Args[0].KeyPos, Pos{8, 1, 9}},
		{"value0", f.Args[0].Value.Pos, Pos{13, 1, 14}},
		{"arg1", f.Args[1].Pos, Pos{20, 1, 21}},
		{"key1", f.Args[1].KeyPos, Pos{}},
		{"group", g.Pos, Pos{29, 2, 5}},
		{"alt0", g.Chains[0].Pos, Pos{30, 2, 6}},
		{"ref", y.Pos, Pos{36, 2, 12}},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: got %+v, want %+v", tt.name, tt.got, tt.want)
		}
	}
	if raw := f.Args[0].Value.Raw; raw != `"tcp"` {
		t.Errorf("Raw = %q", raw)
	}
	if v := f.Args[1].Value; v.Raw != "5ms" || v.Text != "5" || v.Unit != "ms" || v.Kind != Number {
		t.Errorf("number value = %+v", v)
	}
	// Columns count runes, not bytes.
	r, err = Parse("(a,b=日本語) > é")
	if err != nil {
		t.Fatal(err)
	}
	if p := r.Chains[0].Terms[1].TermPos(); p != (Pos{Offset: 18, Line: 1, Col: 13}) {
		t.Errorf("ref after multibyte runes at %+v", p)
	}
}

var errorTests = []struct{ in, err string }{
	{"", `1:1: empty expression`},
	{"  # only a comment\n", `1:1: empty expression`},
	{`(bpf,expr="tcp") > > (pktcount)`, `1:20: expected a function "(", a group "[" or a label, found ">"`},
	{`(a) >`, `1:6: expected a function "(", a group "[" or a label, found end of input`},
	{`;`, `1:1: expected a function "(", a group "[" or a label, found ";"`},
	{`(a);;(b)`, `1:5: expected a function "(", a group "[" or a label, found ";"`},
	{`"tcp"`, `1:1: expected a function "(", a group "[" or a label, found string "tcp"`},
	{`5ms > (a)`, `1:1: expected a function "(", a group "[" or a label, found number 5ms`},
	{`(bpf,expr="tcp)`, `1:11: unterminated string`},
	{"(bpf,expr=\"tcp\n\")", `1:11: unterminated string`},
	{`(bpf,expr="tcp\`, `1:11: unterminated string`},
	{`(a,x="ok\q")`, `1:9: invalid escape sequence \q in string`},
	{`(a,x="日\'")`, `1:8: invalid escape sequence \' in string`},
	{`(a,x="\ud800")`, `1:7: invalid escape sequence \u in string`},
	{`(a))`, `1:4: unexpected ")"`},
	{`(a)]`, `1:4: unexpected "]"`},
	{`(a)|(b)`, `1:4: unexpected "|" outside a group`},
	{`(a) (b)`, `1:5: expected ">" or ";" after a term, found "("`},
	{`(a) b`, `1:5: expected ">" or ";" after a term, found "b"`},
	{`x y`, `1:3: expected ">" or ";" after a term, found "y"`},
	{`[]`, `1:1: empty group`},
	{`(a) > [ ]`, `1:7: empty group`},
	{`[(a)|]`, `1:6: empty alternative in the group opened at 1:1`},
	{`[|(a)]`, `1:2: empty alternative in the group opened at 1:1`},
	{`[(a)||(b)]`, `1:6: empty alternative in the group opened at 1:1`},
	{`[(a)`, `1:5: missing "]" to close the group opened at 1:1`},
	{"[(a) >\n  (b)\n", `3:1: missing "]" to close the group opened at 1:1`},
	{`[(a))`, `1:5: expected "|" or "]" in the group opened at 1:1, found ")"`},
	{`(a`, `1:3: missing ")" to close the function opened at 1:1`},
	{`x:(bpf,expr="tcp"`, `1:18: missing ")" to close the function opened at 1:3`},
	{`(a,b=c]`, `1:7: expected "," or ")" in the function opened at 1:1, found "]"`},
	{`(a b)`, `1:4: expected "," or ")" in the function opened at 1:1, found "b"`},
	{`(a,b=c=d)`, `1:7: expected "," or ")" in the function opened at 1:1, found "="`},
	{`()`, `1:2: expected a class name after "(", found ")"`},
	{`("bpf")`, `1:2: expected a class name after "(", found string "bpf"`},
	{`(5)`, `1:2: expected a class name after "(", found number 5`},
	{`(a,)`, `1:4: expected a parameter after ",", found ")"`},
	{`(a,=b)`, `1:4: expected a parameter after ",", found "="`},
	{`(a,b=)`, `1:6: expected a value after "b=", found ")"`},
	{`(a,"b"=c)`, `1:4: a parameter name must be a word, found string "b"`},
	{`(a,5=c)`, `1:4: a parameter name must be a word, found number 5`},
	{`x:`, `1:3: expected a function "(" or a group "[" after label "x:", found end of input`},
	{`x:y`, `1:3: expected a function "(" or a group "[" after label "x:", found "y"`},
	{`:(a)`, `1:1: expected a function "(", a group "[" or a label, found ":"`},
	{"(a,b=x\x01)", `1:7: invalid character U+0001`},
	{"(a)\n\n  \u0085\u0080", `3:4: invalid character U+0080`},
	{"(a,b=\"x\xffy\")", `1:8: invalid UTF-8 encoding`},
	{"(a)\n\t(b\xc3", `2:4: invalid UTF-8 encoding`},
	{`(a,b="` + strings.Repeat("x", 40) + `)`, `1:6: unterminated string`},
	{`(a) ` + strings.Repeat("y", 40), `1:5: expected ">" or ";" after a term, found "yyyyyyyyyyyyyyyyyyyyyyyy…"`},
}

func TestParseErrors(t *testing.T) {
	for _, tt := range errorTests {
		r, err := Parse(tt.in)
		if err == nil {
			t.Errorf("Parse(%q) = %s, want error %q", tt.in, Format(r), tt.err)
			continue
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("Parse(%q): error %T is not *Error", tt.in, err)
			continue
		}
		if got := err.Error(); got != tt.err {
			t.Errorf("Parse(%q):\n got  %s\n want %s", tt.in, got, tt.err)
		}
		if r != nil {
			t.Errorf("Parse(%q) returned a request with an error", tt.in)
		}
	}
}

func TestCaret(t *testing.T) {
	for _, tt := range []struct{ in, caret string }{
		{`(bpf,expr="tcp") > > (pktcount)`,
			"(bpf,expr=\"tcp\") > > (pktcount)\n                   ^"},
		{"(a) >\n\t\t(b,é=\"x\\q\")",
			"\t\t(b,é=\"x\\q\")\n\t\t       ^"},
		{"(a) >\r\n [(b)\r\n",
			"\n^"}, // at end of input, after the last newline
		{"(a);\r\n(b) (c)\r\n", "(b) (c)\n    ^"},
		{"(a", "(a\n  ^"},
		{"(日本 x", "(日本 x\n    ^"},
		{"(a,b=\"x\xffy\")", "(a,b=\"x\uFFFDy\")\n       ^"},
		{"", ""},
	} {
		_, err := Parse(tt.in)
		if err == nil {
			t.Errorf("Parse(%q) succeeded", tt.in)
			continue
		}
		if got := err.(*Error).Caret(); got != tt.caret {
			t.Errorf("Caret for %q (%v):\n got\n%s\n want\n%s", tt.in, err, got, tt.caret)
		}
	}
	e := &Error{Pos: Pos{Line: 3, Col: 1}, Msg: "x", Src: "one line"}
	if c := e.Caret(); c != "" {
		t.Errorf("Caret past the last line = %q", c)
	}
	e = &Error{Pos: Pos{Line: 1, Col: 7}, Msg: "x", Src: "ab"}
	if c := e.Caret(); c != "ab\n      ^" {
		t.Errorf("Caret past the end of the line = %q", c)
	}
}

func TestLimits(t *testing.T) {
	deep := strings.Repeat("[", 1_000_000)
	for _, tt := range []struct {
		in  string
		lim Limits
		err string
	}{
		{deep, DefaultLimits, `1:65: groups are nested too deeply (the limit is 64)`},
		{deep, Limits{MaxDepth: 1 << 30}, `1:10001: groups are nested too deeply (the limit is 10000)`},
		{strings.Repeat("[", 3) + "(a)" + strings.Repeat("]", 3), Limits{MaxDepth: 2}, `1:3: groups are nested too deeply (the limit is 2)`},
		{strings.Repeat("(a) > ", 150_000) + "(a)", DefaultLimits, `1:600001: too many terms (the limit is 100000)`},
		{"(a) > [(b) | c]", Limits{MaxTerms: 3}, `1:14: too many terms (the limit is 3)`},
		{strings.Repeat(" ", 1<<20) + "(a)", DefaultLimits, `1:1: expression is longer than 1048576 bytes`},
		{"(a) > (b)", Limits{MaxBytes: 8}, `1:1: expression is longer than 8 bytes`},
	} {
		_, err := ParseWith(tt.in, tt.lim)
		if err == nil || err.Error() != tt.err {
			t.Errorf("ParseWith(%.20q…, %+v) = %v, want %s", tt.in, tt.lim, err, tt.err)
		}
	}
	// Exactly at the limits is fine.
	in := strings.Repeat("[", 64) + "(a)" + strings.Repeat("]", 64)
	if _, err := Parse(in); err != nil {
		t.Errorf("64 levels: %v", err)
	}
	if _, err := ParseWith("(a) > [(b) | c]", Limits{MaxTerms: 4}); err != nil {
		t.Errorf("4 terms: %v", err)
	}
	if _, err := ParseWith("(a) > (b)", Limits{MaxBytes: 9}); err != nil {
		t.Errorf("9 bytes: %v", err)
	}
}

// A value written against colons is one word, so an address needs no
// quotes; a colon after a space, or a label, is not part of it.
func TestColonInValue(t *testing.T) {
	for in, want := range map[string]string{
		`(dta,to=127.0.0.1:40040)`:  `127.0.0.1:40040`,
		`(dta,to=fe80::1)`:          `fe80::1`,
		`(dta,to=host:40040)`:       `host:40040`,
		`(dta,to="127.0.0.1:4004")`: `127.0.0.1:4004`,
	} {
		r, err := Parse(in)
		if err != nil {
			t.Errorf("Parse(%q): %v", in, err)
			continue
		}
		f := r.Chains[0].Terms[0].(*Func)
		if got := f.Args[0].Value.Text; got != want {
			t.Errorf("Parse(%q): value %q, want %q", in, got, want)
		}
		back, err := Parse(Format(r))
		if err != nil || Format(back) != Format(r) {
			t.Errorf("%q: canonical form %q does not read back (%v)", in, Format(r), err)
		}
	}
	for _, in := range []string{`(dta,to=127.0.0.1: 40040)`, `(dta,to=a :b)`} {
		if _, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) succeeded", in)
		}
	}
	if r, err := Parse(`x:(pktcount) > y:(bytecount)`); err != nil || len(r.Chains[0].Terms) != 2 {
		t.Errorf("labels: %v", err)
	}
}
