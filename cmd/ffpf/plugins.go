package main

import (
	"os"
	"path/filepath"
)

// pluginOptions are the flags that load plugin classes (functions/plugin),
// shared by run, check, place and classes.
type pluginOptions struct {
	dirs, sums string
}

// envPlugins names the plugin directories when no --plugins flag does (a
// list, as PATH is written).
const envPlugins = "FFPF_PLUGINS"

func (o *pluginOptions) register(fs *flagSet) {
	fs.StringVar(&o.dirs, "plugins", "", "load the function classes of the plugins in `DIR` (its executable files; several directories separated by ':'; default $"+envPlugins+")")
	fs.StringVar(&o.sums, "plugin-sums", "", "load only plugins whose SHA-256 `FILE` (the output of sha256sum) lists and matches")
}

// dirList returns the plugin directories the flags or $FFPF_PLUGINS name
// (none: nil), or a usage error.
func (o *pluginOptions) dirList() ([]string, error) {
	list := o.dirs
	if list == "" {
		list = os.Getenv(envPlugins)
	}
	var dirs []string
	for _, d := range filepath.SplitList(list) {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) == 0 && o.sums != "" {
		return nil, usageErrorf("--plugin-sums checks plugins, but no --plugins directory (or $%s) names any", envPlugins)
	}
	return dirs, nil
}
