package functions

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// MaxFileSize bounds a file read whole as input (a hierarchy file, a file
// of Trumpet events, a program): real ones are a few kilobytes, and a
// capture named by mistake is refused before it is read.
const MaxFileSize = 1 << 20

// FileError is a file ReadFile or CheckStream would not read. Refused
// says it was refused for what it is (not a regular file, or larger than
// MaxFileSize): a usage error (exit status 2), where a file that could
// not be opened (absent, not permitted) is one whoever asks decides on.
type FileError struct {
	Path    string
	Reason  string
	Refused bool
}

func (e *FileError) Error() string { return "cannot read " + e.Path + ": " + e.Reason }

// ReadFile reads whole a file of input, what names its kind in errors
// ("an events file"): it must be a regular file of at most MaxFileSize
// bytes. It opens without blocking, so that a FIFO with no writer is
// refused rather than waited for, and a device (/dev/zero) is refused
// rather than read without end: both at once.
func ReadFile(path, what string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, &FileError{Path: path, Reason: PathReason(err).Error()}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, &FileError{Path: path, Reason: PathReason(err).Error()}
	}
	if !st.Mode().IsRegular() {
		return nil, &FileError{path, fmt.Sprintf("it is %s, not a regular file", FileKind(st.Mode())), true}
	}
	if st.Size() > MaxFileSize {
		return nil, &FileError{path, fmt.Sprintf("it is %d bytes, and %s may have at most %d (1 MiB)", st.Size(), what, MaxFileSize), true}
	}
	// The size may have changed since Stat: read one byte more than the
	// limit to notice.
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, &FileError{Path: path, Reason: PathReason(err).Error()}
	}
	if len(data) > MaxFileSize {
		return nil, &FileError{path, fmt.Sprintf("it has more than %d bytes (1 MiB), the most %s may have", MaxFileSize, what), true}
	}
	return data, nil
}

// CheckStream refuses a file that a source would read as a stream of
// records of no bounded length (a capture): it must be a regular file or
// a FIFO (a pipe from another capture); a directory, a device or a socket
// is refused. A file that does not exist (yet) passes: opening it says
// why it cannot be read.
func CheckStream(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return nil
	}
	if m := st.Mode(); !m.IsRegular() && m&os.ModeNamedPipe == 0 {
		return &FileError{path, fmt.Sprintf("it is %s, not a regular file or a FIFO", FileKind(m)), true}
	}
	return nil
}

// FileKind names what a file that is not a regular file is: "a
// directory", "a named pipe (FIFO)", "a character device" ...
func FileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	}
	return "of mode " + m.String()
}
