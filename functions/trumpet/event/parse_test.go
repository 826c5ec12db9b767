package event

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// table2 are the paper's six Table 2 events in the one-line form.
var table2 = []struct{ in, canon string }{
	{"heavy: dstip=10.0.128.0/24; sum(volume) > 125KB; 5-tuple; 10ms",
		"heavy: dstip=10.0.128.0/24; sum(volume) > 125000; 5-tuple; 10ms"},
	{"burstloss: srcip=10.0.128.0/24; sum(is_lost & is_burst) / count() > 10%; 5-tuple; 10ms",
		"burstloss: srcip=10.0.128.0/24; sum(is_lost & is_burst) / count() > 0.1; 5-tuple; 10ms"},
	{"congestion: proto=TCP; 1 - (ack - ack_lastepoch + dup) / (seq_lastepoch - ack_lastepoch) > 0.5; 5-tuples; 10ms",
		"congestion: proto=tcp; 1 - (ack - ack_lastepoch + dup) / (seq_lastepoch - ack_lastepoch) > 0.5; 5-tuple; 10ms"},
	{"spike: dstport=80, dstip=10.0.128.0/24; sum(volume) > 100MB; dstip/24; 10ms",
		"spike: dstip=10.0.128.0/24,dstport=80; sum(volume) > 100000000; dstip/24; 10ms"},
	{"reach: srcip=10.0.128.0/24,dstip=10.20.93.0/24; sum(is_lost) > 100; dstIP, srcIP; 10ms",
		"reach: srcip=10.0.128.0/24,dstip=10.20.93.0/24; sum(is_lost) > 100; srcip,dstip; 10ms"},
	{"deps: srcip=10.0.128.0/20; sum(volume) > 10GB; dstip/24,srcip/24; 1s",
		"deps: srcip=10.0.128.0/20; sum(volume) > 10000000000; srcip/24,dstip/24; 1s"},
}

func TestParseLineTable2(t *testing.T) {
	for _, c := range table2 {
		ev, err := ParseLine(c.in)
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if got := ev.String(); got != c.canon {
			t.Errorf("%s\n got %s\nwant %s", c.in, got, c.canon)
		}
		if err := Validate(ev, DefaultEpoch); err != nil {
			t.Errorf("%s: %v", c.in, err)
		}
		roundTrip(t, c.in)
	}
}

func TestParsedForm(t *testing.T) {
	ev, err := ParseLine("svc: dstip=10.0.128.0/24,dstport=80-89,proto=6 | srcip=2001:db8::/32,srcport=53; " +
		"sum(volume) > 125KB and count() >= 10 or max(rtt) > 1.5ms; srcip/48,dstport; 20ms")
	if err != nil {
		t.Fatal(err)
	}
	want := Event{
		Name: "svc",
		Filters: []Filter{
			{DstIP: netip.MustParsePrefix("10.0.128.0/24"), SrcPort: AnyPort, DstPort: PortRange{80, 89}, Proto: 6},
			{SrcIP: netip.MustParsePrefix("2001:db8::/32"), SrcPort: PortRange{53, 53}, DstPort: AnyPort, Proto: -1},
		},
		Predicate: Binary{"or",
			Binary{"and",
				Binary{">", Agg{Func: "sum", Var: "volume"}, Num(125000)},
				Binary{">=", Agg{Func: "count"}, Num(10)}},
			Binary{">", Agg{Func: "max", Var: "rtt"}, Num(1500000)}},
		Granularity: []Field{{"srcip", 48}, {"dstport", 0}},
		Interval:    20 * time.Millisecond,
	}
	if !reflect.DeepEqual(ev, want) {
		t.Fatalf("got  %#v\nwant %#v", ev, want)
	}
}

func TestUnits(t *testing.T) {
	for in, want := range map[string]float64{
		"125KB": 125000, "125K": 125000, "1.5MB": 1.5e6, "10GB": 1e10, "2TB": 2e12, "7B": 7,
		"1KiB": 1024, "1.5MiB": 1.5 * (1 << 20), "1GiB": 1 << 30, "0.1KB": 100,
		"10%": 0.1, "50%": 0.5, "3ns": 3, "3us": 3000, "3µs": 3000, "3ms": 3e6, "3s": 3e9,
		"3M": 3e6, "3G": 3e9, ".5": 0.5, "12": 12,
		"123456789012345": 123456789012345, "999999999999999KB": 999999999999999e3, "3.3MiB": 3460300.8,
		"100000000000000000000": 1e20, "0.000001": 1e-6,
	} {
		e, err := ParsePredicate("max(rtt) > " + in)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if got := float64(e.(Binary).R.(Num)); got != want {
			t.Errorf("%s = %v, want %v", in, got, want)
		}
	}
}

