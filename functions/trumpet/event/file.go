package event

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/ffpf-go/ffpf/functions"
)

// Parse reads a file of event definitions: YAML (a name ending in .yaml or
// .yml, or a text whose first line is "events:" or "---")
//
//	events:
//	  - name: heavy
//	    filter: dstip=10.0.128.0/24     # a list of filters means OR
//	    predicate: sum(volume) > 125KB
//	    granularity: 5-tuple
//	    interval: 10ms
//
// or one event a line in the one-line form, with blank lines and lines
// starting with '#' skipped. Each event's Pos names file and line. It checks
// what ParseLine checks and refuses a name defined twice; the interval's
// relation to an epoch is Validate's. Errors read "file:line: sentence".
func Parse(file string, src []byte) ([]Event, error) {
	var evs []Event
	var err error
	if isYAML(file, src) {
		evs, err = parseYAML(file, src)
	} else {
		evs, err = parseLines(file, src)
	}
	if err != nil {
		return nil, err
	}
	first := map[string]Pos{}
	for _, ev := range evs {
		if p, dup := first[ev.Name]; dup {
			return nil, &Error{Pos: ev.Pos, Msg: fmt.Sprintf("event %s is defined twice (first at %s)", ev.Name, p)}
		}
		first[ev.Name] = ev.Pos
	}
	if len(evs) == 0 {
		return nil, &Error{Pos: Pos{File: file, Line: 1}, Msg: "the file defines no event"}
	}
	return evs, nil
}

// ParseFile reads and parses the file at path (see Parse). The file must
// be a regular file of at most 1 MiB (functions.ReadFile): a device, a
// FIFO, a directory or a capture named by mistake is refused at once with
// a *functions.FileError, as one that cannot be opened is.
func ParseFile(path string) ([]Event, error) {
	src, err := functions.ReadFile(path, "an events file")
	if err != nil {
		return nil, err
	}
	return Parse(path, src)
}

func isYAML(file string, src []byte) bool {
	switch strings.ToLower(filepath.Ext(file)) {
	case ".yaml", ".yml":
		return true
	}
	for _, line := range strings.Split(string(src), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		return line == "---" || strings.HasPrefix(line, "events:")
	}
	return false
}

func parseLines(file string, src []byte) ([]Event, error) {
	var evs []Event
	for i, line := range strings.Split(string(src), "\n") {
		pos := Pos{File: file, Line: i + 1}
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		ev, err := ParseLine(line)
		if err != nil {
			return nil, at(pos, err)
		}
		ev.Pos = pos
		evs = append(evs, ev)
	}
	return evs, nil
}

