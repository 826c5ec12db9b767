package flowgraph

import (
	"errors"

	"github.com/ffpf-go/ffpf/lang"
)

// InvalidError is a request the runtime refuses as written (exit status 2),
// when no position in the expression can be blamed.
type InvalidError struct{ Msg string }

func (e *InvalidError) Error() string { return e.Msg }

// IsInvalid reports whether err is about the request itself rather than the
// run: a syntax or validation error.
func IsInvalid(err error) bool {
	var le *lang.Error
	var ie *InvalidError
	return errors.As(err, &le) || errors.As(err, &ie)
}
