package shm

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Pair returns the two ends of a unix socket that keeps message
// boundaries (SOCK_SEQPACKET), over which rings' descriptors cross with
// SendFiles and ReceiveFiles. Each side can watch its end for the other
// hanging up (Receiver.Watch with POLLRDHUP).
func Pair() (*os.File, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("shm: socketpair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "shm-socket"), os.NewFile(uintptr(fds[1]), "shm-socket"), nil
}

// MaxFiles is the most descriptors one message carries.
const MaxFiles = 16

// SendFiles sends fds over the unix socket sock in one message, tagged
// with tag (a few bytes that say what they are for).
func SendFiles(sock *os.File, tag []byte, fds []int) error {
	if len(fds) > MaxFiles {
		return fmt.Errorf("shm: %d descriptors in one message, at most %d", len(fds), MaxFiles)
	}
	if len(tag) == 0 {
		tag = []byte{0}
	}
	rc, err := sock.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Write(func(fd uintptr) bool {
		serr = unix.Sendmsg(int(fd), tag, unix.UnixRights(fds...), nil, 0)
		return serr != unix.EAGAIN
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("shm: passing descriptors: %w", err)
	}
	return nil
}

// ReceiveFiles receives one message of SendFiles: its tag and the
// descriptors, which the caller owns (close-on-exec).
func ReceiveFiles(sock *os.File) (tag []byte, fds []int, err error) {
	buf := make([]byte, 256)
	oob := make([]byte, unix.CmsgSpace(MaxFiles*4))
	rc, err := sock.SyscallConn()
	if err != nil {
		return nil, nil, err
	}
	var n, oobn int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_CMSG_CLOEXEC)
		return rerr != unix.EAGAIN
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return nil, nil, fmt.Errorf("shm: receiving descriptors: %w", err)
	}
	if n == 0 && oobn == 0 {
		return nil, nil, ErrPeerGone
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return nil, nil, fmt.Errorf("shm: receiving descriptors: %w", err)
	}
	for _, m := range msgs {
		got, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		fds = append(fds, got...)
	}
	return buf[:n], fds, nil
}
