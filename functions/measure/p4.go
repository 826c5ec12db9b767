package measure

import (
	"errors"

	"github.com/ffpf-go/ffpf/functions"
)

// P4Runs says why a measurement function with parameters p cannot run
// on a switch, or nil when it can.
func P4Runs(p functions.Params) error {
	if p.Has("window") {
		return errors.New("window= runs above the switch for now")
	}
	if Reports(p) {
		return errors.New("report= runs above the switch for now")
	}
	return nil
}
