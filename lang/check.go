package lang

import (
	"fmt"
	"slices"
	"strings"
)

// Schema describes the function classes a request may use, so that lang can
// validate names without importing the registry.
type Schema interface {
	// Class returns the parameters of the class with the given lowercased
	// name, in declaration order: the first one takes a bare value.
	Class(name string) (params []string, ok bool)
	// Classes returns the names of all classes, for suggestions.
	Classes() []string
}

// Check validates a parsed request against a schema: unknown classes and
// parameter keys (with a suggestion when one is close), bare values anywhere
// but first or for a class without parameters, parameters given twice
// (including a bare value plus its parameter's key), labels defined twice and
// references to undefined labels. Labels are global to the request and may
// be referenced before their definition; cycles are not checked here. A nil
// schema checks labels only. It returns the error nearest the start of the
// source, as an *Error, or nil.
func Check(r *Request, s Schema) error {
	if r == nil {
		return nil
	}
	c := &checker{s: s, src: r.src, labels: map[string]Pos{}}
	c.walk(r.Chains, c.define)
	c.walk(r.Chains, c.use)
	if c.err != nil {
		return c.err
	}
	return nil
}

type checker struct {
	s      Schema
	src    string
	labels map[string]Pos
	err    *Error
}

// wants reports whether an error at p would be kept: the earliest wins, as
// the two passes do not visit terms in one order. Callers ask before
// computing suggestions, which would otherwise cost O(errors × names).
func (c *checker) wants(p Pos) bool { return c.err == nil || p.Offset < c.err.Pos.Offset }

func (c *checker) errorf(p Pos, format string, args ...any) {
	if c.wants(p) {
		c.err = &Error{Pos: p, Msg: fmt.Sprintf(format, args...), Src: c.src}
	}
}

func (c *checker) walk(cs []*Chain, visit func(Term)) {
	for _, ch := range cs {
		if ch == nil {
			continue
		}
		for _, t := range ch.Terms {
			visit(t)
			if g, ok := t.(*Group); ok && g != nil {
				c.walk(g.Chains, visit)
			}
		}
	}
}

func (c *checker) define(t Term) {
	var label string
	var at Pos
	switch t := t.(type) {
	case *Func:
		if t == nil {
			return
		}
		label, at = t.Label, t.LabelPos
	case *Group:
		if t == nil {
			return
		}
		label, at = t.Label, t.LabelPos
	}
	if label == "" {
		return
	}
	if first, dup := c.labels[label]; dup {
		c.errorf(at, "label %q is already defined at %s", label, first)
		return
	}
	c.labels[label] = at
}

func (c *checker) use(t Term) {
	switch t := t.(type) {
	case *Func:
		if t != nil && c.s != nil {
			c.fn(t)
		}
	case *Ref:
		if t == nil {
			return
		}
		if _, ok := c.labels[t.Name]; ok || !c.wants(t.Pos) {
			return
		}
		if c.s != nil {
			if _, ok := c.s.Class(strings.ToLower(t.Name)); ok {
				c.errorf(t.Pos, "undefined label %q; to use the class, write (%s)", t.Name, strings.ToLower(t.Name))
				return
			}
		}
		names := make([]string, 0, len(c.labels))
		for l := range c.labels {
			names = append(names, l)
		}
		if s, ok := Suggest(t.Name, names); ok {
			c.errorf(t.Pos, "undefined label %q; did you mean %q?", t.Name, s)
			return
		}
		c.errorf(t.Pos, "undefined label %q", t.Name)
	}
}

func (c *checker) fn(f *Func) {
	class := strings.ToLower(f.Class)
	params, ok := c.s.Class(class)
	if !ok {
		if !c.wants(f.ClassPos) {
			return
		}
		if s, ok := Suggest(class, c.s.Classes()); ok {
			c.errorf(f.ClassPos, "unknown class %q; did you mean %q?", f.Class, s)
		} else {
			c.errorf(f.ClassPos, "unknown class %q; see 'ffpf classes'", f.Class)
		}
		return
	}
	seen := make(map[string]Pos, len(f.Args))
	for i, a := range f.Args {
		if a == nil {
			continue
		}
		if len(params) == 0 {
			c.errorf(a.Pos, "class %s takes no parameters", class)
			return
		}
		key, at := a.Key, a.KeyPos
		if key == "" {
			if i > 0 {
				c.errorf(a.Pos, "bare value %s is allowed only as the first argument; write name=value", a.Value)
				return
			}
			key, at = params[0], a.Pos
		} else if !slices.Contains(params, key) {
			if s, ok := Suggest(key, params); ok {
				c.errorf(at, "unknown parameter %q for class %s; did you mean %q?", key, class, s)
			} else {
				c.errorf(at, "unknown parameter %q for class %s; see 'ffpf classes'", key, class)
			}
			return
		}
		if first, dup := seen[key]; dup {
			if i > 0 && f.Args[0] != nil && f.Args[0].Key == "" && key == params[0] {
				c.errorf(at, "parameter %q is given twice (the bare value at %s is %s)", key, first, key)
			} else {
				c.errorf(at, "parameter %q is given twice (first at %s)", key, first)
			}
			return
		}
		seen[key] = at
	}
}
