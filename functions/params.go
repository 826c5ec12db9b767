package functions

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ParamType is the type of a parameter value.
type ParamType uint8

const (
	String   ParamType = iota + 1 // any word, string or number, as text
	Int                           // integer; K, M, G multiply by 10^3, 10^6, 10^9
	Size                          // bytes; units B, KB, MB, GB (powers of 1024)
	Duration                      // units ns, us, ms, s, m, h (a unit is required)
	Float                         // decimal number
	Bool                          // true/false, yes/no, on/off, 1/0
)

func (t ParamType) String() string {
	switch t {
	case String:
		return "string"
	case Int:
		return "int"
	case Size:
		return "size"
	case Duration:
		return "duration"
	case Float:
		return "float"
	case Bool:
		return "bool"
	}
	return "invalid"
}

// Param declares one parameter of a class.
type Param struct {
	Name     string
	Type     ParamType
	Default  string // as written in an expression; "" means no default
	Required bool
	Unit     string   // what the number counts, for docs ("packets", "bytes")
	Summary  string   // one line
	Enum     []string // allowed values of a String parameter, if restricted
	// Check validates a parsed value beyond its type (ranges, syntax); it
	// runs at populate time, so bad input never reaches instantiation.
	Check func(Value) error
	// File says that the value names a file the function reads or writes,
	// so that the flowgraph can refuse a graph that writes over its own
	// input, or writes one file twice.
	File FileUse
	// With names the parameter this one has an effect with: given without
	// it (a Bool one: not true), it would change nothing, and Bind refuses
	// it rather than let the user believe it did (sample's seed= is for
	// rate=, not every=).
	With string
}

// FileUse is what a function does with a file a parameter names.
type FileUse uint8

const (
	NoFile FileUse = iota
	FileRead
	FileWrite
)

// RawKind says how a value was written in the expression.
type RawKind uint8

const (
	RawWord RawKind = iota
	RawString
	RawNumber
)

// Raw is a parameter value as the expression wrote it.
type Raw struct {
	Kind RawKind
	Text string // the word, the unquoted string, or the number's digits
	Unit string // a number's unit suffix
}

// Arg is one argument of a function in an expression; Key is "" for a bare
// value, which binds to the class's first parameter.
type Arg struct {
	Key   string
	Value Raw
}

// Value is a bound parameter value.
type Value struct {
	Type  ParamType
	Set   bool // given explicitly or by a default
	Str   string
	Int   int64 // Int, Size (bytes)
	Dur   time.Duration
	Float float64
	Bool  bool
}

// String returns the value as it is written in canonical expressions.
func (v Value) String() string {
	switch v.Type {
	case String:
		return v.Str
	case Int:
		return strconv.FormatInt(v.Int, 10)
	case Size:
		return formatSize(v.Int)
	case Duration:
		return formatDuration(v.Dur)
	case Float:
		return strconv.FormatFloat(v.Float, 'f', -1, 64) // no exponent: it must lex as a number
	case Bool:
		return strconv.FormatBool(v.Bool)
	}
	return ""
}

// JSON returns the value as it appears in --json output.
func (v Value) JSON() any {
	switch v.Type {
	case Int, Size:
		return v.Int
	case Float:
		return v.Float
	case Bool:
		return v.Bool
	}
	return v.String()
}

// Params is the bound parameter set of a function, in declaration order.
type Params struct {
	class *Class
	vals  []Value
}

// BindError is a parameter error; Arg is the index of the offending
// argument, or -1 when the error is about a missing one.
type BindError struct {
	Arg int
	Msg string
}

func (e *BindError) Error() string { return e.Msg }

