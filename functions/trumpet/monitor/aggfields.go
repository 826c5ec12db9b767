package monitor

import "github.com/ffpf-go/ffpf/functions/trumpet/event"

// The parsed form's flag product and previous-interval state, read in one
// place.
func aggAnd(a event.Agg) string { return a.And }
func aggPrev(a event.Agg) bool  { return a.Prev }
