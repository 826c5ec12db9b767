package event

import (
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/ffpf-go/ffpf/lang"
)

// The one-line form, field by field (README.md has the whole grammar):
//
//	line        = name ":" filter ";" predicate ";" granularity ";" interval .
//	filter      = "*" | conjunction { "|" conjunction } .       // "|" is OR
//	conjunction = cond { "," cond } .
//	cond        = ("srcip"|"dstip") "=" cidr | ("srcport"|"dstport") "=" port ["-" port]
//	            | "proto" "=" ("tcp"|"udp"|"icmp"|0..255) .
//	granularity = "5-tuple" | gfield { "," gfield } .
//	gfield      = ("srcip"|"dstip") ["/" bits] | "srcport" | "dstport" | "proto" .
//	interval    = number ("ns"|"us"|"ms"|"s") .

// Error is a definition's error: Pos (when known) and one sentence.
type Error struct {
	Pos Pos
	Msg string

	part string // the part of the definition at fault, for YAML's line
}

// Error returns "file:line: sentence", or the sentence alone when the
// definition has no place (ParseLine of a string).
func (e *Error) Error() string {
	// One line, whatever a quoted value held.
	m := strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(e.Msg)
	if e.Pos.File == "" && e.Pos.Line == 0 {
		return m
	}
	return e.Pos.String() + ": " + m
}

// String returns "file:line" ("line 3" without a file, "file" without a line).
func (p Pos) String() string {
	switch {
	case p.File == "":
		return "line " + strconv.Itoa(p.Line)
	case p.Line == 0:
		return p.File
	}
	return p.File + ":" + strconv.Itoa(p.Line)
}

func errorf(format string, a ...any) error {
	return &Error{Msg: fmt.Sprintf(format, a...)}
}

// inPart marks err as about one part of a definition (filter, predicate,
// granularity or interval).
func inPart(part string, err error) error {
	if e, ok := err.(*Error); ok && err != nil {
		return &Error{Pos: e.Pos, Msg: e.Msg, part: part}
	}
	return err
}

// at gives err the position pos unless it has one.
func at(pos Pos, err error) error {
	if err == nil {
		return nil
	}
	if e, ok := err.(*Error); ok {
		if e.Pos == (Pos{}) {
			return &Error{Pos: pos, Msg: e.Msg, part: e.part}
		}
		return e
	}
	return &Error{Pos: pos, Msg: err.Error()}
}

// AnyFilter matches every packet: the filter "*".
func AnyFilter() Filter { return Filter{SrcPort: AnyPort, DstPort: AnyPort, Proto: -1} }

// WholeAddress is the Bits of a granularity field that keeps a whole address
// of either family ("srcip" without a prefix length). Like a flow key's
// srcip/N, a length keeps min(N, 32) bits of an IPv4 address and N of an
// IPv6 one.
const WholeAddress = 128

// FieldNames lists the packet fields a filter or a granularity names.
var FieldNames = []string{"srcip", "dstip", "srcport", "dstport", "proto"}

// ParseLine parses one event in the one-line form
//
//	heavy: dstip=10.0.128.0/24; sum(volume) > 125KB; 5-tuple; 10ms
//
// and checks it as Validate does, except for the interval's relation to an
// epoch (Validate's). Errors are one sentence without a position.
func ParseLine(s string) (Event, error) {
	var ev Event
	name, rest, ok := strings.Cut(s, ":")
	if !ok {
		return ev, errorf("an event is \"name: filter; predicate; granularity; interval\" and %q has no name before ':'", short(s))
	}
	ev.Name = strings.TrimSpace(name)
	if err := checkName(ev.Name); err != nil {
		return ev, err
	}
	parts := strings.Split(rest, ";")
	if len(parts) != 4 {
		return ev, errorf("event %s has %d parts after its name where 4 are needed: filter; predicate; granularity; interval", ev.Name, len(parts))
	}
	var err error
	if ev.Filters, err = ParseFilter(parts[0]); err != nil {
		return ev, errorf("event %s: %s", ev.Name, msg(err))
	}
	if ev.Predicate, err = ParsePredicate(parts[1]); err != nil {
		return ev, errorf("event %s: %s", ev.Name, msg(err))
	}
	if ev.Granularity, err = ParseGranularity(parts[2]); err != nil {
		return ev, errorf("event %s: %s", ev.Name, msg(err))
	}
	if ev.Interval, err = ParseInterval(parts[3]); err != nil {
		return ev, errorf("event %s: %s", ev.Name, msg(err))
	}
	return ev, check(ev)
}