// Bind checks args against the class's schema and returns the bound
// parameters with defaults filled in.
func (c *Class) Bind(args []Arg) (Params, error) {
	p := Params{class: c, vals: make([]Value, len(c.Params))}
	given := make([]int, len(c.Params)) // the argument that gave it, +1
	for i, a := range args {
		key := a.Key
		if key == "" {
			if i != 0 || len(c.Params) == 0 {
				return p, &BindError{i, fmt.Sprintf("class %s takes no bare value here; write key=value", c.Name)}
			}
			key = c.Params[0].Name
		}
		j := c.paramIndex(key)
		if j < 0 {
			return p, &BindError{i, fmt.Sprintf("class %s has no parameter %q", c.Name, key)}
		}
		if p.vals[j].Set {
			return p, &BindError{i, fmt.Sprintf("parameter %s of class %s given twice", key, c.Name)}
		}
		v, err := c.Params[j].parse(a.Value)
		if err != nil {
			return p, &BindError{i, fmt.Sprintf("parameter %s of class %s: %v", key, c.Name, err)}
		}
		p.vals[j] = v
		given[j] = i + 1
	}
	for j, par := range c.Params {
		if p.vals[j].Set {
			continue
		}
		if par.Required {
			return p, &BindError{-1, fmt.Sprintf("class %s needs parameter %s (%s)", c.Name, par.Name, par.Summary)}
		}
		p.vals[j] = Value{Type: par.Type}
		if par.Default != "" {
			v, err := par.parse(literalRaw(par.Default))
			if err != nil {
				return p, &BindError{-1, fmt.Sprintf("class %s parameter %s: bad default: %v", c.Name, par.Name, err)}
			}
			p.vals[j] = v
		}
	}
	for j, par := range c.Params {
		if par.With == "" || given[j] == 0 {
			continue
		}
		if w := p.Get(par.With); !w.Set || w.Type == Bool && !w.Bool {
			want := par.With + "="
			if w.Type == Bool {
				want = par.With + "=true"
			}
			return p, &BindError{given[j] - 1, fmt.Sprintf("parameter %s of class %s has an effect only with %s; without it, leave it out", par.Name, c.Name, want)}
		}
	}
	return p, nil
}

func (c *Class) paramIndex(name string) int {
	for i := range c.Params {
		if c.Params[i].Name == name {
			return i
		}
	}
	return -1
}

// Class returns the class the parameters belong to.
func (p Params) Class() *Class { return p.class }

// Get returns the value of the named parameter; it panics on a name the
// class does not declare (a programming error in the class).
func (p Params) Get(name string) Value {
	i := p.class.paramIndex(name)
	if i < 0 {
		panic(fmt.Sprintf("functions: class %s has no parameter %q", p.class.Name, name))
	}
	return p.vals[i]
}

func (p Params) Str(name string) string             { return p.Get(name).Str }
func (p Params) Int(name string) int64              { return p.Get(name).Int }
func (p Params) Duration(name string) time.Duration { return p.Get(name).Dur }
func (p Params) Float(name string) float64          { return p.Get(name).Float }
func (p Params) Bool(name string) bool              { return p.Get(name).Bool }
func (p Params) Has(name string) bool               { return p.Get(name).Set }

// Each calls f for every set parameter in declaration order.
func (p Params) Each(f func(name string, v Value)) {
	for i, v := range p.vals {
		if v.Set {
			f(p.class.Params[i].Name, v)
		}
	}
}

// Files calls f for every set parameter that names a file ("-", standard
// input or output, is not a file).
func (p Params) Files(f func(path string, use FileUse)) {
	for i, v := range p.vals {
		if u := p.class.Params[i].File; u != NoFile && v.Set && v.Str != "" && v.Str != "-" {
			f(v.Str, u)
		}
	}
}

// Canonical returns the parameters as "k=v,k=v" in declaration order, with
// defaults filled in: two functions of one class are identical exactly when
// their canonical parameters are equal.
func (p Params) Canonical() string {
	var b strings.Builder
	p.Each(func(name string, v Value) {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(name)
		b.WriteByte('=')
		if v.Type == String {
			b.WriteString(strconv.Quote(v.Str))
		} else {
			b.WriteString(v.String())
		}
	})
	return b.String()
}

// DefaultValue returns the parameter's default, bound, and whether it has
// one.
func (par *Param) DefaultValue() (Value, bool) {
	if par.Default == "" {
		return Value{}, false
	}
	v, err := par.parse(literalRaw(par.Default))
	return v, err == nil
}

// literalRaw interprets a default the way the lexer would a bare token.
func literalRaw(s string) Raw {
	digits := strings.TrimRightFunc(s, func(r rune) bool { return r >= 'A' && r <= 'z' })
	if _, err := strconv.ParseFloat(digits, 64); err == nil && digits != "" {
		return Raw{Kind: RawNumber, Text: digits, Unit: s[len(digits):]}
	}
	return Raw{Kind: RawWord, Text: s}
}