func TestIntervals(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"10ms": 10 * time.Millisecond, "1s": time.Second, "1.5s": 1500 * time.Millisecond,
		"250us": 250 * time.Microsecond, "0.01s": 10 * time.Millisecond, "7ns": 7, "20µs": 20 * time.Microsecond,
	} {
		got, err := ParseInterval(in)
		if err != nil || got != want {
			t.Errorf("%s = %v, %v; want %v", in, got, err, want)
		}
		if back, _ := ParseInterval(IntervalString(got)); back != got {
			t.Errorf("%s prints as %s", in, IntervalString(got))
		}
	}
}

// TestPrecedence checks the tree of operators against the reading a C or Go
// programmer expects, and that the printer keeps it.
func TestPrecedence(t *testing.T) {
	for in, want := range map[string]string{
		"count() - 1 - 2 > 0":                           "count() - 1 - 2 > 0",
		"count() - (1 - 2) > 0":                         "count() - (1 - 2) > 0",
		"(count() + 1) * 2 > 0":                         "(count() + 1) * 2 > 0",
		"count() + 1 * 2 > 0":                           "count() + 1 * 2 > 0",
		"count() / (2 / 3) > 0":                         "count() / (2 / 3) > 0",
		"count() > 1 and count() < 5 or sum(ecn) > 0":   "count() > 1 and count() < 5 or sum(ecn) > 0",
		"count() > 1 and (count() < 5 or sum(ecn) > 0)": "count() > 1 and (count() < 5 or sum(ecn) > 0)",
		"(count() > 1) == (sum(ecn) > 0)":               "(count() > 1) == (sum(ecn) > 0)",
		"-count() > -5":                                 "0 - count() > -5",
		"count() - -5 > 0":                              "count() - -5 > 0",
		"((count())) > 1":                               "count() > 1",
		"sum(volume)":                                   "sum(volume)",
		"SUM(Volume) > 1":                               "sum(volume) > 1",
		"stddev(rwnd) > avg(rwnd) * 0.5":                "stddev(rwnd) > avg(rwnd) * 0.5",
		"min(ttl) < 5 and max(ttl) > 60":                "min(ttl) < 5 and max(ttl) > 60",
		"max(seq) - min(seq) > 1MB":                     "max(seq) - min(seq) > 1000000",
		"sum(ecn & is_lost) <= 3":                       "sum(ecn & is_lost) <= 3",
	} {
		e, err := ParsePredicate(in)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if got := ExprString(e); got != want {
			t.Errorf("%s prints as %s, want %s", in, got, want)
		}
	}
	// 1 - 2 - 3 groups to the left: (1 - 2) - 3 = -4.
	e, _ := ParsePredicate("count() * 0 + 1 - 2 - 3")
	if v := Eval(e, func(Agg) float64 { return 7 }); v != -4 {
		t.Errorf("1 - 2 - 3 = %v", v)
	}
	e, _ = ParsePredicate("count() + 2 * 3")
	if v := Eval(e, func(Agg) float64 { return 1 }); v != 7 {
		t.Errorf("1 + 2 * 3 = %v", v)
	}
}

