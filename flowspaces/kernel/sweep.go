package kernel

// What outlives a process: a BPF link (XDP, TCX) is detached when the
// last descriptor of it closes, so a process that dies takes its
// programs with it; a tc filter on a clsact qdisc, where the kernel has
// no TCX, and the qdisc itself stay until someone removes them. ffpf
// names each filter after its process (clsactName); a process that is
// asked to (RecordQdiscs) also writes down each clsact qdisc it adds, so
// that another process can remove what it left should it die (Sweep).

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

var recordDir string // guarded by clsactMu

// recordName is this process's record of the qdiscs it added.
func recordName(dir string) string {
	return filepath.Join(dir, fmt.Sprintf("clsact.%d.%d", nsInode("pid"), os.Getpid()))
}

// RecordQdiscs makes this process write down in dir each clsact qdisc it
// adds from now on (a file of its own), for Sweep. "" stops, and removes
// this process's record: call it once nothing is attached any more.
func RecordQdiscs(dir string) {
	clsactMu.Lock()
	defer clsactMu.Unlock()
	if dir == "" && recordDir != "" {
		os.Remove(recordName(recordDir))
	}
	recordDir = dir
}

// recordQdisc appends the qdisc k to this process's record; clsactMu is
// held.
func recordQdisc(k qdiscKey) {
	if recordDir == "" {
		return
	}
	f, err := os.OpenFile(recordName(recordDir), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintf(f, "%d %d\n", k.netns, k.ifindex)
	f.Close()
}

// Sweep removes what ffpf processes of this pid namespace that are gone
// left attached in this network namespace: the clsact filters named after
// them, on every interface, and the clsact qdiscs that their records in
// dir ("": none) say they added, when no filter is left on them. A record
// whose qdiscs are all dealt with is removed. It returns a line per object
// removed.
func Sweep(dir string) []string {
	clsactMu.Lock()
	defer clsactMu.Unlock()
	var out []string
	links, _ := netlink.LinkList()
	for _, l := range links {
		for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
			for _, name := range removeStale(l.Attrs().Index, parent) {
				out = append(out, fmt.Sprintf("the tc filter %s on %s", name, l.Attrs().Name))
			}
		}
	}
	if dir == "" {
		return out
	}
	files, _ := filepath.Glob(filepath.Join(dir, "clsact.*.*"))
	pidns, netns := nsInode("pid"), nsInode("net")
	for _, name := range files {
		var ns uint64
		var pid int
		if n, _ := fmt.Sscanf(filepath.Base(name), "clsact.%d.%d", &ns, &pid); n != 2 || ns != pidns || pid <= 0 {
			continue
		}
		if pid == os.Getpid() || unix.Kill(pid, 0) != unix.ESRCH {
			continue // its process runs, and removes its own
		}
		left := false
		for _, k := range readRecord(name) {
			if k.netns != netns {
				left = true // another namespace's: swept from there
				continue
			}
			l, err := netlink.LinkByIndex(k.ifindex)
			if err != nil {
				continue // the interface is gone, and its qdiscs with it
			}
			if !hasClsact(l) {
				continue
			}
			busy := false
			for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
				if fs, err := netlink.FilterList(l, parent); err != nil || len(fs) > 0 {
					busy = true
				}
			}
			if busy {
				continue // others' filters use it now: it is theirs
			}
			if netlink.QdiscDel(clsactQdisc(k.ifindex)) == nil {
				out = append(out, "the clsact qdisc on "+l.Attrs().Name)
			}
		}
		if !left {
			os.Remove(name)
		}
	}
	return out
}

// hasClsact reports whether l has a clsact qdisc.
func hasClsact(l netlink.Link) bool {
	qs, err := netlink.QdiscList(l)
	if err != nil {
		return false
	}
	for _, q := range qs {
		if q.Type() == "clsact" {
			return true
		}
	}
	return false
}

// readRecord reads the qdiscs a record lists.
func readRecord(name string) []qdiscKey {
	f, err := os.Open(name)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []qdiscKey
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 2 {
			continue
		}
		ns, err1 := strconv.ParseUint(fs[0], 10, 64)
		idx, err2 := strconv.Atoi(fs[1])
		if err1 == nil && err2 == nil {
			out = append(out, qdiscKey{ns, idx})
		}
	}
	return out
}
