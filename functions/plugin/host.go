package plugin

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ffpf-go/ffpf/bridges/shm"
	"github.com/ffpf-go/ffpf/functions"
)

// Options configure how plugins are loaded.
type Options struct {
	// Sums, when set, is a file of SHA-256 checksums in sha256sum's format:
	// every plugin must have one there and match it (go-plugin's
	// SecureConfig), or nothing is loaded.
	Sums string
	// Log receives the plugins' standard error, each line prefixed with
	// the plugin's name ("plugin dnsname: ..."); nil is os.Stderr.
	Log io.Writer
	// RPCBatches sends every batch to the plugin over gRPC, packets and
	// all, instead of shared memory: the baseline the benchmark measures
	// the bridge against.
	RPCBatches bool
	// CopyOnce copies every batch's packets into the ring, even those that
	// lie in shared memory, and asks no source for shared memory: the
	// copy-once path, measured beside zero-copy. $FFPF_PLUGIN_COPY, set,
	// sets it.
	CopyOnce bool
}

// envCopyOnce, set, makes every Host copy packets once (Options.CopyOnce).
const envCopyOnce = "FFPF_PLUGIN_COPY"

// Host runs the plugins of some directories: it started their processes,
// registered their classes, and runs their functions.
type Host struct {
	opts  Options
	reg   *functions.Registry
	procs []*proc
	// Refused are the plugins whose class is malformed (a parameter
	// declared twice, a type ffpf does not know): each was stopped, with
	// the reason, and the others loaded.
	Refused []error
}

// Error is an error in the plugins the user named: a directory that does
// not exist, a file that is not a plugin, a checksum that does not match,
// a class that clashes with another. The command exits 2.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

func userErr(format string, args ...any) error { return &Error{fmt.Sprintf(format, args...)} }

// Load starts the plugins of dirs (every executable file not starting
// with '.'), asks each for its class, and registers the classes in reg.
// On error nothing stays loaded.
func Load(dirs []string, reg *functions.Registry, opts Options) (h *Host, err error) {
	if opts.Log == nil {
		opts.Log = os.Stderr
	}
	if os.Getenv(envCopyOnce) != "" {
		opts.CopyOnce = true
	}
	h = &Host{opts: opts, reg: reg}
	defer func() {
		if err != nil {
			h.Close()
			h = nil
		}
	}()
	var sums map[string][]byte
	if opts.Sums != "" {
		if sums, err = readSums(opts.Sums); err != nil {
			return h, err
		}
	}
	owner := map[string]string{} // class → the plugin that serves it
	for _, dir := range dirs {
		files, err := pluginFiles(dir)
		if err != nil {
			return h, err
		}
		for _, path := range files {
			p, err := h.start(path, sums)
			if err != nil {
				return h, err
			}
			h.procs = append(h.procs, p)
			c, err := p.describe()
			if err != nil {
				var ue *Error
				if errors.As(err, &ue) {
					return h, err
				}
				h.Refused = append(h.Refused, fmt.Errorf("plugin %s refused: %v", path, err))
				p.stop()
				continue
			}
			if other, ok := owner[c.Name]; ok {
				return h, userErr("plugin %s serves class %s, as plugin %s does", path, c.Name, other)
			}
			if _, ok := reg.Lookup(c.Name); ok {
				return h, userErr("plugin %s serves class %s, which is a built-in class", path, c.Name)
			}
			if err := reg.Register(c); err != nil {
				return h, userErr("plugin %s: %v", path, err)
			}
			owner[c.Name] = path
			p.class = c
		}
	}
	return h, nil
}

// pluginFiles lists the plugins of dir: its executable regular files,
// without those whose name starts with '.'.
func pluginFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, userErr("plugin directory %s: %v", dir, functions.PathReason(err))
	}
	var files []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		st, err := os.Stat(path)
		if err != nil || !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
			continue
		}
		files = append(files, path)
	}
	return files, nil
}