func TestBadLines(t *testing.T) {
	for in, want := range map[string]string{
		"heavy dstip=10.0.0.0/8; count() > 1; 5-tuple; 10ms":               "no name before ':'",
		"9x: *; count() > 1; 5-tuple; 10ms":                                `event name "9x" must start with a letter`,
		": *; count() > 1; 5-tuple; 10ms":                                  "needs a name",
		"x: *; count() > 1; 5-tuple":                                       "3 parts after its name where 4 are needed",
		"x: dstp=10.0.0.0/8; count() > 1; 5-tuple; 10ms":                   `unknown filter field "dstp"; did you mean "dstip"?`,
		"x: dstip=10.0.0.1/8; count() > 1; 5-tuple; 10ms":                  "did you mean 10.0.0.0/8?",
		"x: dstip=10.0.0.300; count() > 1; 5-tuple; 10ms":                  "dstip=10.0.0.300 is not an address",
		"x: dstip=fe80::1%eth0; count() > 1; 5-tuple; 10ms":                "is not an address",
		"x: dstport=80-70; count() > 1; 5-tuple; 10ms":                     "empty range",
		"x: dstport=70000; count() > 1; 5-tuple; 10ms":                     "not a port",
		"x: dstport=-5; count() > 1; 5-tuple; 10ms":                        "not a port",
		"x: proto=tpc; count() > 1; 5-tuple; 10ms":                         `unknown protocol "tpc"; did you mean "tcp"?`,
		"x: proto=256; count() > 1; 5-tuple; 10ms":                         "out of range 0..255",
		"x: proto=icmp,dstport=80; count() > 1; 5-tuple; 10ms":             "has no ports",
		"x: srcip=10.0.0.0/8,dstip=::/0; count() > 1; 5-tuple; 10ms":       "mix IPv4 and IPv6",
		"x: dstip=10.0.0.0/8,dstip=11.0.0.0/8; count() > 1; 5-tuple; 10ms": "dstip is given twice",
		"x: dstip=10.0.0.0/8 and dstport=80; count() > 1; 5-tuple; 10ms":   "join conditions with ','",
		"x: dstip; count() > 1; 5-tuple; 10ms":                             "not field=value",
		"x: * | dstport=80; count() > 1; 5-tuple; 10ms":                    "* stands alone",
		"x: dstport=80 |; count() > 1; 5-tuple; 10ms":                      "empty filter alternative",
		"x: *; sum(volme) > 1; 5-tuple; 10ms":                              `unknown variable "volme"; did you mean "volume"?`,
		"x: *; summ(volume) > 1; 5-tuple; 10ms":                            `unknown function "summ"; did you mean "sum"?`,
		"x: *; sum(volume) > 125kb; 5-tuple; 10ms":                         `unknown unit "kb"; did you mean "KB"?`,
		"x: *; sum(volume) > 1e6; 5-tuple; 10ms":                           "write the exponent as a unit",
		// a threshold is kept exactly or refused: it prints back as written
		"x: *; count() > 99999999999999999999999999; 5-tuple; 10ms":               "99999999999999999999999999 has more significant digits than a threshold keeps (it would be 100000000000000000000000000): write at most 15",
		"x: *; count() > 1234567890123456789; 5-tuple; 10ms":                      "(it would be 1234567890123456800)",
		"x: *; sum(volume) > 9007199254740993B; 5-tuple; 10ms":                    "(it would be 9007199254740992)",
		"x: *; volume > 1; 5-tuple; 10ms":                                         "per-packet variable: aggregate it",
		"x: *; sum > 1; 5-tuple; 10ms":                                            "sum is a function",
		"x: *; ack_lastepoch2 > 1; 5-tuple; 10ms":                                 `unknown variable "ack_lastepoch2"; did you mean "ack_lastepoch"?`,
		"x: *; count(volume) > 1; 5-tuple; 10ms":                                  "count() counts packets and takes no variable",
		"x: *; sum() > 1; 5-tuple; 10ms":                                          "sum() needs a variable",
		"x: *; sum(5) > 1; 5-tuple; 10ms":                                         "takes a variable name",
		"x: *; sum(volume & ecn) > 1; 5-tuple; 10ms":                              "& joins only the flags",
		"x: *; sum(ecn & is_lost & is_burst) > 1; 5-tuple; 10ms":                  "at most two variables",
		"x: *; max(ack_lastepoch) > 1; 5-tuple; 10ms":                             "value is read bare",
		"x: *; sum(volume) = 1; 5-tuple; 10ms":                                    "compare with ==",
		"x: *; sum(volume) > 1 && count() > 1; 5-tuple; 10ms":                     "&& is not an operator",
		"x: *; 1 < count() < 5; 5-tuple; 10ms":                                    "chains comparisons",
		"x: *; (count() > 1; 5-tuple; 10ms":                                       "'(' is not closed",
		"x: *; count() > ; 5-tuple; 10ms":                                         "ends where a value is expected",
		"x: *; count() 1; 5-tuple; 10ms":                                          `unexpected "1" after a complete expression`,
		"x: *; ; 5-tuple; 10ms":                                                   "empty predicate",
		"x: *; 1 > 0; 5-tuple; 10ms":                                              "reads no variable",
		"x: *; count() > 1 $; 5-tuple; 10ms":                                      "unexpected character '$'",
		"x: *; count() > 1; dstp; 10ms":                                           `unknown granularity field "dstp"; did you mean "dstip"?`,
		"x: *; count() > 1; srcport/8; 10ms":                                      "takes no prefix length",
		"x: *; count() > 1; srcip/129; 10ms":                                      "0..128",
		"x: *; count() > 1; srcip,srcip; 10ms":                                    "srcip is given twice",
		"x: *; count() > 1; ; 10ms":                                               "empty granularity",
		"x: dstip=10.0.128.0/24; count() > 1; dstip/16; 10ms":                     "granularity dstip/16 is coarser than the filter dstip=10.0.128.0/24 can give (a bucket would name 10.0.0.0/16 but hold only 10.0.128.0/24); use dstip/24 or finer",
		"x: dstip=10.0.128.0/24 | dstip=10.1.0.0/16; count() > 1; dstip/20; 10ms": "coarser than the filter dstip=10.0.128.0/24",
		"x: srcip=2001:db8::/48; count() > 1; srcip/32; 10ms":                     "use srcip/48 or finer",
		"x: srcip=10.0.0.0/8; count() > 1; srcip/48; 10ms":                        "longer than the filter's IPv4 address",
		"x: proto=tcp; ack > 1; srcip; 10ms":                                      "needs the 5-tuple granularity",
		"x: *; count() > 1; 5-tuple; 10":                                          "needs a unit",
		"x: *; count() > 1; 5-tuple; 10min":                                       `unknown interval unit "min"`,
		"x: *; count() > 1; 5-tuple; 0ms":                                         "must be positive",
		"x: *; count() > 1; 5-tuple; 1.5ns":                                       "whole number of nanoseconds",
		"x: *; count() > 1; 5-tuple; soon":                                        "not a number with a unit",
		"x: *; count() > 1; 5-tuple; 99999999999999s":                             "below 292 years",
	} {
		_, err := ParseLine(in)
		if err == nil {
			t.Errorf("%s: no error, want %q", in, want)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s:\n got %v\nwant %q", in, err, want)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error spans lines: %q", in, err)
		}
	}
}

