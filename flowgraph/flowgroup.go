package flowgraph

import (
	"fmt"
	"os"
	"strconv"
)

// Flowgroup policies (FFPF §4.1): which applications' requests may share
// functions and packet buffers, and read each other's state.
const (
	GroupUID = "uid" // requests of one user
	GroupGID = "gid" // requests of one group
	GroupPID = "pid" // requests of one process
	GroupAll = "all" // every request
)

// Credentials identify the application behind a request.
type Credentials struct{ UID, GID, PID int }

// Self returns the credentials of this process.
func Self() Credentials { return Credentials{os.Getuid(), os.Getgid(), os.Getpid()} }

// Flowgroup returns the flowgroup of an application with credentials c
// under policy, for RequestOptions.Group. A runtime that serves other
// processes (over a socket, say) passes their peer credentials.
func Flowgroup(policy string, c Credentials) (string, error) {
	switch policy {
	case GroupUID:
		return "uid:" + strconv.Itoa(c.UID), nil
	case GroupGID:
		return "gid:" + strconv.Itoa(c.GID), nil
	case GroupPID:
		return "pid:" + strconv.Itoa(c.PID), nil
	case GroupAll:
		return GroupAll, nil
	}
	return "", &InvalidError{fmt.Sprintf("unknown flowgroup policy %q (want uid, gid, pid or all)", policy)}
}

// Group returns the request's flowgroup.
func (r *Request) Group() string { return r.group }

// Lookup returns the state of the function id if it belongs to the
// request's flowgroup. A function of another group is reported as absent,
// as one that does not exist: its state, and even its existence, are not
// the request's to see.
func (r *Request) Lookup(id string) (FunctionState, error) {
	for _, f := range r.rt.snapshotFuncs() {
		if f.ID == id && f.group == r.group {
			return f.State(), nil
		}
	}
	return FunctionState{}, fmt.Errorf("no function %s in flowgroup %q", id, r.group)
}

// FunctionsOf returns the state of the functions of one flowgroup.
func (rt *Runtime) FunctionsOf(group string) []FunctionState {
	var out []FunctionState
	for _, f := range rt.snapshotFuncs() {
		if f.group == group {
			out = append(out, f.State())
		}
	}
	return out
}
