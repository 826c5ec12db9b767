package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/plugin"
)

// pluginOptions are the flags that load plugin classes (functions/plugin),
// shared by run, check, place and classes.
type pluginOptions struct {
	dirs, sums string
}

func (o *pluginOptions) register(fs *flagSet) {
	fs.StringVar(&o.dirs, "plugins", "", "load the function classes of the plugins in `DIR` (its executable files; several directories separated by ':'; default $"+plugin.EnvPlugins+")")
	fs.StringVar(&o.sums, "plugin-sums", "", "load only plugins whose SHA-256 `FILE` (the output of sha256sum) lists and matches")
}

// load starts the plugins the flags or $FFPF_PLUGINS name and registers
// their classes (nil when none is named): a plugin the user got wrong is
// a usage error (exit 2); one whose class is malformed is left out, said
// on stderr.
func (o *pluginOptions) load(stderr io.Writer) (*plugin.Host, error) {
	dirs := plugin.Dirs(o.dirs)
	if len(dirs) == 0 {
		if o.sums != "" {
			return nil, usageErrorf("--plugin-sums checks plugins, but no --plugins directory (or $%s) names any", plugin.EnvPlugins)
		}
		return nil, nil
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
