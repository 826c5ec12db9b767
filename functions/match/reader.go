package match

import (
	"fmt"
	"strings"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

// Fields reads integer packet fields by name ("ipv4.src", "tcp.dport",
// "pkt.len": the names FieldNames lists, IPv6 addresses excepted) for
// other classes (DTA's reporter), decoding each packet's headers once
// whatever the number of fields. It allocates nothing per packet and is not
// safe for concurrent use.
type Fields struct {
	e  env
	fs []intFn
}

// NewFields returns a reader of the named fields of packets of link type lt.
func NewFields(lt functions.LinkType, names ...string) (*Fields, error) {
	r := &Fields{e: env{lt: lt}}
	for _, n := range names {
		if err := IsIntField(n); err != nil {
			return nil, err
		}
		r.fs = append(r.fs, fields[n].i)
	}
	return r, nil
}

// IsIntField reports why name is not an integer packet field, or nil.
func IsIntField(name string) error {
	f, ok := fields[name]
	if !ok {
		if s := near(name, FieldNames()); s != "" {
			return fmt.Errorf("unknown packet field %s (did you mean %s?)", name, s)
		}
		return fmt.Errorf("unknown packet field %s: fields are %s", name, strings.Join(FieldNames(), ", "))
	}
	if f.i == nil {
		return fmt.Errorf("%s is a 128-bit address, not a number", name)
	}
	return nil
}

// Set makes the packet in slot of p the one the fields are read from.
func (r *Fields) Set(p *buffers.PBuf, slot uint32) { r.e.set(p, slot) }

// Int returns field i (in NewFields' order) of the current packet; ok is
// false when the packet lacks the field's layer.
func (r *Fields) Int(i int) (v int64, ok bool) { return r.fs[i](&r.e) }
