package functions

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func testClass() *Class {
	return &Class{Name: "t", MinInputs: 1, MaxInputs: 1, New: func(*Context) (Function, error) { return nil, nil },
		Params: []Param{
			{Name: "s", Type: String, Enum: []string{"a", "b"}, Default: "a"},
			{Name: "n", Type: Int, Default: "1K"},
			{Name: "size", Type: Size, Default: "64KB"},
			{Name: "d", Type: Duration, Default: "10ms"},
			{Name: "f", Type: Float, Default: "0.5"},
			{Name: "on", Type: Bool, Default: "true"},
		}}
}

func num(text, unit string) Raw { return Raw{Kind: RawNumber, Text: text, Unit: unit} }

func TestBindTypesAndUnits(t *testing.T) {
	c := testClass()
	if err := NewRegistry().Register(c); err != nil {
		t.Fatal(err)
	}
	p, err := c.Bind([]Arg{{Value: Raw{Text: "b"}}, {Key: "n", Value: num("2.5", "M")},
		{Key: "size", Value: num("1.5", "KB")}, {Key: "d", Value: num("2", "m")}, {Key: "on", Value: Raw{Text: "no"}}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Str("s") != "b" || p.Int("n") != 2500000 || p.Int("size") != 1536 || p.Duration("d") != 2*time.Minute ||
		p.Float("f") != 0.5 || p.Bool("on") {
		t.Errorf("bound %+v", p.vals)
	}
	if got, want := p.Canonical(), `s="b",n=2500000,size=1536B,d=2m,f=0.5,on=false`; got != want {
		t.Errorf("canonical %q, want %q", got, want)
	}
	d, _ := c.Bind(nil)
	if got, want := d.Canonical(), `s="a",n=1000,size=64KB,d=10ms,f=0.5,on=true`; got != want {
		t.Errorf("defaults %q, want %q", got, want)
	}
}

func TestBindErrors(t *testing.T) {
	c := testClass()
	for _, tc := range []struct {
		args []Arg
		arg  int
		want string
	}{
		{[]Arg{{Key: "s", Value: Raw{Text: "c"}}}, 0, `"c" is not one of a, b`},
		{[]Arg{{Key: "n", Value: num("1.5", "")}}, 0, "not a whole number"},
		{[]Arg{{Key: "n", Value: num("99999999999", "G")}}, 0, "out of range"},
		{[]Arg{{Key: "n", Value: num("3", "ms")}}, 0, `unit "ms" does not apply to a count`},
		{[]Arg{{Key: "size", Value: num("-1", "KB")}}, 0, "not a size"},
		{[]Arg{{Key: "d", Value: num("3", "")}}, 0, "a duration needs a unit"},
		{[]Arg{{Key: "on", Value: Raw{Text: "maybe"}}}, 0, "want true or false"},
		{[]Arg{{Key: "n", Value: Raw{Text: "ten"}}}, 0, `want a number, got "ten"`},
		{[]Arg{{Key: "x", Value: Raw{Text: "1"}}}, 0, `has no parameter "x"`},
		{[]Arg{{Key: "n", Value: num("1", "")}, {Value: num("2", "")}}, 1, "takes no bare value here"},
		{[]Arg{{Value: Raw{Text: "a"}}, {Key: "s", Value: Raw{Text: "b"}}}, 1, "given twice"},
	} {
		_, err := c.Bind(tc.args)
		be, ok := err.(*BindError)
		if !ok || be.Arg != tc.arg || !strings.Contains(be.Msg, tc.want) {
			t.Errorf("%+v: err %v, want arg %d %q", tc.args, err, tc.arg, tc.want)
		}
	}
	req := &Class{Name: "r", NewSource: func(*Context) (Source, error) { return nil, nil },
		Params: []Param{{Name: "file", Type: String, Required: true, Summary: "the file"}}}
	if _, err := req.Bind(nil); err == nil || !strings.Contains(err.Error(), "needs parameter file") {
		t.Errorf("missing required: %v", err)
	}
}

func TestRegisterRejectsMalformedClasses(t *testing.T) {
	r := NewRegistry()
	for _, c := range []*Class{
		{Name: "Upper", New: func(*Context) (Function, error) { return nil, nil }},
		{Name: "both", New: func(*Context) (Function, error) { return nil, nil }, NewSource: func(*Context) (Source, error) { return nil, nil }},
		{Name: "src", MaxInputs: 1, NewSource: func(*Context) (Source, error) { return nil, nil }},
		{Name: "baddefault", New: func(*Context) (Function, error) { return nil, nil }, Params: []Param{{Name: "n", Type: Int, Default: "x"}}},
		{Name: "badwith", New: func(*Context) (Function, error) { return nil, nil }, Params: []Param{{Name: "n", Type: Int, With: "m"}}},
	} {
		if err := r.Register(c); err == nil {
			t.Errorf("registered %s", c.Name)
		}
	}
	ok := &Class{Name: "ok", New: func(*Context) (Function, error) { return nil, nil }}
	if err := r.Register(ok); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(ok); err == nil {
		t.Error("registered twice")
	}
	if c, found := r.Lookup("OK"); !found || c != ok {
		t.Error("lookup is not case-insensitive")
	}
}

// With gives a registry where its classes replace or join the others,
// checks them, and leaves the registry it copies alone.
func TestRegistryWith(t *testing.T) {
	newFn := func(*Context) (Function, error) { return nil, nil }
	a, b := &Class{Name: "a", New: newFn}, &Class{Name: "b", New: newFn}
	r := NewRegistry()
	for _, c := range []*Class{a, b} {
		if err := r.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	b2, c := &Class{Name: "b", New: newFn}, &Class{Name: "c", New: newFn}
	w, err := r.With(b2, c)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]*Class{"a": a, "b": b2, "c": c} {
		if got, _ := w.Lookup(name); got != want {
			t.Errorf("With: %s is %p, want %p", name, got, want)
		}
	}
	if got, _ := r.Lookup("b"); got != b {
		t.Error("With changed the registry it copies")
	}
	if _, found := r.Lookup("c"); found {
		t.Error("With added to the registry it copies")
	}
	if _, err := r.With(&Class{Name: "Bad", New: newFn}); err == nil {
		t.Error("With took a malformed class")
	}
}

// A NUL byte would end the string where C code (libpcap) reads it, so a
// filter "tcp\x00 or udp" would silently mean "tcp".
func TestBindRefusesNUL(t *testing.T) {
	c := &Class{Name: "n", New: func(*Context) (Function, error) { return nil, nil },
		Params: []Param{{Name: "expr", Type: String}}}
	for _, raw := range []Raw{{Kind: RawString, Text: "tcp\x00 or udp"}, {Kind: RawWord, Text: "\x00"}} {
		_, err := c.Bind([]Arg{{Value: raw}})
		var be *BindError
		if !errors.As(err, &be) || be.Arg != 0 || !strings.Contains(err.Error(), "NUL") {
			t.Errorf("Bind(%q) = %v, want a BindError on argument 0 naming the NUL byte", raw.Text, err)
		}
	}
}

func TestArgsBindTheSameParams(t *testing.T) {
	c := &Class{Name: "x", Params: []Param{
		{Name: "s", Type: String}, {Name: "i", Type: Int}, {Name: "z", Type: Size, Default: "64KB"},
		{Name: "d", Type: Duration}, {Name: "f", Type: Float}, {Name: "b", Type: Bool}, {Name: "unset", Type: Int},
	}}
	p, err := c.Bind([]Arg{{"s", Raw{Kind: RawString, Text: "a b,\"c\""}}, {"i", Raw{Kind: RawNumber, Text: "3", Unit: "K"}},
		{"d", Raw{Kind: RawNumber, Text: "1.5", Unit: "s"}}, {"f", Raw{Kind: RawNumber, Text: "0.25"}}, {"b", Raw{Kind: RawWord, Text: "yes"}}})
	if err != nil {
		t.Fatal(err)
	}
	q, err := c.Bind(p.Args())
	if err != nil {
		t.Fatal(err)
	}
	if p.Canonical() != q.Canonical() || q.Has("unset") {
		t.Errorf("bound again as %s, want %s", q.Canonical(), p.Canonical())
	}
	if err := c.CheckArg("i", Raw{Kind: RawWord, Text: "many"}); err == nil {
		t.Error("CheckArg took a word for an int")
	}
}

// A parameter with no effect without another (With) is refused when given
// without it, by name, at the argument; its default alone is no error.
func TestBindRefusesParametersWithoutEffect(t *testing.T) {
	c := &Class{Name: "w", MinInputs: 1, MaxInputs: 1, New: func(*Context) (Function, error) { return nil, nil },
		Params: []Param{
			{Name: "rate", Type: Float},
			{Name: "seed", Type: Int, Default: "1", With: "rate"},
			{Name: "counting", Type: Bool},
			{Name: "value", Type: String, With: "counting"},
		}}
	if err := NewRegistry().Register(c); err != nil {
		t.Fatal(err)
	}
	for _, ok := range [][]Arg{
		nil,
		{{Key: "rate", Value: num("0.5", "")}, {Key: "seed", Value: num("3", "")}},
		{{Key: "counting", Value: Raw{Text: "true"}}, {Key: "value", Value: Raw{Text: "bytes"}}},
	} {
		if _, err := c.Bind(ok); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
	for _, bad := range []struct {
		args []Arg
		at   int
		want string
	}{
		{[]Arg{{Key: "seed", Value: num("3", "")}}, 0, "parameter seed of class w has an effect only with rate=; without it, leave it out"},
		{[]Arg{{Key: "counting", Value: Raw{Text: "false"}}, {Key: "value", Value: Raw{Text: "bytes"}}}, 1,
			"parameter value of class w has an effect only with counting=true; without it, leave it out"},
	} {
		_, err := c.Bind(bad.args)
		var be *BindError
		if !errors.As(err, &be) || be.Error() != bad.want || be.Arg != bad.at {
			t.Errorf("%v: %v (%+v), want %q at argument %d", bad.args, err, be, bad.want, bad.at)
		}
	}
}
