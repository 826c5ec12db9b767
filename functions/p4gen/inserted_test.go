package p4gen

import (
	"reflect"
	"testing"
)

func TestInserted(t *testing.T) {
	s := func(ns ...uint64) []Stmt {
		var out []Stmt
		for _, n := range ns {
			out = append(out, Assign{Dst: Ref{Path: "meta.x", Bits: 8}, X: C(n, 8)})
		}
		return out
	}
	for _, tc := range []struct {
		before, after, run []uint64
		ok                 bool
	}{
		{nil, nil, nil, true},
		{[]uint64{1, 2}, []uint64{1, 2}, nil, true},
		{nil, []uint64{7}, []uint64{7}, true},
		{[]uint64{1, 2}, []uint64{7, 8, 1, 2}, []uint64{7, 8}, true}, // at the head
		{[]uint64{1, 2}, []uint64{1, 7, 8, 2}, []uint64{7, 8}, true}, // after the layers
		{[]uint64{1, 2}, []uint64{1, 2, 7}, []uint64{7}, true},       // at the end
		{[]uint64{1, 2}, []uint64{7, 1, 8, 2}, nil, false},           // in two places
		{[]uint64{1, 2}, []uint64{1, 3}, nil, false},                 // rewritten
		{[]uint64{1, 2}, []uint64{2}, nil, false},                    // dropped
		{[]uint64{1, 2}, []uint64{2, 1, 7}, nil, false},              // reordered
	} {
		run, ok := Inserted(s(tc.before...), s(tc.after...))
		if ok != tc.ok || !reflect.DeepEqual(run, s(tc.run...)) {
			t.Errorf("Inserted(%v, %v) = %d statements, %v; want %v, %v", tc.before, tc.after, len(run), ok, tc.run, tc.ok)
		}
	}
}
