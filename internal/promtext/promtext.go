// Package promtext writes Prometheus's text exposition format, version
// 0.0.4 (what every Prometheus server scrapes): a family's HELP and TYPE
// lines, then its samples, names and label values escaped as the format
// says. ffpf writes its /metrics with it rather than with Prometheus's
// client library, whose packages (and protobuf's) every ffpf process
// would initialise at start-up, whatever the command; tests parse what it
// writes with the client library's own parser.
//
// The sharp edge: the writer checks nothing. A family's samples must
// follow its TYPE line, each series (name and labels) once, names and
// label names of the format's alphabet ([a-zA-Z_:][a-zA-Z0-9_:]*); the
// caller's names are constants.
package promtext

import (
	"math"
	"strconv"
)

// ContentType is the format's media type, for the Content-Type header.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Writer appends an exposition to its buffer.
type Writer struct {
	B []byte
}

// escape appends s with backslashes, newlines and, in a label value
// (quotes true), double quotes escaped.
func escape(b []byte, s string, quotes bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quotes:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// Family starts a metric family: typ is counter, gauge or untyped.
func (w *Writer) Family(name, typ, help string) {
	w.B = append(w.B, "# HELP "...)
	w.B = append(w.B, name...)
	w.B = append(w.B, ' ')
	w.B = escape(w.B, help, false)
	w.B = append(w.B, "\n# TYPE "...)
	w.B = append(w.B, name...)
	w.B = append(w.B, ' ')
	w.B = append(w.B, typ...)
	w.B = append(w.B, '\n')
}

// labels appends name{k="v",...} from pairs k1, v1, k2, v2…
func (w *Writer) labels(name string, pairs []string) {
	w.B = append(w.B, name...)
	if len(pairs) == 0 {
		return
	}
	w.B = append(w.B, '{')
	for i := 0; i+1 < len(pairs); i += 2 {
		if i > 0 {
			w.B = append(w.B, ',')
		}
		w.B = append(w.B, pairs[i]...)
		w.B = append(w.B, `="`...)
		w.B = escape(w.B, pairs[i+1], true)
		w.B = append(w.B, '"')
	}
	w.B = append(w.B, '}')
}

// Uint appends a sample of an integer value, labelled by pairs (k1, v1,
// k2, v2…).
func (w *Writer) Uint(name string, v uint64, pairs ...string) {
	w.labels(name, pairs)
	w.B = append(w.B, ' ')
	w.B = strconv.AppendUint(w.B, v, 10)
	w.B = append(w.B, '\n')
}

// Float appends a sample of a float value (+Inf, -Inf and NaN as the
// format writes them).
func (w *Writer) Float(name string, v float64, pairs ...string) {
	w.labels(name, pairs)
	w.B = append(w.B, ' ')
	switch {
	case math.IsInf(v, 1):
		w.B = append(w.B, "+Inf"...)
	case math.IsInf(v, -1):
		w.B = append(w.B, "-Inf"...)
	case math.IsNaN(v):
		w.B = append(w.B, "NaN"...)
	default:
		w.B = strconv.AppendFloat(w.B, v, 'g', -1, 64)
	}
	w.B = append(w.B, '\n')
}
