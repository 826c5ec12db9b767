package plugin

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

// schema is a class's description as it crosses from the plugin to ffpf:
// functions.Class without its code. What the class computes from its
// parameters (a parameter's Check, a field's LenOf, an ordering's If, its
// Validate) is asked of the plugin when ffpf needs it.
type schema struct {
	Name, Summary        string
	Params               []paramSchema
	State                *stateSchema
	Concurrency          functions.Concurrency
	OrderedWhen          []orderingSchema
	MinInputs, MaxInputs int
	TakesRecords         bool
	Validates            bool
	Deadline             time.Duration
}

type paramSchema struct {
	Name     string
	Type     functions.ParamType
	Default  string
	Required bool
	Unit     string
	Summary  string
	Enum     []string
	Checked  bool
	File     functions.FileUse
}

type stateSchema struct {
	Order  string // native, big-endian, little-endian
	Fields []fieldSchema
}

type fieldSchema struct {
	Name    string
	Type    buffers.FieldType
	Unit    string
	Merge   functions.Merge
	Summary string
	Len     int
	LenOf   bool
	LenDoc  string
	Parity  bool
	Targets []functions.Target
}

type orderingSchema struct{ When, Why string }

// servable says why the SDK cannot serve c: what a class out of process
// cannot be (a source, a producer, code for another target, a reader of
// other functions' state, a writer of annotations).
func servable(c *functions.Class) error {
	switch {
	case c.Name == "":
		return errors.New("the class has no name")
	case c.New == nil:
		return fmt.Errorf("class %s: a plugin serves a function class (New), not a source", c.Name)
	case c.Produces != nil:
		return fmt.Errorf("class %s: a plugin's class cannot produce records", c.Name)
	case c.Code != nil || c.Runs != nil || len(c.Targets) > 1 || len(c.Targets) == 1 && c.Targets[0] != functions.TargetUser:
		return fmt.Errorf("class %s: a plugin's class runs in userspace only (no Targets, Runs or Code)", c.Name)
	case c.Reads != nil || c.Readable != nil:
		return fmt.Errorf("class %s: a plugin's class cannot read or be read as named state", c.Name)
	case c.Interface != nil:
		return fmt.Errorf("class %s: a plugin's class captures from no interface", c.Name)
	case c.Annotates > 0:
		return fmt.Errorf("class %s: a plugin's class cannot write annotations", c.Name)
	}
	return nil
}

// describe is the schema of c.
func describe(c *functions.Class, deadline time.Duration) schema {
	s := schema{Name: c.Name, Summary: c.Summary, Concurrency: c.Concurrency, MinInputs: c.MinInputs, MaxInputs: c.MaxInputs,
		TakesRecords: c.TakesRecords, Validates: c.Validate != nil, Deadline: deadline}
	for _, p := range c.Params {
		s.Params = append(s.Params, paramSchema{Name: p.Name, Type: p.Type, Default: p.Default, Required: p.Required,
			Unit: p.Unit, Summary: p.Summary, Enum: p.Enum, Checked: p.Check != nil, File: p.File})
	}
	for _, o := range c.OrderedWhen {
		s.OrderedWhen = append(s.OrderedWhen, orderingSchema{When: o.When, Why: o.Why})
	}
	if c.State != nil {
		st := &stateSchema{Order: c.State.OrderName()}
		for _, f := range c.State.Fields {
			st.Fields = append(st.Fields, fieldSchema{Name: f.Name, Type: f.Type, Unit: f.Unit, Merge: f.Merge, Summary: f.Summary,
				Len: f.Len, LenOf: f.LenOf != nil, LenDoc: f.LenDoc, Parity: f.Parity, Targets: f.Targets})
		}
		s.State = st
	}
	return s
}

// class builds, from a plugin's schema, the class ffpf registers: the
// declarations as the plugin made them, and hooks that ask the plugin
// (p) what the class computes. It checks the schema as Register does a
// built-in class, and more: a schema comes from another program.
func (s *schema) class(p *proc) (*functions.Class, error) {
	c := &functions.Class{Name: s.Name, Summary: s.Summary, Concurrency: s.Concurrency,
		MinInputs: s.MinInputs, MaxInputs: s.MaxInputs, TakesRecords: s.TakesRecords,
		Targets: []functions.Target{functions.TargetUser}}
	if s.Name == "" || s.Name != strings.ToLower(s.Name) || strings.ContainsAny(s.Name, " \t,()[]|>;=\":") {
		return nil, fmt.Errorf("its class name %q is not a lower-case word", s.Name)
	}
	if s.MinInputs < 0 || s.MaxInputs >= 0 && s.MaxInputs < s.MinInputs || s.MaxInputs == 0 {
		return nil, fmt.Errorf("class %s takes %d to %d inputs: a plugin's function needs at least one", s.Name, s.MinInputs, s.MaxInputs)
	}
	for _, ps := range s.Params {
		if ps.Type.String() == "invalid" {
			return nil, fmt.Errorf("class %s: parameter %s has an unknown type (%d)", s.Name, ps.Name, ps.Type)
		}
		par := functions.Param{Name: ps.Name, Type: ps.Type, Default: ps.Default, Required: ps.Required, Unit: ps.Unit,
			Summary: ps.Summary, Enum: ps.Enum, File: ps.File}
		if ps.Checked {
			name := ps.Name
			par.Check = func(v functions.Value) error { return p.checkArg(name, v.Raw()) }
		}
		c.Params = append(c.Params, par)
	}
	for i, o := range s.OrderedWhen {
		c.OrderedWhen = append(c.OrderedWhen, functions.Ordering{When: o.When, Why: o.Why,
			If: func(ps functions.Params) bool { return p.ordered(ps, i) }})
	}
	if s.State != nil {
		st := &functions.State{}
		switch s.State.Order {
		case "native":
		case "big-endian":
			st.Order = binary.BigEndian
		case "little-endian":
			st.Order = binary.LittleEndian
		default:
			return nil, fmt.Errorf("class %s: its state has an unknown byte order %q", s.Name, s.State.Order)
		}
		for _, f := range s.State.Fields {
			sf := functions.StateField{Name: f.Name, Type: f.Type, Unit: f.Unit, Merge: f.Merge, Summary: f.Summary,
				Len: f.Len, LenDoc: f.LenDoc, Parity: f.Parity, Targets: f.Targets}
			if f.LenOf {
				name := f.Name
				sf.LenOf = func(ps functions.Params) int { return p.lenOf(name, ps) }
			}
			st.Fields = append(st.Fields, sf)
		}
		if err := st.Validate(); err != nil {
			return nil, fmt.Errorf("class %s: %v", s.Name, err)
		}
		c.State = st
	}
	if s.Validates {
		c.Validate = p.validate
	}
	if s.Deadline < 0 {
		return nil, fmt.Errorf("class %s: a negative batch deadline", s.Name)
	}
	c.New = p.instantiate
	// Register's own checks (a parameter declared twice, a default its
	// type refuses, a concurrency the state cannot honour), on a registry
	// of its own.
	if err := functions.NewRegistry().Register(c); err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "functions: "))
	}
	return c, nil
}
