package functions

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestReadFile: a file read whole is a regular file of at most
// MaxFileSize bytes; anything else is refused (Refused: a usage error),
// a file that cannot be opened is not refused but reported.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ok := filepath.Join(dir, "ok")
	full := filepath.Join(dir, "full")
	big := filepath.Join(dir, "big")
	for path, n := range map[string]int{ok: 10, full: MaxFileSize, big: MaxFileSize + 1} {
		if err := os.WriteFile(path, bytes.Repeat([]byte("x"), n), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		path, want string
		refused    bool
	}{
		{ok, "", false},
		{full, "", false},
		{big, "cannot read " + big + ": it is 1048577 bytes, and a file of tests may have at most 1048576 (1 MiB)", true},
		{"/dev/zero", "cannot read /dev/zero: it is a character device, not a regular file", true},
		{fifo, "cannot read " + fifo + ": it is a named pipe (FIFO), not a regular file", true},
		{dir, "cannot read " + dir + ": it is a directory, not a regular file", true},
		{filepath.Join(dir, "missing"), "cannot read " + filepath.Join(dir, "missing") + ": no such file or directory", false},
	} {
		data, err := ReadFile(c.path, "a file of tests")
		var fe *FileError
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.path, err)
		case c.want == "" && len(data) == 0:
			t.Errorf("%s: read nothing", c.path)
		case c.want != "" && (err == nil || err.Error() != c.want || !errors.As(err, &fe) || fe.Refused != c.refused):
			t.Errorf("%s: %v (%+v), want %s (refused %v)", c.path, err, fe, c.want, c.refused)
		}
	}
	for path, want := range map[string]string{
		"/dev/zero": "cannot read /dev/zero: it is a character device, not a regular file or a FIFO",
		dir:         "cannot read " + dir + ": it is a directory, not a regular file or a FIFO",
		fifo:        "", ok: "", filepath.Join(dir, "missing"): "",
	} {
		if err := CheckStream(path); err == nil && want != "" || err != nil && err.Error() != want {
			t.Errorf("CheckStream(%s): %v, want %q", path, err, want)
		}
	}
}
