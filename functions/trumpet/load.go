package trumpet

import (
	"fmt"
	"strings"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/trumpet/event"
	"github.com/ffpf-go/ffpf/functions/trumpet/monitor"
)

// loadEvents reads the events of events= (a file) and event= (one line),
// checked against the epoch and the summary words: an error names the
// file and line ("t.yaml:3: ...").
func loadEvents(p functions.Params) ([]event.Event, error) {
	var evs []event.Event
	if p.Has("events") {
		fe, err := event.ParseFile(p.Str("events"))
		if err != nil {
			return nil, err
		}
		evs = append(evs, fe...)
	}
	if p.Has("event") {
		ev, err := event.ParseLine(p.Str("event"))
		if err != nil {
			return nil, fmt.Errorf("event=: %v", err)
		}
		evs = append(evs, ev)
	}
	if err := event.ValidateAll(evs, p.Duration("epoch")); err != nil {
		return nil, err
	}
	for i := range evs {
		if err := monitor.Check(&evs[i], int64(p.Duration("epoch")), int(p.Int("words"))); err != nil {
			return nil, at(evs[i].Pos, err)
		}
	}
	return evs, nil
}

func at(pos event.Pos, err error) error {
	if pos.File == "" {
		return err
	}
	return fmt.Errorf("%s: %v", pos, err)
}

func (t *Trumpet) addHandler(arg string) (any, error) {
	ev, err := event.ParseLine(strings.TrimSpace(arg))
	if err != nil {
		return nil, err
	}
	if err := event.Validate(ev, t.epoch); err != nil {
		return nil, err
	}
	if err := t.Add(ev); err != nil {
		return nil, err
	}
	return ev.String(), nil
}

// List returns the installed events in the one-line form.
func (t *Trumpet) List() []string {
	out := []string{}
	for _, tr := range t.m.Events() {
		out = append(out, tr.Event.String())
	}
	return out
}
