// Package hierarchy builds flowspace hierarchies and describes them.
//
// A hierarchy is the tree of flowspaces the flowgraph places functions in:
// userspace on the host is the root, packets enter at the leaves and
// travel up, and each flowspace sees the ones beneath it only through
// their stubs, which name the barrier between the two and the strategy of
// the bridge across it (FFPF §2, §3.1). This package makes such trees
// three ways:
//
//   - Discover: the flowspaces this machine really has: user, the kernel's
//     tc eBPF hook beneath it, and one xdp:<iface> per network interface
//     beneath the kernel, each only where a probe loads an eBPF program of
//     its type; the others are listed as absent, with the reason.
//   - Load and Parse: a hierarchy described in a YAML file, typically with
//     test flowspaces (Go flowspaces of kind test) that stand in for boards
//     this machine lacks: an IXP, a programmable NIC (see
//     examples/hierarchy). A mistake in the file is one sentence naming
//     the file and line.
//   - by hand, with flowspaces.Attach.
//
// Describe and Format show a hierarchy (for 'ffpf hierarchy'): per
// flowspace its kind, level, path field, whether it stores packets, the
// barrier and bridge up to its parent, its classes and interfaces.
//
// The file format:
//
//	name: user                # the root, userspace on the host; optional
//	children:
//	  - name: nic0
//	    kind: test            # test | kernel | xdp
//	    classes: [bpf]        # test: the only classes it runs (omitted: any with Go code)
//	    in_place: false       # test: keep no PBuf, like a kernel hook
//	    barrier: pci          # free text; default user/kernel, driver or in-process by kind
//	    bridge: copy-once     # zero-copy | copy-once (the default)
//	    interfaces:           # test: simulated interfaces whose packets enter here
//	      - eth0              # placement only, no traffic
//	      - name: eth1
//	        traffic: (gen,seed=2,packets=10000)   # any source that does not capture
//	    interface: eth0       # xdp: the interface whose driver runs it
//	    state: 64MB           # the most state its functions keep together (MBuf bytes;
//	                          # map memory in kernel and xdp): default half the RAM in a
//	                          # Go flowspace, a quarter in an eBPF one; none for no bound.
//	                          # The root takes it too. A function whose state does not fit
//	                          # runs higher; at the root, its request fails at populate.
//	    children: [...]
//
// A kernel flowspace hangs beneath the root, an xdp one beneath the root or
// the kernel; a test flowspace anywhere. A relative file named in a traffic
// term (a pcap trace) is relative to the hierarchy file.
//
// The sharp edge: a test flowspace's interfaces are simulated, and their
// names shadow the machine's. A capture of eth0 in a hierarchy whose
// nic0 simulates eth0 replays nic0's traffic and never touches the real
// eth0; a capture of an interface no flowspace claims falls through to the
// root, userspace, which captures the real interface of that name.
package hierarchy
