package hierarchy

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"

	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/kernel"
	"github.com/ffpf-go/ffpf/flowspaces/user"
	"github.com/ffpf-go/ffpf/functions"
)

// Discover returns the default hierarchy of this machine: userspace, the
// kernel's tc hook beneath it, and one XDP flowspace per network interface
// (loopback excepted, sorted by name) beneath the kernel, each only where
// it can really run: the probes load a trivial program of the type the
// flowspace needs (SchedCLS for the kernel, XDP for xdp:<iface>). absent
// says, one sentence each, which flowspaces were left out and why. The
// probes run once per process; without the privilege to load eBPF programs
// Discover returns userspace alone and says so in absent. reg is for
// flowspaces that will consult the registry; the eBPF flowspaces do not yet.
//
// An XDP flowspace is present when the kernel loads XDP programs; whether
// the interface's driver runs them natively or in generic mode is known
// only when one is attached.
func Discover(reg *functions.Registry) (root flowspaces.Flowspace, absent []string) {
	_ = reg
	var ifaces []string
	if list, err := net.Interfaces(); err == nil {
		for _, i := range list {
			if i.Flags&net.FlagLoopback == 0 {
				ifaces = append(ifaces, i.Name)
			}
		}
	} else {
		absent = append(absent, fmt.Sprintf("xdp: the network interfaces cannot be listed (%v)", err))
	}
	return discover(probeOnce(), ifaces, absent)
}

// Userspace returns the hierarchy of userspace alone, without probing: for
// a run whose sources all run in userspace (files, generators), where no
// function can be placed beneath them.
func Userspace() flowspaces.Flowspace {
	return user.New(user.Options{Name: "user", Kind: flowspaces.KindUser})
}

// probes are the results of the eBPF probes: nil when the program type
// loads.
type probes struct {
	kernel, xdp error
}

var (
	probed     probes
	probedOnce sync.Once
)

// probeOnce runs the probes the first time and returns their results.
func probeOnce() probes {
	probedOnce.Do(func() {
		// Kernels before 5.11 charge eBPF memory to RLIMIT_MEMLOCK; later
		// ones ignore it. Lifted here rather than with cilium/ebpf's
		// rlimit package, whose init creates a map to tell the two apart
		// in every process, also in runs that never load a program.
		_ = unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY})
		probed = probes{
			kernel: features.HaveProgramType(ebpf.SchedCLS),
			xdp:    features.HaveProgramType(ebpf.XDP),
		}
	})
	return probed
}

// discover builds the hierarchy from the probe results and the interfaces.
func discover(pr probes, ifaces []string, absent []string) (flowspaces.Flowspace, []string) {
	root := Userspace()
	slices.Sort(ifaces)
	ifaces = slices.Compact(ifaces)
	if pr.kernel != nil {
		absent = append(absent, "kernel: "+why(pr.kernel, "tc (SchedCLS)"))
		for _, i := range ifaces {
			absent = append(absent, "xdp:"+i+": the kernel flowspace it would hang beneath is absent")
		}
		return root, absent
	}
	k, err := kernel.New(kernel.Options{Kind: flowspaces.KindKernel})
	if err == nil {
		_, err = flowspaces.Attach(root, k, "user/kernel", flowspaces.ZeroCopy)
	}
	if err != nil { // cannot happen: the root is empty
		return root, append(absent, "kernel: "+err.Error())
	}
	for n, i := range ifaces {
		name := "xdp:" + i
		switch {
		case pr.xdp != nil:
			absent = append(absent, name+": "+why(pr.xdp, "XDP"))
			continue
		case n >= flowspaces.MaxChildren:
			absent = append(absent, fmt.Sprintf("%s: the kernel flowspace has room for %d children only (4 bits of the path field per level), taken by the first interfaces by name", name, flowspaces.MaxChildren))
			continue
		}
		x, err := kernel.New(kernel.Options{Kind: flowspaces.KindXDP, Interface: i})
		if err == nil {
			_, err = flowspaces.Attach(k, x, "driver", flowspaces.CopyOnce)
		}
		if err != nil {
			absent = append(absent, name+": "+err.Error())
		}
	}
	return root, absent
}

// why explains a failed probe for a program type, with the remedy.
func why(err error, prog string) string {
	var errno syscall.Errno
	reason := err.Error()
	if errors.As(err, &errno) {
		reason = errno.Error()
	}
	switch {
	case errors.Is(err, ebpf.ErrNotSupported):
		return fmt.Sprintf("this kernel cannot load %s eBPF programs (%s)", prog, reason)
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES):
		if os.Geteuid() == 0 {
			return fmt.Sprintf("eBPF programs cannot be loaded here (%s): this root process lacks CAP_BPF (a container without privileges?) or the kernel is locked down", reason)
		}
		return fmt.Sprintf("eBPF programs cannot be loaded here (%s): run as root or with CAP_BPF", reason)
	}
	return fmt.Sprintf("the probe for %s eBPF programs failed (%s)", prog, reason)
}
