//go:build !nogrpc

package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/plugin"
)

// load starts the plugins the flags or $FFPF_PLUGINS name and registers
// their classes (nil when none is named): a plugin the user got wrong is
// a usage error (exit 2); one whose class is malformed is left out, said
// on stderr.
func (o *pluginOptions) load(stderr io.Writer) (*plugin.Host, error) {
	dirs, err := o.dirList()
	if err != nil || len(dirs) == 0 {
		return nil, err
	}
	h, err := plugin.Load(dirs, functions.Default, plugin.Options{Sums: o.sums, Log: stderr})
	var pe *plugin.Error
	if errors.As(err, &pe) {
		return nil, &exitError{2, err}
	}
	if err != nil {
		return nil, err
	}
	for _, r := range h.Refused {
		fmt.Fprintf(stderr, "ffpf: %v\n", r)
	}
	return h, nil
}
