package lang

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

type fakeSchema map[string][]string

func (s fakeSchema) Class(name string) ([]string, bool) { p, ok := s[name]; return p, ok }
func (s fakeSchema) Classes() []string {
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	return names
}

var schema = fakeSchema{
	"bpf":       {"expr", "snaplen"},
	"dev":       {"expr"},
	"pktcount":  nil,
	"bytecount": nil,
	"sample":    {"rate", "size", "n"},
	"sketch":    {"width", "depth", "hash"},
	"trumpet":   {"event"},
}

func TestCheck(t *testing.T) {
	for _, tt := range []struct{ in, err string }{
		{paper, ""},
		{`[(bpf,"tcp")|(bpf,"udp")] > (pktcount)`, ""},
		{`x:(bpf,expr="tcp") > (pktcount); x > (bytecount)`, ""},
		{`x > (bytecount); x:(bpf,expr="tcp") > (pktcount)`, ""}, // forward reference
		{`(sample,rate=1ms,size=64KB,n=1M)`, ""},
		{`(sample,1ms,n=1M,size=64KB)`, ""},
		{`(BPF,tcp,snaplen=96)`, ""},
		{`g:[(bpf,tcp)|(bpf,udp)] > (pktcount); g > (bytecount)`, ""},

		{`(bfp,expr="tcp")`, `1:2: unknown class "bfp"; did you mean "bpf"?`},
		{`(BFP,expr="tcp")`, `1:2: unknown class "BFP"; did you mean "bpf"?`},
		{`(pktcnt)`, `1:2: unknown class "pktcnt"; did you mean "pktcount"?`},
		{`(bytes)`, `1:2: unknown class "bytes"; did you mean "bytecount"?`}, // common prefix
		{`(zzz)`, `1:2: unknown class "zzz"; see 'ffpf classes'`},
		{`(bp)`, `1:2: unknown class "bp"; did you mean "bpf"?`},
		{`(ab)`, `1:2: unknown class "ab"; see 'ffpf classes'`}, // 2 edits is too many for a short name
		{`(bpf,exp="tcp")`, `1:6: unknown parameter "exp" for class bpf; did you mean "expr"?`},
		{`(bpf,Expr="tcp")`, `1:6: unknown parameter "Expr" for class bpf; did you mean "expr"?`},
		{`(bpf,expression="tcp")`, `1:6: unknown parameter "expression" for class bpf; did you mean "expr"?`},
		{`(sketch,dpeth=4)`, `1:9: unknown parameter "dpeth" for class sketch; did you mean "depth"?`},
		{`(bpf,zzz=1)`, `1:6: unknown parameter "zzz" for class bpf; see 'ffpf classes'`},
		{`(bpf,expr="tcp",96)`, `1:17: bare value 96 is allowed only as the first argument; write name=value`},
		{`(pktcount,5)`, `1:11: class pktcount takes no parameters`},
		{`(pktcount,x=5)`, `1:11: class pktcount takes no parameters`},
		{`(bpf,expr=tcp,expr=udp)`, `1:15: parameter "expr" is given twice (first at 1:6)`},
		{`(bpf,tcp,expr=udp)`, `1:10: parameter "expr" is given twice (the bare value at 1:6 is expr)`},
		{`x:(bpf) > x:(pktcount)`, `1:11: label "x" is already defined at 1:1`},
		{`x:[(bpf)] ; [x:(pktcount)]`, `1:14: label "x" is already defined at 1:1`},
		{`(bpf) > y`, `1:9: undefined label "y"`},
		{`flow:(bpf) > flwo`, `1:14: undefined label "flwo"; did you mean "flow"?`},
		{`(bpf) > pktcount`, `1:9: undefined label "pktcount"; to use the class, write (pktcount)`},
		// The earliest error wins, whichever check finds it.
		{`(bpf) > y; x:(zzz); x:(bpf)`, `1:9: undefined label "y"`},
		{`(bpf,exp=1) > (zzz)`, `1:6: unknown parameter "exp" for class bpf; did you mean "expr"?`},
		{`x:(a) > (b); x:(c)`, `1:4: unknown class "a"; see 'ffpf classes'`},
	} {
		r, err := Parse(tt.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		err = Check(r, schema)
		got := ""
		if err != nil {
			got = err.Error()
			if e, ok := err.(*Error); !ok || e.Caret() == "" {
				t.Errorf("Check(%q): want an *Error with a caret, got %#v", tt.in, err)
			}
		}
		if got != tt.err {
			t.Errorf("Check(%q):\n got  %s\n want %s", tt.in, got, tt.err)
		}
	}
}

func TestCheckNilSchema(t *testing.T) {
	r, _ := Parse(`x:(anything,1,1,1) > y`)
	if err := Check(r, nil); err == nil || err.Error() != `1:22: undefined label "y"` {
		t.Errorf("Check with nil schema = %v", err)
	}
	if err := Check(nil, schema); err != nil {
		t.Errorf("Check(nil) = %v", err)
	}
}

func TestCheckCaret(t *testing.T) {
	r, _ := Parse("(dev,eth0) >\n\t(bfp,expr=\"tcp\")")
	err := Check(r, schema).(*Error)
	want := "\t(bfp,expr=\"tcp\")\n\t ^"
	if got := err.Caret(); got != want {
		t.Errorf("Caret:\n%s\nwant\n%s", got, want)
	}
}

func TestSuggest(t *testing.T) {
	cands := []string{"bpf", "pktcount", "bytecount", "sample", "sketch", "Trumpet"}
	for _, tt := range []struct{ in, want string }{
		{"bfp", "bpf"},         // transposition
		{"bp", "bpf"},          // deletion
		{"bpff", "bpf"},        // insertion
		{"bpx", "bpf"},         // substitution
		{"xyz", ""},            // nothing close
		{"skecth", "sketch"},   // transposition in a longer name
		{"sampel", "sample"},   // ditto
		{"sam", "sample"},      // prefix of 3
		{"trumpte", "Trumpet"}, // case-insensitive, suggests as spelled
		{"pktcountx", "pktcount"},
		{"bpf", ""}, // the name itself is not a suggestion
		{"y", ""},   // one letter shares nothing with another
	} {
		got, ok := Suggest(tt.in, cands)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("Suggest(%q) = %q, %v; want %q", tt.in, got, ok, tt.want)
		}
	}
	for _, tt := range []struct {
		a, b string
		d    int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"ab", "ba", 1}, {"abc", "ca", 3},
		{"kitten", "sitting", 3}, {"日本", "本日", 1},
	} {
		if d := osa([]rune(tt.a), []rune(tt.b)); d != tt.d {
			t.Errorf("osa(%q, %q) = %d, want %d", tt.a, tt.b, d, tt.d)
		}
	}
}

// Many undefined references and many labels must not cost a suggestion each.
func TestCheckManyErrorsIsFast(t *testing.T) {
	var b strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&b, "l%d:(bpf) > r%d > (zzz%d);", i, i, i)
	}
	r, err := Parse(b.String())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = Check(r, schema)
	if err == nil || err.Error() != `1:12: undefined label "r0"; did you mean "l0"?` {
		t.Errorf("Check = %v", err)
	}
	// 0.1 s here, 0.7 s under the race detector on a loaded machine; a
	// suggestion per error (20000 × 20000 edit distances) takes tens of
	// seconds, more under the race detector.
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("Check took %v", d)
	}
}
