package p4gen

import "reflect"

// Inserted returns the statements after holds that before did not: one
// run of them, put anywhere among before's (at the head, where
// StdLayers puts the layers; after the layers, where a transport walk
// goes; at the end), the rest of after being before's, in order. ok is
// false when after changed or dropped any of before's statements, or
// added them in more than one place: a lowering that rewrote what the
// functions before it put there.
func Inserted(before, after []Stmt) (run []Stmt, ok bool) {
	n := len(after) - len(before)
	if n < 0 {
		return nil, false
	}
	i := 0 // the common head
	for i < len(before) && reflect.DeepEqual(after[i], before[i]) {
		i++
	}
	rest, was := after[i+n:], before[i:]
	if len(rest) != len(was) || len(was) > 0 && !reflect.DeepEqual(rest, was) {
		return nil, false
	}
	if n == 0 {
		return nil, true
	}
	return after[i : i+n], true
}