func msg(err error) string {
	if e, ok := err.(*Error); ok {
		return e.Msg
	}
	return err.Error()
}

// short quotes at most 40 bytes of s in messages.
func short(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 40 {
		return s[:37] + "..."
	}
	return s
}

func checkName(name string) error {
	if name == "" {
		return errorf("an event needs a name before ':'")
	}
	for i, r := range name {
		ok := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' ||
			i > 0 && (r >= '0' && r <= '9' || r == '-' || r == '.')
		if !ok {
			return errorf("event name %q must start with a letter or '_' and hold only letters, digits, '_', '-' and '.'", name)
		}
	}
	return nil
}

// ParseFilter parses the filter part: "*" (every packet) or conjunctions of
// conditions joined with ',', alternatives joined with '|'.
func ParseFilter(s string) ([]Filter, error) {
	s = strings.TrimSpace(s)
	if s == "*" || s == "" {
		return []Filter{AnyFilter()}, nil
	}
	var out []Filter
	for _, alt := range strings.Split(s, "|") {
		f, err := parseConjunction(alt)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// orAny reduces filters of which one matches every packet to that one, so
// the canonical "*" reads back to the same Event.
func orAny(fs []Filter) []Filter {
	for _, f := range fs {
		if f == AnyFilter() {
			return []Filter{f}
		}
	}
	return fs
}

func parseConjunction(s string) (Filter, error) {
	f := AnyFilter()
	s = strings.TrimSpace(s)
	if s == "" {
		return f, errorf("an empty filter alternative (write * for every packet)")
	}
	if s == "*" {
		return f, errorf("* stands alone: it already matches every packet")
	}
	seen := map[string]bool{}
	for _, c := range strings.Split(s, ",") {
		c = strings.TrimSpace(c)
		key, val, ok := strings.Cut(c, "=")
		key = strings.ToLower(strings.TrimSpace(key))
		val = strings.TrimSpace(val)
		if c == "" {
			return f, errorf("an empty condition in filter %q", short(s))
		}
		if !ok {
			return f, errorf("filter condition %q is not field=value", short(c))
		}
		if strings.ContainsAny(val, " \t") {
			return f, errorf("filter condition %q has a space in its value: join conditions with ','", short(c))
		}
		if !isField(key) {
			return f, unknown("filter field", key, FieldNames)
		}
		if seen[key] {
			return f, errorf("filter field %s is given twice in %q", key, short(s))
		}
		seen[key] = true
		var err error
		switch key {
		case "srcip":
			f.SrcIP, err = parsePrefix(key, val)
		case "dstip":
			f.DstIP, err = parsePrefix(key, val)
		case "srcport":
			f.SrcPort, err = parsePorts(key, val)
		case "dstport":
			f.DstPort, err = parsePorts(key, val)
		case "proto":
			f.Proto, err = parseProto(val)
		}
		if err != nil {
			return f, err
		}
	}
	return f, checkFilter(f)
}

func isField(s string) bool {
	for _, n := range FieldNames {
		if s == n {
			return true
		}
	}
	return false
}

func unknown(what, name string, candidates []string) error {
	if sug, ok := lang.Suggest(name, candidates); ok {
		return errorf("unknown %s %q; did you mean %q?", what, name, sug)
	}
	return errorf("unknown %s %q (one of %s)", what, name, strings.Join(candidates, ", "))
}

func parsePrefix(field, s string) (netip.Prefix, error) {
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return p, errorf("%s=%s is not an address or an address/length", field, s)
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return p, errorf("%s=%s is not an address or an address/length", field, s)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if m := p.Masked(); m != p {
		return p, errorf("%s=%s has bits set past its prefix length; did you mean %s?", field, s, m)
	}
	return p, nil
}

func parsePorts(field, s string) (PortRange, error) {
	lo, hi, rng := strings.Cut(s, "-")
	l, err1 := parsePort(lo)
	h := l
	var err2 error
	if rng {
		h, err2 = parsePort(hi)
	}
	if err1 != nil || err2 != nil {
		return PortRange{}, errorf("%s=%s is not a port (0..65535) or a range lo-hi", field, s)
	}
	if l > h {
		return PortRange{}, errorf("%s=%s is an empty range: %d is above %d", field, s, l, h)
	}
	return PortRange{l, h}, nil
}

func parsePort(s string) (uint16, error) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, strconv.ErrSyntax
	}
	v, err := strconv.ParseUint(s, 10, 16)
	return uint16(v), err
}

var protoNames = map[string]int{"icmp": 1, "tcp": 6, "udp": 17}