// readSums reads a file of sha256sum's output: "HEX  FILE" (or
// "HEX *FILE") per line.
func readSums(path string) (map[string][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, userErr("--plugin-sums: %v", err)
	}
	defer f.Close()
	sums := map[string][]byte{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sum, name, ok := strings.Cut(line, " ")
		name = strings.TrimPrefix(strings.TrimLeft(name, " "), "*")
		raw, err := hex.DecodeString(sum)
		if !ok || err != nil || len(raw) != sha256.Size || name == "" {
			return nil, userErr("%s:%d: not a line of sha256sum (a SHA-256 in hex, then the file)", path, n)
		}
		sums[filepath.Clean(name)] = raw
	}
	if err := sc.Err(); err != nil {
		return nil, userErr("--plugin-sums: %v", err)
	}
	return sums, nil
}

// sumOf returns the checksum for the plugin at path: the line naming its
// path, or else its base name.
func sumOf(sums map[string][]byte, path string) ([]byte, bool) {
	if s, ok := sums[filepath.Clean(path)]; ok {
		return s, true
	}
	if abs, err := filepath.Abs(path); err == nil {
		if s, ok := sums[abs]; ok {
			return s, true
		}
	}
	s, ok := sums[filepath.Base(path)]
	return s, ok
}

// start runs the plugin at path and shakes hands with it.
func (h *Host) start(path string, sums map[string][]byte) (*proc, error) {
	p := &proc{host: h, path: path, name: filepath.Base(path), orderings: map[string][]bool{}, lens: map[string]int{}}
	p.log = &logWriter{prefix: "plugin " + p.name + ": ", out: h.opts.Log}
	var sum []byte
	if sums != nil {
		s, ok := sumOf(sums, path)
		if !ok {
			return nil, userErr("plugin %s has no checksum in %s", path, h.opts.Sums)
		}
		sum = s
	}
	mine, theirs, err := shm.Pair()
	if err != nil {
		return nil, err
	}
	p.sock = mine
	defer theirs.Close()
	p.cmd = exec.Command(path)
	p.cmd.Env = []string{envSocket + "=3"} // launch adds ffpf's environment
	p.cmd.ExtraFiles = []*os.File{theirs}
	p.client, err = launch(p.cmd, sum, p.log)
	if err != nil {
		p.stop()
		return nil, p.startError(err)
	}
	p.rpc = &rpc{cc: p.client.conn}
	return p, nil
}

// startError says in one sentence why the plugin at p.path did not start.
func (p *proc) startError(err error) error {
	var le *launchError
	if !errors.As(err, &le) {
		return userErr("plugin %s: %v", p.path, err)
	}
	// go-plugin's words to a plugin run without its cookie
	cookie := slices.ContainsFunc(p.log.last(keepLines), func(l string) bool { return strings.Contains(l, "This binary is a plugin") })
	switch {
	case le.why == checksumMismatch:
		return userErr("plugin %s: its SHA-256 is not the one %s gives", p.path, p.host.opts.Sums)
	case le.why == cannotRun:
		return userErr("plugin %s cannot be run: %v", p.path, runReason(le.err))
	case cookie:
		return userErr("plugin %s is a plugin of another program: its handshake cookie is not ffpf's", p.path)
	case le.why == noHandshake:
		return userErr("plugin %s is not an ffpf plugin: it %s without a handshake%s", p.path, p.exit(), p.lastLines(1))
	case le.why == timedOut:
		return userErr("plugin %s is not an ffpf plugin: no handshake within %v", p.path, startTimeout)
	case le.why == appVersion:
		return userErr("plugin %s speaks another version of ffpf's plugin protocol than %d (its handshake: %q)", p.path, ProtocolVersion, le.line)
	case le.why == coreVersion:
		return userErr("plugin %s speaks another version of go-plugin's handshake than %d (its handshake: %q)", p.path, coreProtocol, le.line)
	case le.why == notGRPC:
		return userErr("plugin %s serves go-plugin's net/rpc, not its gRPC (its handshake: %q)", p.path, le.line)
	case le.why == badLine:
		return userErr("plugin %s is not an ffpf plugin: it printed %q, not a handshake", p.path, le.line)
	}
	return userErr("plugin %s: %v", p.path, le)
}

