package mafia

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/lang"
)

var update = flag.Bool("update", false, "rewrite the golden requests in testdata/")

// examples are the programs of examples/mafia.
func examples(t testing.TB) map[string]string {
	t.Helper()
	files, err := filepath.Glob("../../examples/mafia/*.mafia")
	if err != nil || len(files) < 13 {
		t.Fatalf("the 13 use cases of examples/mafia: found %d (%v)", len(files), err)
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".mafia")] = string(b)
	}
	return out
}

func compile(t *testing.T, src string) *Result {
	t.Helper()
	p, err := Parse(src)
	if err != nil {
		t.Fatalf("%v\n%s", err, caret(err))
	}
	r, err := Compile(p, Options{})
	if err != nil {
		t.Fatalf("%v\n%s", err, caret(err))
	}
	return r
}

func caret(err error) string {
	var e *lang.Error
	if errors.As(err, &e) {
		return e.Caret()
	}
	return ""
}

func render(r *Result) string {
	var b strings.Builder
	for _, q := range r.Requests {
		if q.Role != "" {
			b.WriteString("at " + q.Role + ":\n")
		}
		b.WriteString(q.Expr() + "\n")
	}
	return b.String()
}

// TestExamplesCompile compiles each use case of examples/mafia and
// compares the ffpf requests with testdata/NAME.ffpf (go test -update
// rewrites them): what each program becomes is reviewed there.
func TestExamplesCompile(t *testing.T) {
	for name, src := range examples(t) {
		got := render(compile(t, src))
		golden := filepath.Join("testdata", name+".ffpf")
		if *update {
			if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%s: %v (go test -update writes it)", name, err)
		}
		if got != string(want) {
			t.Errorf("%s compiles to\n%s\nwant (%s)\n%s", name, got, golden, want)
		}
	}
}

// TestRoundTrip prints each program, parses the print, and requires the
// same tree, the same print, and the same requests.
func TestRoundTrip(t *testing.T) {
	progs := examples(t)
	for i, s := range extraPrograms {
		progs["extra"+string(rune('a'+i))] = s
	}
	for name, src := range progs {
		p, err := Parse(src)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out := Format(p)
		q, err := Parse(out)
		if err != nil {
			t.Fatalf("%s: the print does not parse: %v\n%s", name, err, out)
		}
		if !Equal(p, q) {
			t.Errorf("%s: printed and parsed again, the program differs:\n%s\n%s", name, dump(p), dump(q))
		}
		if again := Format(q); again != out {
			t.Errorf("%s: Format is not idempotent:\n%s\n%s", name, out, again)
		}
		r1, err1 := Compile(p, Options{})
		r2, err2 := Compile(q, Options{})
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("%s: compiles %v, printed %v", name, err1, err2)
		}
		if err1 != nil {
			continue
		}
		if len(r1.Requests) != len(r2.Requests) {
			t.Fatalf("%s: %d requests, printed %d", name, len(r1.Requests), len(r2.Requests))
		}
		for i := range r1.Requests {
			if !lang.Equal(r1.Requests[i].Req, r2.Requests[i].Req) || r1.Requests[i].Role != r2.Requests[i].Role {
				t.Errorf("%s: the printed program compiles to\n%s\nnot\n%s", name, r2.Requests[i].Expr(), r1.Requests[i].Expr())
			}
		}
	}
}

// extraPrograms cover what the use cases do not: operators, precedence,
// curly quotes, nesting, windows, ctrl.
var extraPrograms = []string{
	`x = Counter()
pkts >> x.set(x + 1) >> match(!(x > 3) && x % 4 == 1 || -x < -2 * (x - 1) / 3) >> duplicate(s); s >> collect("file:a.pcap")`,
	`k = Key(ip.src)
h = HashMap(key=k, size=64, type=Counter(width=8))
pkts >> ((h.set(max(h + 1, ipv4.ttl)) >> match(h >= 2)) + (match(tcp.dst == 80) >> tag(ipv4.tos, 4)))`,
	`s = Sketch(alg=“count-min”, key=Key(ip.src, ip.dst), nhash=3, size=100)
pkts.window(10ms) >> s.add(pkt.size)`,
	`b = BloomFilter(alg="counting", key=Key(ip.dst), nhash=2, size=1000)
window(1s)
pkts >> b.add(1) >> match(b.min() >= 3 and b.max() > 0x10) >> duplicate(d)
d >> collect("udp:127.0.0.1:9999")`,
	`t = Timestamp()
pkts >> timestamp(t) >> match(t - 5 > 0 or not ipv4.tos | 1 == 3 & 1)`,
}