func parseProto(s string) (int, error) {
	if p, ok := protoNames[strings.ToLower(s)]; ok {
		return p, nil
	}
	if s != "" && s[0] >= '0' && s[0] <= '9' {
		if v, err := strconv.ParseUint(s, 10, 8); err == nil {
			return int(v), nil
		}
		return 0, errorf("proto=%s is out of range 0..255", s)
	}
	return 0, unknown("protocol", strings.ToLower(s), []string{"tcp", "udp", "icmp"})
}

// checkFilter refuses a conjunction no packet can match.
func checkFilter(f Filter) error {
	if f.SrcIP.IsValid() && f.DstIP.IsValid() && f.SrcIP.Addr().Is4() != f.DstIP.Addr().Is4() {
		return errorf("filter srcip=%s and dstip=%s mix IPv4 and IPv6, so no packet matches", f.SrcIP, f.DstIP)
	}
	if (f.Proto == 1 || f.Proto == 58) && (f.SrcPort != AnyPort || f.DstPort != AnyPort) {
		return errorf("filter proto=%s has no ports, so a port condition matches no packet", protoString(f.Proto))
	}
	if f.SrcPort.Lo > f.SrcPort.Hi || f.DstPort.Lo > f.DstPort.Hi {
		return errorf("filter has an empty port range")
	}
	if f.Proto < -1 || f.Proto > 255 {
		return errorf("filter protocol %d is out of range 0..255", f.Proto)
	}
	return nil
}

// ParseGranularity parses "5-tuple" (nil: every flow its own bucket) or a
// list of fields with optional prefix lengths: "srcip/24,dstip". Fields
// come back in the order srcip, dstip, srcport, dstport, proto; naming all
// five whole is the 5-tuple.
func ParseGranularity(s string) ([]Field, error) {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "5-tuple", "5-tuples", "5tuple":
		return nil, nil
	case "":
		return nil, errorf("an empty granularity (write 5-tuple, or fields such as srcip/24,dstip)")
	}
	var got [5]*Field
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		name, bits, hasBits := strings.Cut(part, "/")
		name = strings.ToLower(strings.TrimSpace(name))
		if part == "" {
			return nil, errorf("an empty field in granularity %q", short(s))
		}
		i := fieldIndex(name)
		if i < 0 {
			return nil, unknown("granularity field", name, append([]string{"5-tuple"}, FieldNames...))
		}
		if got[i] != nil {
			return nil, errorf("granularity field %s is given twice", name)
		}
		f := Field{Name: name}
		if name == "srcip" || name == "dstip" {
			f.Bits = WholeAddress
		}
		if hasBits {
			if f.Bits == 0 {
				return nil, errorf("granularity field %s takes no prefix length: only srcip and dstip do", name)
			}
			v, err := strconv.ParseUint(strings.TrimSpace(bits), 10, 8)
			if err != nil || v > 128 {
				return nil, errorf("granularity %s/%s: the prefix length must be a number in 0..128", name, bits)
			}
			f.Bits = int(v)
		}
		got[i] = &f
	}
	var out []Field
	for _, f := range got {
		if f != nil {
			out = append(out, *f)
		}
	}
	if len(out) == 5 && out[0].Bits == WholeAddress && out[1].Bits == WholeAddress {
		return nil, nil
	}
	return out, nil
}

func fieldIndex(name string) int {
	for i, n := range FieldNames {
		if n == name {
			return i
		}
	}
	return -1
}

var durationUnits = []struct {
	name string
	d    time.Duration
}{{"s", time.Second}, {"ms", time.Millisecond}, {"us", time.Microsecond}, {"ns", time.Nanosecond}}

// ParseInterval parses an interval: a positive number of ns, us, ms or s.
func ParseInterval(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	digits, unit := splitNumber(s)
	if digits == "" {
		return 0, errorf("interval %q is not a number with a unit, such as 10ms", short(s))
	}
	if unit == "µs" {
		unit = "us"
	}
	var mult time.Duration
	var names []string
	for _, u := range durationUnits {
		names = append(names, u.name)
		if u.name == unit {
			mult = u.d
		}
	}
	if unit == "" {
		return 0, errorf("interval %s needs a unit (ns, us, ms or s), such as %sms", s, s)
	}
	if mult == 0 {
		return 0, unknown("interval unit", unit, names)
	}
	// Scale the decimal exactly: "1.5ms" is 1500000ns with no rounding.
	whole, frac, _ := strings.Cut(digits, ".")
	ns := new(decimal)
	if !ns.set(whole, frac, int64(mult)) {
		return 0, errorf("interval %s is not a whole number of nanoseconds below 292 years", s)
	}
	if ns.v <= 0 {
		return 0, errorf("interval %s must be positive", s)
	}
	return time.Duration(ns.v), nil
}