func (par *Param) parse(r Raw) (Value, error) {
	v := Value{Type: par.Type, Set: true}
	num := func() (float64, error) {
		if r.Kind != RawNumber {
			return 0, fmt.Errorf("want a number, got %q", r.Text)
		}
		return strconv.ParseFloat(r.Text, 64)
	}
	switch par.Type {
	case String:
		v.Str = r.Text + r.Unit
		if i := strings.IndexByte(v.Str, 0); i >= 0 {
			// C strings (libpcap's filters, interface and file names)
			// would end there and silently mean something shorter.
			return v, fmt.Errorf("%q holds a NUL byte at offset %d; a string parameter cannot contain one", v.Str, i)
		}
		if len(par.Enum) > 0 && !slices.Contains(par.Enum, v.Str) {
			return v, fmt.Errorf("%q is not one of %s", v.Str, strings.Join(par.Enum, ", "))
		}
	case Int:
		f, err := num()
		if err != nil {
			return v, err
		}
		mult := map[string]float64{"": 1, "K": 1e3, "M": 1e6, "G": 1e9}[r.Unit]
		if mult == 0 {
			return v, fmt.Errorf("unit %q does not apply to a count (use K, M or G)", r.Unit)
		}
		if math.Abs(f*mult) > math.MaxInt64/2 {
			return v, fmt.Errorf("%s%s is out of range", r.Text, r.Unit)
		}
		if f*mult != math.Trunc(f*mult) {
			return v, fmt.Errorf("%s%s is not a whole number", r.Text, r.Unit)
		}
		v.Int = int64(f * mult)
	case Size:
		f, err := num()
		if err != nil {
			return v, err
		}
		mult := map[string]float64{"": 1, "B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}[r.Unit]
		if mult == 0 {
			return v, fmt.Errorf("unit %q does not apply to a size (use B, KB, MB or GB)", r.Unit)
		}
		if f < 0 || f*mult != math.Trunc(f*mult) || f*mult > 1<<50 {
			return v, fmt.Errorf("%s%s is not a size in whole bytes", r.Text, r.Unit)
		}
		v.Int = int64(f * mult)
	case Duration:
		f, err := num()
		if err != nil {
			return v, err
		}
		unit := map[string]time.Duration{"ns": time.Nanosecond, "us": time.Microsecond, "ms": time.Millisecond,
			"s": time.Second, "m": time.Minute, "h": time.Hour}[r.Unit]
		if unit == 0 {
			return v, fmt.Errorf("a duration needs a unit (ns, us, ms, s, m, h), got %q", r.Text+r.Unit)
		}
		if f < 0 || f*float64(unit) > math.MaxInt64/2 {
			return v, fmt.Errorf("duration %s%s out of range", r.Text, r.Unit)
		}
		v.Dur = time.Duration(f * float64(unit))
	case Float:
		f, err := num()
		if err != nil {
			return v, err
		}
		if r.Unit != "" {
			return v, fmt.Errorf("unit %q does not apply here", r.Unit)
		}
		v.Float = f
	case Bool:
		switch strings.ToLower(r.Text + r.Unit) {
		case "true", "yes", "on", "1":
			v.Bool = true
		case "false", "no", "off", "0":
		default:
			return v, fmt.Errorf("want true or false, got %q", r.Text+r.Unit)
		}
	default:
		return v, fmt.Errorf("parameter type %d unknown", par.Type)
	}
	if par.Check != nil {
		if err := par.Check(v); err != nil {
			return v, err
		}
	}
	return v, nil
}

func formatSize(n int64) string {
	for _, u := range []struct {
		s string
		m int64
	}{{"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}} {
		if n != 0 && n%u.m == 0 {
			return strconv.FormatInt(n/u.m, 10) + u.s
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

func formatDuration(d time.Duration) string {
	for _, u := range []struct {
		s string
		m time.Duration
	}{{"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}, {"ms", time.Millisecond}, {"us", time.Microsecond}} {
		if d != 0 && d%u.m == 0 {
			return strconv.FormatInt(int64(d/u.m), 10) + u.s
		}
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}

// Raw returns the value as an expression would write it: parsing it for
// a parameter of the value's type gives the value back.
func (v Value) Raw() Raw {
	s := v.String()
	switch v.Type {
	case String:
		return Raw{Kind: RawString, Text: s}
	case Bool:
		return Raw{Kind: RawWord, Text: s}
	}
	return literalRaw(s)
}

// Args returns the set parameters as the arguments that bind them again
// (Class.Bind), by name: how parameters cross to a class's other half
// (a plugin process).
func (p Params) Args() []Arg {
	var args []Arg
	p.Each(func(name string, v Value) { args = append(args, Arg{Key: name, Value: v.Raw()}) })
	return args
}

// CheckArg parses r as the value of the class's parameter name and runs
// the parameter's Check on it, as Bind does.
func (c *Class) CheckArg(name string, r Raw) error {
	par, ok := c.Param(name)
	if !ok {
		return fmt.Errorf("class %s has no parameter %q", c.Name, name)
	}
	_, err := par.parse(r)
	return err
}