func TestErrors(t *testing.T) {
	for _, tt := range errorTests {
		p, err := Parse(tt.src)
		if err == nil {
			_, err = Compile(p, Options{})
		}
		if err == nil {
			t.Errorf("%q: no error, want %s %q", tt.src, tt.at, tt.msg)
			continue
		}
		var e *lang.Error
		if !errors.As(err, &e) {
			t.Errorf("%q: error %T is not a *lang.Error: %v", tt.src, err, err)
			continue
		}
		if e.Pos.String() != tt.at || !strings.Contains(e.Msg, tt.msg) {
			t.Errorf("%q:\n got %v\nwant %s: …%s…", tt.src, err, tt.at, tt.msg)
		}
		if c := e.Caret(); tt.src != "" && !strings.Contains(c, "^") {
			t.Errorf("%q: no caret: %q", tt.src, c)
		}
	}
}

const hh = "flowid = Key(ip.src, ip.dst, tcp.src, tcp.dst, ip.proto)\n" +
	"hh = BloomFilter(alg=\"membership\", key=flowid, nhash=4, size=64)\n" +
	"n = Sketch(alg=\"count-min\", key=flowid, nhash=4, size=256)\n" +
	"c = HashMap(key=flowid, size=1024, type=Counter(width=32))\n"

var errorTests = []struct{ src, at, msg string }{
	// syntax
	{"pkts >> match(x", "1:16", `"," or ")" expected`},
	{"pkts >> frob(1)", "1:9", "unknown step frob"},
	{"pkts >> mtch(1)", "1:9", "did you mean match"},
	{"x = Cuonter()", "1:5", "did you mean Counter"},
	{"pkts >> match(1 < 2 < 3)", "1:21", "comparisons do not chain"},
	{"pkts >> match(3ss)", "1:15", "unknown unit"},
	{"x = 1\n  y", "2:4", "a declaration has"},
	{`pkts >> collect("a)`, "1:17", "not closed"},
	// the four
	{hh + "pkts >> match(hh.test() + 1 > 2)", "5:15", "a truth value (a Bloom test), used as a number"},
	{hh + "pkts >> n.set(n + nbytes)", "5:19", "nbytes is not declared"},
	{hh + "pkts >> n.set(n + pkt.size) >> match(n.min() > 5) >> duplicate(alarms)", "5:64", "stream alarms is never consumed"},
	{hh + "pkts >> (c.set(c + 1) + c.set(c + pkt.size))", "5:25", "both write c"},
	// more
	{hh + "pkts >> n.set(n + 1) >> match(nn.min() > 1)", "5:31", "did you mean n"},
	{hh + "pkts >> match(hh.tset())", "5:15", "did you mean test()"},
	{hh + "pkts >> match(c > 1) >> n.set(n + 1) >> c.set(c + 1)", "5:15", "before its update at 5:41"},
	{hh + "pkts >> (c.set(c + 1) + match(c > 2))", "5:31", "beside its update"},
	{hh + "pkts >> match(c > 1)", "5:15", "never updated"},
	{hh + "pkts >> c.set(c + 1) >> c.set(c + 2)", "5:25", "updated here and at 5:9"},
	{hh + "pkts >> match(hh.test()) >> n.set(n + 1) >> hh.insert()", "5:15", "before its update"},
	{hh + "pkts >> hh.insert() >> match(hh.test() == 1)", "5:30", "a truth value (a Bloom test), used as a number"},
	{hh + "pkts >> n.set(5)", "5:15", "which adds"},
	{hh + "pkts >> c.reset()", "5:9", "resets state at the end of each window"},
	{hh + "al >> collect(\"file:x\")", "5:1", "stream al is not defined"},
	{hh + "pkts >> duplicate(s)\ns >> duplicate(s)", "6:16", "stream s is started twice"},
	{hh + "pkts >> duplicate(c)", "5:19", "c is declared at 4:1"},
	{hh + "pkts >> tag(pkt.hh_volume, 1)", "5:13", "tag cannot write pkt.hh_volume"},
	{hh + "pkts >> tag(ipv4.src, 1)", "5:13", "tag cannot write ipv4.src"},
	{hh + "pkts >> match(random([0:100]) > 5)", "5:31", "below the rate"},
	{hh + "pkts >> match(random([0:100]) < 500)", "5:33", "outside random's range"},
	{hh + "pkts >> match(ipv4.tos + random([0:1]) < 1)", "5:26", "compared with a rate at the top"},
	{hh + "pkts >> collect(\"tcp:x\")", "5:17", "is not \"file:PATH\""},
	{hh + "pkts >> collect(C)", "5:17", "the endpoint C is not declared"},
	{hh + "ctrl >> collect(\"file:x\")", "5:1", "ctrl is the packets a controller sends"},
	{"x = Sketch(alg=\"hyperloglog\", key=Key(ip.src), size=100)", "1:53", "2^p registers"},
	{"x = Sketch(alg=\"bogus\", key=Key(ip.src))", "1:16", "unknown Sketch alg"},
	{"x = HashMap(key=Key(pkt.input_port), type=Counter())", "1:5", "needs key= a flow key"},
	{"x = HashMap(key=Key(ip.sorc), type=Counter())", "1:21", "did you mean ip.src"},
	{"x = Counter(widht=3)", "1:13", "did you mean width"},
	{"x = Counter()\nx = Counter()", "2:1", "declared twice"},
	{"pkts = Counter()", "1:1", "a name of the language"},
	{"at first_hop:\nx = Counter()\nat middle:\npkts >> x.set(x + 1)", "3:1", "unknown role middle"},
	{"x = Counter()\npkts >> x.set(x + 1)\nat last_hop:\npkts >> x.set(x + 1)", "2:1", "before the first at ROLE"},
	{"x = Counter()\nwindow(10)\npkts >> x.set(x + 1)", "2:8", "a window is a duration"},
	{"x = HashMap(key=Key(ip.src), type=Timestamp())\nwindow(10ms)\npkts >> timestamp(x)", "3:9", "register, which has no window"},
	{"l = Key(pkt.input_port, switch.id)\nb = BloomFilter(key=l, size=16)\npkts >> b.insert()", "2:21", "reset after it"},
	{"l = Key(pkt.input_port)\nb = BloomFilter(key=l, size=128)\npkts >> b.insert() >> tag(ipv4.checksum, b.read()) >> b.reset()", "2:1", "at most 64 bits"},
	{"x = Counter()\npkts >> x.set(x + 1) >> (x.set(x + 1) + match(x > 1)) >> match(x > 2)", "2:26", "updated here"},
	{"", "1:1", "no flow"},
	{"x = Counter()\npkts >> match(x)", "2:15", "a number, used as a truth value"},
}