// yamlLine finds the line in a yaml.v3 error ("yaml: line 3: ..."); it
// is compiled at its first use, not at start-up.
var yamlLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^yaml: line (\d+): (.*)$`) })

// splitYAMLError splits a yaml.v3 error into its sentence and line.
func splitYAMLError(err error) (msg string, line int) {
	msg, line = err.Error(), 1
	if m := yamlLine().FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	return msg, line
}

// problemLine finds the line of a YAML syntax error. yaml.v3 reports the
// line where the construct around the error began ("while parsing a block
// mapping at line 2"), not the line at fault; the first prefix of the
// source, from that line on, that fails with the same sentence ends at the
// line at fault. Only on the error path, and for files of events, small.
func problemLine(src []byte, msg string, reported int) int {
	lines := bytes.SplitAfter(src, []byte("\n"))
	if len(lines) > 2000 {
		return reported
	}
	for k := max(reported, 1); k <= len(lines); k++ {
		var n yaml.Node
		err := yaml.Unmarshal(bytes.Join(lines[:k], nil), &n)
		if err == nil {
			continue
		}
		if m, _ := splitYAMLError(err); m == msg {
			return k
		}
	}
	return reported
}

var eventKeys = []string{"name", "filter", "predicate", "granularity", "interval"}

func parseYAML(file string, src []byte) ([]Event, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(src))
	if err := dec.Decode(&doc); err != nil {
		msg, line := splitYAMLError(err)
		line = problemLine(src, msg, line)
		if msg == "EOF" {
			msg = "the file is empty; it needs an events: list"
		}
		if lines := strings.Split(string(src), "\n"); line >= 1 && line <= len(lines) && strings.Contains(lines[line-1], ": *") {
			msg += " (quote a filter of every packet: filter: \"*\")"
		}
		return nil, &Error{Pos: Pos{File: file, Line: line}, Msg: msg}
	}
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		return nil, &Error{Pos: Pos{File: file, Line: next.Line}, Msg: "a second YAML document; put every event in one events: list"}
	}
	pos := func(n *yaml.Node) Pos { return Pos{File: file, Line: n.Line} }
	fail := func(n *yaml.Node, format string, a ...any) error {
		return &Error{Pos: pos(n), Msg: fmt.Sprintf(format, a...)}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		// An empty document ("---") has its node past the last line.
		return nil, &Error{Pos: Pos{File: file, Line: max(1, min(root.Line, bytes.Count(src, []byte("\n"))))},
			Msg: "the file must be a mapping with an events: list"}
	}
	var list *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value != "events" {
			return nil, at(pos(k), unknown("top-level key", k.Value, []string{"events"}))
		}
		if list != nil {
			return nil, fail(k, "events: is given twice")
		}
		list = v
	}
	if list == nil {
		return nil, fail(root, "the file has no events: list")
	}
	if list.Kind != yaml.SequenceNode {
		return nil, fail(list, "events: must be a list of events")
	}
	var evs []Event
	for _, item := range list.Content {
		ev, err := yamlEvent(file, item)
		if err != nil {
			return nil, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// yamlEvent reads one item of events: a mapping of the five keys, or a
// string in the one-line form.
func yamlEvent(file string, n *yaml.Node) (Event, error) {
	pos := func(n *yaml.Node) Pos { return Pos{File: file, Line: n.Line} }
	var ev Event
	if n.Kind == yaml.ScalarNode {
		ev, err := ParseLine(n.Value)
		ev.Pos = pos(n)
		return ev, at(pos(n), err)
	}
	if n.Kind != yaml.MappingNode {
		return ev, &Error{Pos: pos(n), Msg: "an event is a mapping of name, filter, predicate, granularity and interval"}
	}
	ev.Pos = pos(n)
	vals := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !contains(eventKeys, k.Value) {
			return ev, at(pos(k), unknown("event key", k.Value, eventKeys))
		}
		if vals[k.Value] != nil {
			return ev, &Error{Pos: pos(k), Msg: fmt.Sprintf("key %s is given twice", k.Value)}
		}
		if k.Value != "filter" && v.Kind != yaml.ScalarNode {
			return ev, &Error{Pos: pos(v), Msg: fmt.Sprintf("%s must be a single value", k.Value)}
		}
		vals[k.Value] = v
	}
	for _, k := range []string{"name", "predicate", "granularity", "interval"} {
		if vals[k] == nil {
			return ev, &Error{Pos: pos(n), Msg: fmt.Sprintf("an event needs a %s", k)}
		}
	}
	name := vals["name"]
	ev.Name = strings.TrimSpace(name.Value)
	if err := checkName(ev.Name); err != nil {
		return ev, at(pos(name), err)
	}
	wrap := func(n *yaml.Node, err error) error {
		return &Error{Pos: pos(n), Msg: fmt.Sprintf("event %s: %s", ev.Name, msg(err))}
	}
	var err error
	if f := vals["filter"]; f == nil {
		ev.Filters = []Filter{AnyFilter()}
	} else if f.Kind == yaml.ScalarNode {
		if ev.Filters, err = ParseFilter(f.Value); err != nil {
			return ev, wrap(f, err)
		}
	} else if f.Kind == yaml.SequenceNode && len(f.Content) > 0 {
		for _, alt := range f.Content {
			if alt.Kind != yaml.ScalarNode {
				return ev, &Error{Pos: pos(alt), Msg: fmt.Sprintf("event %s: each filter of the list is one string such as dstip=10.0.128.0/24,dstport=80", ev.Name)}
			}
			fs, err := ParseFilter(alt.Value)
			if err != nil {
				return ev, wrap(alt, err)
			}
			ev.Filters = append(ev.Filters, fs...)
		}
	} else {
		return ev, &Error{Pos: pos(f), Msg: fmt.Sprintf("event %s: filter is a string or a non-empty list of strings", ev.Name)}
	}
	if ev.Predicate, err = ParsePredicate(vals["predicate"].Value); err != nil {
		return ev, wrap(vals["predicate"], err)
	}
	if ev.Granularity, err = ParseGranularity(vals["granularity"].Value); err != nil {
		return ev, wrap(vals["granularity"], err)
	}
	if ev.Interval, err = ParseInterval(vals["interval"].Value); err != nil {
		return ev, wrap(vals["interval"], err)
	}
	ev.Filters = orAny(ev.Filters)
	if err := check(ev); err != nil {
		// Point at the line of the part at fault.
		e := err.(*Error)
		at := ev.Pos
		if v := vals[e.part]; v != nil {
			at = pos(v)
		}
		return ev, &Error{Pos: at, Msg: e.Msg, part: e.part}
	}
	return ev, nil
}
