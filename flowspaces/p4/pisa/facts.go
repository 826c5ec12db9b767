package pisa

import (
	"maps"

	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// The parser's selects say more than which headers are valid: a packet
// whose valid headers are Ethernet, IPv4 and TCP went through the IPv4
// state's case (ihl 5, no fragment offset, protocol 6), since no other
// path through the parser leaves exactly those headers valid. facts
// finds, for a set of valid headers, the header fields that every path
// through the parser leaving it fixes by an exact case of a select
// (a path ends where the parser accepts, rejects, or finds the packet
// too short before a header), and residual starts from them as it
// starts from an invalid header's zeros: what ingress tests of them
// folds away.

// maxFactPaths bounds the parser paths facts follows, and
// maxFactDepth the states on one path: a parser with more (or a loop)
// gets no facts, which is always right.
const (
	maxFactPaths = 1 << 16
	maxFactDepth = 48
)

// facts returns the fields (paths) whose values the parser's paths that
// leave exactly the headers of key valid agree on; nil when there are
// none, or too many paths to follow. A path that makes a header valid
// that key does not hold is followed no further.
func (m *Model) facts(key []uint64) map[string]uint64 {
	prog := m.prog
	if len(prog.Parser) == 0 {
		return nil
	}
	states := map[string]*p4gen.ParserState{}
	for _, s := range prog.Parser {
		states[s.Name] = s
	}
	var out map[string]uint64 // what the paths to key so far agree on
	seen, paths := false, 0
	end := func(valid []uint64, known map[string]uint64) {
		paths++
		if !sameKey(valid, key) {
			return
		}
		if !seen {
			seen, out = true, maps.Clone(known)
			return
		}
		for f, v := range out {
			if w, ok := known[f]; !ok || w != v {
				delete(out, f)
			}
		}
	}
	var walk func(s *p4gen.ParserState, valid []uint64, known map[string]uint64, depth int) bool
	walk = func(s *p4gen.ParserState, valid []uint64, known map[string]uint64, depth int) bool {
		if depth > maxFactDepth || paths > maxFactPaths {
			return false
		}
		valid = append([]uint64(nil), valid...)
		known = maps.Clone(known)
		for _, h := range s.Extract {
			end(valid, known) // too short for h (or its varbit too long)
			hd := m.byName[h]
			if key[hd.index>>6]>>uint(hd.index&63)&1 == 0 {
				return true // no path on from here leaves key's headers
			}
			for _, f := range prog.Header(h).Type.Fields {
				delete(known, "hdr."+h+"."+f.Name) // extracted anew
			}
			valid[hd.index>>6] |= 1 << uint(hd.index&63)
		}
		next := func(name string, known map[string]uint64) bool {
			if name == p4gen.Accept || name == p4gen.Reject {
				end(valid, known)
				return true
			}
			t := states[name]
			return t != nil && walk(t, valid, known, depth+1)
		}
		if len(s.Select) == 0 {
			return next(s.Default, known)
		}
		// The cases that go to one state go there with what they all
		// fix (IPv6's three option headers: the next header is one of
		// three), so that a chain of states is walked once per state
		// it can go to, not once per case.
		var order []string
		byNext := map[string]map[string]uint64{}
	cases:
		for _, c := range s.Cases {
			k := maps.Clone(known)
			for i, v := range c.Values {
				tm := s.Select[i].Type().Mask()
				r, ok := s.Select[i].(p4gen.Ref)
				if !ok || c.Masks != nil && c.Masks[i]&tm != tm || !isHeaderField(r.Path) {
					continue // a fact only of an exact case of a field
				}
				if w, ok := k[r.Path]; ok && w != v&tm {
					continue cases // this path cannot take this case
				}
				if v&^tm != 0 {
					continue cases // never matched
				}
				k[r.Path] = v
			}
			if prev, ok := byNext[c.Next]; ok {
				for f, v := range prev {
					if w, ok := k[f]; !ok || w != v {
						delete(prev, f)
					}
				}
				continue
			}
			byNext[c.Next] = k
			order = append(order, c.Next)
		}
		if prev, ok := byNext[s.Default]; ok {
			for f, v := range prev {
				if w, ok := known[f]; !ok || w != v {
					delete(prev, f)
				}
			}
		} else {
			byNext[s.Default] = known
			order = append(order, s.Default)
		}
		for _, n := range order {
			if !next(n, byNext[n]) {
				return false
			}
		}
		return true
	}
	if !walk(prog.Parser[0], make([]uint64, (len(m.headers)+63)/64), map[string]uint64{}, 0) {
		return nil
	}
	return out
}

func isHeaderField(path string) bool { return len(path) > 4 && path[:4] == "hdr." }