func TestDeepNesting(t *testing.T) {
	in := "x: *; " + strings.Repeat("(", 100000) + "count()" + strings.Repeat(")", 100000) + " > 1; 5-tuple; 10ms"
	if _, err := ParseLine(in); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Fatalf("got %v", err)
	}
	in = "x: *; " + strings.Repeat("-", 100000) + "count() > 1; 5-tuple; 10ms"
	if _, err := ParseLine(in); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Fatalf("got %v", err)
	}
}

func TestValidate(t *testing.T) {
	ev, err := ParseLine("x: *; count() > 1; 5-tuple; 15ms")
	if err != nil {
		t.Fatal(err)
	}
	ev.Pos = Pos{"f.txt", 3}
	err = Validate(ev, DefaultEpoch)
	if want := "f.txt:3: event x: interval 15ms is not a multiple of the 10ms epoch; try 20ms"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	if err := Validate(ev, 5*time.Millisecond); err != nil {
		t.Errorf("15ms on a 5ms epoch: %v", err)
	}
	if err := Validate(ev, 0); err == nil {
		t.Error("a zero epoch passes")
	}
	// Events built in Go get the checks ParseLine makes.
	for _, bad := range []Event{
		{Name: "a", Filters: []Filter{AnyFilter()}, Predicate: Agg{Func: "sum", Var: "volum"}, Interval: DefaultEpoch},
		{Name: "a", Filters: []Filter{AnyFilter()}, Predicate: Binary{"^", Agg{Func: "count"}, Num(1)}, Interval: DefaultEpoch},
		{Name: "a", Filters: []Filter{AnyFilter()}, Predicate: Binary{">", Agg{Func: "count"}, nil}, Interval: DefaultEpoch},
		{Name: "a", Filters: nil, Predicate: Agg{Func: "count"}, Interval: DefaultEpoch},
		{Name: "a", Filters: []Filter{AnyFilter()}, Interval: DefaultEpoch},
		{Name: "a", Filters: []Filter{AnyFilter()}, Predicate: Agg{Func: "count"}},
		{Name: "a", Filters: []Filter{{SrcIP: netip.MustParsePrefix("10.0.0.1/8"), SrcPort: AnyPort, DstPort: AnyPort, Proto: -1}}, Predicate: Agg{Func: "count"}, Interval: DefaultEpoch},
		{Name: "a", Filters: []Filter{AnyFilter()}, Predicate: Agg{Func: "count"}, Granularity: []Field{{"vlan", 0}}, Interval: DefaultEpoch},
		{Name: "a", Filters: []Filter{AnyFilter()}, Predicate: Agg{Func: "count"}, Granularity: []Field{{"srcport", 8}}, Interval: DefaultEpoch},
		{Name: "a b", Filters: []Filter{AnyFilter()}, Predicate: Agg{Func: "count"}, Interval: DefaultEpoch},
	} {
		if err := Validate(bad, DefaultEpoch); err == nil {
			t.Errorf("%#v passes", bad)
		}
	}
	a, _ := ParseLine("a: *; count() > 1; 5-tuple; 10ms")
	b, _ := ParseLine("a: dstport=80; count() > 1; 5-tuple; 10ms")
	a.Pos, b.Pos = Pos{"e.yaml", 2}, Pos{"e.yaml", 9}
	if err := ValidateAll([]Event{a, b}, DefaultEpoch); err == nil || err.Error() != "e.yaml:9: event a is defined twice (first at e.yaml:2)" {
		t.Errorf("got %v", err)
	}
}