// decimal is just enough decimal arithmetic for ParseInterval: whole.frac × mult
// as an exact int64.
type decimal struct{ v int64 }

func (b *decimal) set(whole, frac string, mult int64) bool {
	frac = strings.TrimRight(frac, "0")
	scale := int64(1)
	for range frac {
		if scale > math.MaxInt64/10 {
			return false
		}
		scale *= 10
	}
	if whole == "" {
		whole = "0"
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return false
	}
	var f int64
	if frac != "" {
		if f, err = strconv.ParseInt(frac, 10, 64); err != nil {
			return false
		}
	}
	if mult%scale != 0 || w > math.MaxInt64/mult {
		return false
	}
	v := w * mult
	fv := f * (mult / scale)
	if v > math.MaxInt64-fv {
		return false
	}
	b.v = v + fv
	return true
}

// splitNumber splits "125KB" into "125" and "KB"; digits is "" when s does
// not start with a decimal number.
func splitNumber(s string) (digits, unit string) {
	i, dot, any := 0, false, false
	for ; i < len(s); i++ {
		c := s[i]
		if c >= '0' && c <= '9' {
			any = true
		} else if c == '.' && !dot {
			dot = true
		} else {
			break
		}
	}
	if !any {
		return "", s
	}
	return s[:i], s[i:]
}

// String returns the event's canonical one-line form, which ParseLine reads
// back to an equal Event (Pos aside).
func (ev Event) String() string {
	var b strings.Builder
	b.WriteString(ev.Name)
	b.WriteString(": ")
	b.WriteString(FilterString(ev.Filters))
	b.WriteString("; ")
	if ev.Predicate != nil {
		b.WriteString(ExprString(ev.Predicate))
	}
	b.WriteString("; ")
	b.WriteString(GranularityString(ev.Granularity))
	b.WriteString("; ")
	b.WriteString(IntervalString(ev.Interval))
	return b.String()
}

// FilterString prints filters canonically: "*" when one of them matches
// every packet, else conjunctions joined with " | ".
func FilterString(fs []Filter) string {
	var alts []string
	for _, f := range fs {
		s := f.String()
		if s == "*" {
			return s
		}
		alts = append(alts, s)
	}
	return strings.Join(alts, " | ")
}

// String prints a conjunction: "dstip=10.0.128.0/24,dstport=80", or "*".
func (f Filter) String() string {
	var c []string
	if f.SrcIP.IsValid() {
		c = append(c, "srcip="+prefixString(f.SrcIP))
	}
	if f.DstIP.IsValid() {
		c = append(c, "dstip="+prefixString(f.DstIP))
	}
	if f.SrcPort != AnyPort {
		c = append(c, "srcport="+f.SrcPort.String())
	}
	if f.DstPort != AnyPort {
		c = append(c, "dstport="+f.DstPort.String())
	}
	if f.Proto >= 0 {
		c = append(c, "proto="+protoString(f.Proto))
	}
	if len(c) == 0 {
		return "*"
	}
	return strings.Join(c, ",")
}

func prefixString(p netip.Prefix) string {
	if p.Bits() == p.Addr().BitLen() {
		return p.Addr().String()
	}
	return p.String()
}

// String prints "80" or "1024-65535".
func (r PortRange) String() string {
	if r.Lo == r.Hi {
		return strconv.Itoa(int(r.Lo))
	}
	return strconv.Itoa(int(r.Lo)) + "-" + strconv.Itoa(int(r.Hi))
}

func protoString(p int) string {
	for n, v := range protoNames {
		if v == p {
			return n
		}
	}
	return strconv.Itoa(p)
}

// GranularityString prints "5-tuple" for nil, else "srcip/24,dstip".
func GranularityString(g []Field) string {
	if len(g) == 0 {
		return "5-tuple"
	}
	s := make([]string, len(g))
	for i, f := range g {
		s[i] = f.String()
	}
	return strings.Join(s, ",")
}

// String prints "dstip/24", or the bare name for a whole field.
func (f Field) String() string {
	if f.Name != "srcip" && f.Name != "dstip" || f.Bits == WholeAddress {
		return f.Name
	}
	return f.Name + "/" + strconv.Itoa(f.Bits)
}

// IntervalString prints d in the largest unit that divides it: "10ms".
func IntervalString(d time.Duration) string {
	for _, u := range durationUnits {
		if d%u.d == 0 && d != 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}