func TestParseLimits(t *testing.T) {
	deep := "pkts >> " + strings.Repeat("(", MaxDepth+5) + "match(1 > 0)" + strings.Repeat(")", MaxDepth+5)
	if _, err := Parse(deep); err == nil || !strings.Contains(err.Error(), "nested more than") {
		t.Errorf("nesting beyond MaxDepth: %v", err)
	}
	if _, err := Parse("x = \xff"); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("bad UTF-8: %v", err)
	}
	if _, err := Parse(strings.Repeat(" ", MaxBytes+1)); err == nil {
		t.Error("a program longer than MaxBytes parsed")
	}
}

// TestOrigins: every function of a request comes from a step of the
// program, whose position Origins gives.
func TestOrigins(t *testing.T) {
	r := compile(t, examples(t)["counter-thresholds"])
	q := r.Requests[0]
	if n := strings.Count(q.Expr(), "("); len(q.Origins) < 5 || n < len(q.Origins) {
		t.Fatalf("%d origins for %s", len(q.Origins), q.Expr())
	}
	for i, p := range q.Origins {
		if p.Line < 1 {
			t.Errorf("function %d of %s has no origin", i, q.Expr())
		}
	}
}

// collect("udp:HOST:PORT") is export's to= (a UDP collector); ffpf mafia
// check binds it with the class's parameters (cmd/ffpf TestMafiaCheckErrors).
func TestCollectUDP(t *testing.T) {
	r := compile(t, "pkts >> duplicate(d)\nd >> collect(\"udp:127.0.0.1:9999\")")
	if e := r.Requests[0].Expr(); !strings.Contains(e, `(export,to="127.0.0.1:9999")`) {
		t.Fatalf("collect to UDP compiles to %s", e)
	}
}
