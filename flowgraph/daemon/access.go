package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/ffpf-go/ffpf/flowgraph"
)

// Permission bits, as in a mode's triplets.
const (
	permRead  = 4
	permWrite = 2
	permExec  = 1
)

// mayAccess says whether the user with credentials c may read path (write
// false) or write it (write true), as the kernel would decide for that
// user: every directory on the way searchable, the file readable or
// writable, or, for a file to be created, its directory writable. The
// daemon opens files with its own privileges on behalf of others, so it
// decides this before it opens anything. Root may do anything.
func mayAccess(path string, c flowgraph.Credentials, write bool) error {
	if c.UID == 0 {
		return nil
	}
	groups := peerGroups(c)
	real, err := filepath.EvalSymlinks(path)
	create := false
	if err != nil {
		if !write || !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("cannot open %s: %v", path, reason(err))
		}
		dir, err := filepath.EvalSymlinks(filepath.Dir(path))
		if err != nil {
			return fmt.Errorf("cannot create %s: %v", path, reason(err))
		}
		real, create = filepath.Join(dir, filepath.Base(path)), true
	}
	// Each directory on the way must be searchable.
	dirs := []string{}
	for p := filepath.Dir(real); ; p = filepath.Dir(p) {
		dirs = append(dirs, p)
		if p == "/" {
			break
		}
	}
	slices.Reverse(dirs)
	for _, p := range dirs {
		if err := allowed(p, c, groups, permExec); err != nil {
			return fmt.Errorf("cannot open %s: uid %d may not search %s", path, c.UID, p)
		}
	}
	switch {
	case create:
		if allowed(filepath.Dir(real), c, groups, permWrite|permExec) != nil {
			return fmt.Errorf("cannot create %s: uid %d may not write in %s", path, c.UID, filepath.Dir(real))
		}
	case write:
		if allowed(real, c, groups, permWrite) != nil {
			return fmt.Errorf("cannot write %s: uid %d may not", path, c.UID)
		}
	default:
		if allowed(real, c, groups, permRead) != nil {
			return fmt.Errorf("cannot read %s: uid %d may not", path, c.UID)
		}
	}
	return nil
}

func reason(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// allowed checks want (permRead, permWrite, permExec bits) on path for c:
// the owner's triplet, the group's for a member of its group, else the
// others'.
func allowed(path string, c flowgraph.Credentials, groups []int, want uint32) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New("no owner")
	}
	mode := uint32(st.Mode().Perm())
	var bits uint32
	switch {
	case int(sys.Uid) == c.UID:
		bits = mode >> 6
	case slices.Contains(groups, int(sys.Gid)):
		bits = mode >> 3
	default:
		bits = mode
	}
	if bits&want != want {
		return fs.ErrPermission
	}
	return nil
}

// peerGroups are the groups of the process with credentials c: its gid
// and the supplementary groups /proc says it has.
func peerGroups(c flowgraph.Credentials) []int {
	groups := []int{c.GID}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", c.PID))
	if err != nil {
		return groups
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Groups:"); ok {
			for _, g := range strings.Fields(rest) {
				if n, err := strconv.Atoi(g); err == nil {
					groups = append(groups, n)
				}
			}
		}
	}
	return groups
}
