package flowgraph

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/ffpf-go/ffpf/functions"
)

// fileUse is one function's use of one file.
type fileUse struct {
	who  string // function id, or class for one not yet in the graph
	path string
	use  functions.FileUse
}

// checkFiles refuses a graph in which a function writes a file that another
// one reads or writes: `ffpf run -r t.pcap -w t.pcap` would destroy its own
// input while reading it. Functions already in the graph are in have; the
// request's new ones in add.
func checkFiles(have, add []fileUse) error {
	for i, a := range add {
		for _, b := range append(have, add[:i]...) {
			if a.use != functions.FileWrite && b.use != functions.FileWrite {
				continue
			}
			if !sameFile(a.path, b.path) {
				continue
			}
			w, o := a, b
			if w.use != functions.FileWrite {
				w, o = b, a
			}
			verb := "reads"
			if o.use == functions.FileWrite {
				verb = "writes"
			}
			return &InvalidError{fmt.Sprintf("%s would write %s, which %s %s", w.who, w.path, o.who, verb)}
		}
	}
	return nil
}

func sameFile(a, b string) bool {
	if a == b {
		return true
	}
	if x, err := filepath.Abs(a); err == nil {
		if y, err := filepath.Abs(b); err == nil && x == y {
			return true
		}
	}
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

func filesOf(who string, p functions.Params) []fileUse {
	var out []fileUse
	p.Files(func(path string, use functions.FileUse) { out = append(out, fileUse{who, path, use}) })
	return out
}
