package kernel

import (
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
)

func TestEBPFFlowspaces(t *testing.T) {
	k, err := New(Options{Kind: flowspaces.KindKernel})
	if err != nil {
		t.Fatal(err)
	}
	x, err := New(Options{Kind: flowspaces.KindXDP, Interface: "eth0"})
	if err != nil {
		t.Fatal(err)
	}
	if k.Name() != "kernel" || x.Name() != "xdp:eth0" || k.Stores() || x.Stores() {
		t.Errorf("names %s %s, stores %v %v", k.Name(), x.Name(), k.Stores(), x.Stores())
	}
	if k.Entry("eth9") != flowspaces.AnyEntry || x.Entry("eth0") != flowspaces.OwnEntry || x.Entry("eth1") != flowspaces.NoEntry {
		t.Error("wrong interface entries")
	}
	n := &flowspaces.Node{Class: &functions.Class{Name: "bpf", Targets: []functions.Target{functions.TargetUser}}}
	if err := x.Host(n); err == nil || err.Error() != "class bpf has no xdp (eBPF) implementation" {
		t.Errorf("xdp hosts a Go-only class: %v", err)
	}
	if err := k.Instantiate(n); err == nil || !strings.Contains(err.Error(), "kernel (eBPF)") {
		t.Errorf("kernel instantiates a Go-only class: %v", err)
	}
	if _, err := New(Options{Kind: flowspaces.KindXDP}); err == nil {
		t.Error("an xdp flowspace without an interface")
	}
	if _, err := New(Options{Kind: flowspaces.KindUser}); err == nil {
		t.Error("a user flowspace from the eBPF package")
	}
}