func TestParseLinesFile(t *testing.T) {
	src := "# Table 2\n\nheavy: dstip=10.0.128.0/24; sum(volume) > 125KB; 5-tuple; 10ms\n" +
		"  # indented comment\nspike: dstip=10.0.128.0/24,dstport=80; sum(volume) > 100MB; dstip/24; 10ms\r\n"
	evs, err := Parse("t2.txt", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Pos != (Pos{"t2.txt", 3}) || evs[1].Pos != (Pos{"t2.txt", 5}) || evs[1].Name != "spike" {
		t.Fatalf("got %+v", evs)
	}
	for src, want := range map[string]string{
		"a: *; count() > 1; 5-tuple; 10ms\n\nb: *; count() > 1; 5-tuple; 10s\nc: *; cuont() > 1; 5-tuple; 10ms\n": `t.txt:4: event c: unknown function "cuont"; did you mean "count"?`,
		"a: *; count() > 1; 5-tuple; 10ms\na: *; count() > 2; 5-tuple; 10ms\n":                                    "t.txt:2: event a is defined twice (first at t.txt:1)",
		"# nothing\n": "t.txt:1: the file defines no event",
	} {
		_, err := Parse("t.txt", []byte(src))
		if err == nil || err.Error() != want {
			t.Errorf("got %v\nwant %s", err, want)
		}
	}
}

func TestParseYAML(t *testing.T) {
	src := `# two events
events:
  - name: heavy
    filter: dstip=10.0.128.0/24          # conjunction with ','
    predicate: sum(volume) > 125KB
    granularity: 5-tuple
    interval: 10ms
  - name: svc
    filter:
      - dstip=10.0.128.0/24,dstport=80
      - dstip=10.0.130.0/24,dstport=80
    predicate: sum(volume) > 100MB
    granularity: dstip/24
    interval: 10ms
  - name: all
    predicate: count() > 1M
    granularity: srcip
    interval: 1s
  - "line: proto=udp; max(ttl) < 2; 5-tuple; 20ms"
`
	evs, err := Parse("e.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Pos.String()+" "+ev.String())
	}
	want := []string{
		"e.yaml:3 heavy: dstip=10.0.128.0/24; sum(volume) > 125000; 5-tuple; 10ms",
		"e.yaml:8 svc: dstip=10.0.128.0/24,dstport=80 | dstip=10.0.130.0/24,dstport=80; sum(volume) > 100000000; dstip/24; 10ms",
		"e.yaml:15 all: *; count() > 1000000; srcip; 1s",
		"e.yaml:19 line: proto=udp; max(ttl) < 2; 5-tuple; 20ms",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A file without the .yaml name is still read as YAML.
	if evs2, err := Parse("events", []byte(src)); err != nil || len(evs2) != 4 {
		t.Fatalf("sniffed: %v %v", evs2, err)
	}
	// A list with * is every packet.
	evs, err = Parse("e.yaml", []byte("events:\n  - name: a\n    filter: [dstport=80, \"*\"]\n    predicate: count() > 1\n    granularity: 5-tuple\n    interval: 10ms\n"))
	if err != nil || FilterString(evs[0].Filters) != "*" || len(evs[0].Filters) != 1 {
		t.Fatalf("got %v %v", evs, err)
	}
}

func TestParseYAMLErrors(t *testing.T) {
	ev := func(lines ...string) string {
		return "events:\n  - name: a\n" + strings.Join(lines, "\n") + "\n"
	}
	full := []string{"    filter: dstip=10.0.128.0/24", "    predicate: count() > 1", "    granularity: 5-tuple", "    interval: 10ms"}
	with := func(i int, line string) string {
		l := append([]string(nil), full...)
		l[i] = line
		return ev(l...)
	}
	for src, want := range map[string]string{
		"":                                      "e.yaml:1: the file is empty; it needs an events: list",
		"events: [\n":                           "e.yaml:1: did not find expected node content",
		"events:\n  - name: a\n    filter: *\n": `e.yaml:3: did not find expected alphabetic or numeric character (quote a filter of every packet: filter: "*")`,
		"- a\n":                                 "e.yaml:1: the file must be a mapping with an events: list",
		"event:\n  - a\n":                       `e.yaml:1: unknown top-level key "event"; did you mean "events"?`,
		"events: 3\n":                           "e.yaml:1: events: must be a list of events",
		"events:\n  - [1]\n":                    "e.yaml:2: an event is a mapping",
		"events:\n  - 'a: *; sum(x) > 1; 5-tuple; 10ms'\n":              `e.yaml:2: event a: unknown variable "x"`,
		with(0, "    filtre: dstip=10.0.128.0/24"):                      `e.yaml:3: unknown event key "filtre"; did you mean "filter"?`,
		with(0, "    filter: dstip=10.0.128.0/33"):                      "e.yaml:3: event a: dstip=10.0.128.0/33 is not an address",
		with(0, "    filter: {dstip: 10.0.0.0/8}"):                      "e.yaml:3: event a: filter is a string or a non-empty list",
		with(0, "    filter: []"):                                       "e.yaml:3: event a: filter is a string or a non-empty list",
		with(0, "    filter: [[a]]"):                                    "e.yaml:3: event a: each filter of the list is one string",
		with(0, "    filter:\n      - dstport=80\n      - dstport=x"):   "e.yaml:5: event a: dstport=x is not a port",
		with(1, "    predicate: sum(volme) > 1"):                        `e.yaml:4: event a: unknown variable "volme"; did you mean "volume"?`,
		with(1, "    predicate: [1]"):                                   "e.yaml:4: predicate must be a single value",
		with(2, "    granularity: dstip/16"):                            "e.yaml:5: event a: granularity dstip/16 is coarser than the filter dstip=10.0.128.0/24 can give",
		with(2, "    granularity: 5-tuple\n    granularity: srcip"):     "e.yaml:6: key granularity is given twice",
		with(3, "    interval: 10"):                                     "e.yaml:6: event a: interval 10 needs a unit",
		with(3, "    interval: 10mss"):                                  `e.yaml:6: event a: unknown interval unit "mss"; did you mean "ms"?`,
		with(3, "    x: 1"):                                             `e.yaml:6: unknown event key "x"`,
		ev(full[0], full[1], full[2]):                                   "e.yaml:2: an event needs a interval",
		"events:\n  - name: 7\n" + strings.Join(full, "\n"):             `e.yaml:2: event name "7" must start with a letter`,
		ev(full...) + "  - name: a\n" + strings.Join(full, "\n") + "\n": "e.yaml:7: event a is defined twice (first at e.yaml:2)",
		ev(full...) + "---\nevents: []\n":                               "e.yaml:7: a second YAML document",
		"events:\n  - name: a\n  - name: a\n":                           "e.yaml:2: an event needs a predicate",
	} {
		_, err := Parse("e.yaml", []byte(src))
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q:\n got %v\nwant %s", src, err, want)
		}
	}
}

func TestParseFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "e.yaml")
	if err := os.WriteFile(p, []byte("events:\n  - \"a: *; count() > 1; 5-tuple; 10ms\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	evs, err := ParseFile(p)
	if err != nil || len(evs) != 1 || evs[0].Pos != (Pos{p, 2}) {
		t.Fatalf("%v %v", evs, err)
	}
	_, err = ParseFile(filepath.Join(dir, "missing.yaml"))
	if want := "cannot read " + filepath.Join(dir, "missing.yaml") + ": no such file or directory"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

func TestAggregatesAndReported(t *testing.T) {
	ev, err := ParseLine(table2[2].in)
	if err != nil {
		t.Fatal(err)
	}
	want := []Agg{{Var: "ack"}, {Var: "ack", Prev: true}, {Var: "dup"}, {Var: "seq", Prev: true}}
	if got := Aggregates(ev.Predicate); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	// ack 3000 (end of interval), 1000 (end of the previous), dup 0, seq
	// 5000 at the previous end: 2000 of 4000 outstanding bytes acked, so
	// 1 - 0.5 = 0.5, not above 0.5.
	val := map[Agg]float64{{Var: "ack"}: 3000, {Var: "ack", Prev: true}: 1000, {Var: "dup"}: 0, {Var: "seq", Prev: true}: 5000}
	if v := Eval(ev.Predicate, func(a Agg) float64 { return val[a] }); v != 0 {
		t.Errorf("congestion fired at exactly 0.5")
	}
	if v := Eval(Reported(ev.Predicate), func(a Agg) float64 { return val[a] }); v != 0.5 {
		t.Errorf("reported %v, want 0.5", v)
	}
	val[Agg{Var: "ack"}] = 2000
	if v := Eval(ev.Predicate, func(a Agg) float64 { return val[a] }); v != 1 {
		t.Errorf("congestion did not fire with 1000 of 4000 bytes acked")
	}
}

// roundTrip checks that s's canonical form reads back to the same Event and
// prints the same.
func roundTrip(t testing.TB, s string) {
	ev, err := ParseLine(s)
	if err != nil {
		return
	}
	c := ev.String()
	ev2, err := ParseLine(c)
	if err != nil {
		t.Fatalf("%q prints as %q, which does not parse: %v", s, c, err)
	}
	if !reflect.DeepEqual(ev, ev2) {
		t.Fatalf("%q prints as %q, which reads back differently:\n%#v\n%#v", s, c, ev, ev2)
	}
	if c2 := ev2.String(); c2 != c {
		t.Fatalf("%q prints as %q, then as %q", s, c, c2)
	}
}

func FuzzRoundTrip(f *testing.F) {
	for _, c := range table2 {
		f.Add(c.in)
	}
	f.Add("svc: dstip=10.0.128.0/24,dstport=80-89,proto=6 | srcip=2001:db8::/32,srcport=53; sum(volume) > 125KB and count() >= 10 or max(rtt) > 1.5ms; srcip/48,dstport; 20ms")
	f.Add("x: *; -count() < -5 or (max(rtt) > 1.5ms and avg(ttl) != 64); srcip,dstip,srcport,dstport,proto; 1.5s")
	f.Add("x: *; (count() > 1) == (sum(ecn) > 0) - 0.000001; proto; 7ns")
	f.Fuzz(func(t *testing.T, s string) {
		roundTrip(t, s)
	})
}

// FuzzParse feeds files to Parse: no panic, and an error is one line that
// starts with the file's name and a line within the file.
func FuzzParse(f *testing.F) {
	f.Add([]byte("events:\n  - name: heavy\n    filter: dstip=10.0.128.0/24\n    predicate: sum(volume) > 125KB\n    granularity: 5-tuple\n    interval: 10ms\n"))
	f.Add([]byte("events:\n  - name: svc\n    filter: [dstport=80, \"dstip=10.0.0.0/8\"]\n    predicate: count() > 1\n    granularity: dstip/8\n    interval: 1s\n  - \"x: *; ack > 1; 5-tuple; 10ms\"\n"))
	f.Add([]byte("# lines\na: *; count() > 1; 5-tuple; 10ms\nb: proto=udp; max(ttl) < 2; srcip/24; 20ms\n"))
	f.Add([]byte("events: [\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		for _, name := range []string{"f.yaml", "f.txt"} {
			evs, err := Parse(name, src)
			if err == nil {
				for _, ev := range evs {
					if ev.Pos.File != name || ev.Pos.Line < 1 {
						t.Fatalf("event %s at %v", ev.Name, ev.Pos)
					}
					roundTrip(t, ev.String())
				}
				continue
			}
			e, ok := err.(*Error)
			if !ok || e.Pos.File != name || e.Pos.Line < 1 || e.Pos.Line > strings.Count(string(src), "\n")+strings.Count(string(src), "\r")+1 {
				t.Fatalf("%s: error %#v", name, err)
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("%s: error spans lines: %q", name, err)
			}
		}
	})
}