// runReason is why exec refused a file, without the path it repeats.
func runReason(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// describe asks the plugin for its class and builds it.
func (p *proc) describe() (*functions.Class, error) {
	var rep schemaReply
	if err := p.call("Schema", &empty{}, &rep); err != nil {
		return nil, userErr("plugin %s did not describe its class: %v", p.path, err)
	}
	c, err := rep.Schema.class(p)
	if err != nil {
		return nil, err
	}
	p.deadline = rep.Schema.Deadline
	if p.deadline == 0 {
		p.deadline = DefaultDeadline
	}
	return c, nil
}

// Classes returns the classes the plugins serve, by name.
func (h *Host) Classes() []*functions.Class {
	var out []*functions.Class
	for _, p := range h.procs {
		if p.class != nil {
			out = append(out, p.class)
		}
	}
	slices.SortFunc(out, func(a, b *functions.Class) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Plugin returns the file of the plugin that serves class, or "".
func (h *Host) Plugin(class string) string {
	if h == nil {
		return ""
	}
	for _, p := range h.procs {
		if p.class != nil && p.class.Name == class {
			return p.path
		}
	}
	return ""
}

// Instances returns how many functions of class the plugin instantiated
// (one per worker that reached a stateless or mergeable function).
func (h *Host) Instances(class string) int {
	for _, p := range h.procs {
		if p.class != nil && p.class.Name == class {
			p.mu.Lock()
			defer p.mu.Unlock()
			return p.made
		}
	}
	return 0
}

// Close stops the plugins and takes their classes out of the registry.
// The state of their functions stays readable until then: call it after
// the last read.
func (h *Host) Close() error {
	if h == nil {
		return nil
	}
	var wg sync.WaitGroup
	for _, p := range h.procs {
		if p.class != nil {
			h.reg.Remove(p.class.Name)
		}
		wg.Go(p.stop)
	}
	wg.Wait()
	for _, p := range h.procs {
		p.unmap()
	}
	h.procs = nil
	return nil
}

// call invokes a method of the plugin's service, within a bound: the
// control plane of a plugin that hangs must not hang ffpf.
func (p *proc) call(name string, req, rep any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return p.rpc.invoke(ctx, name, req, rep)
}

// logWriter writes a plugin's standard error to ffpf's log, line by line
// with the plugin's name before each, and keeps its last lines for the
// report of its exit.
type logWriter struct {
	prefix string
	mu     sync.Mutex
	out    io.Writer
	part   []byte
	lines  []string // the last ones
}

const keepLines = 5

func (w *logWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.part = append(w.part, b...)
	for {
		i := slices.Index(w.part, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := strings.TrimRight(string(w.part[:i]), "\r")
		w.part = w.part[i+1:]
		if line == "" {
			continue
		}
		fmt.Fprintf(w.out, "%s%s\n", w.prefix, line)
		if traceback(line) {
			continue
		}
		w.lines = append(w.lines, line)
		if len(w.lines) > keepLines {
			w.lines = w.lines[1:]
		}
	}
}

// traceback reports whether line is part of a Go traceback (a frame, its
// file, a goroutine's header), which a crash prints after the line that
// says what happened: the report quotes that line, not the frames.
func traceback(line string) bool {
	if strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "goroutine ") || strings.HasPrefix(line, "created by ") ||
		line == "runtime stack:" || strings.HasPrefix(line, "...") {
		return true
	}
	paren, space := strings.IndexByte(line, '('), strings.IndexByte(line, ' ')
	return paren > 0 && strings.HasSuffix(line, ")") && (space < 0 || space > paren)
}

// last returns at most n of the last lines.
func (w *logWriter) last(n int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.lines[max(0, len(w.lines)-n):])
}
