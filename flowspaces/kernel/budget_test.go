package kernel

import (
	"os"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/ffpf-go/ffpf/bridges/ringbuf"
	"github.com/ffpf-go/ffpf/flowspaces"
)

// TestBudgetTakesExactly: with a packet limit (ffpf run -c), the program
// of an XDP or tc hook counts exactly the packets the limit allows, takes
// them from the run's budget (which the process reads as spent), and lets
// every packet on, counted or not.
func TestBudgetTakesExactly(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("loading eBPF programs needs root")
		}
		t.Skip("loading eBPF programs needs root")
	}
	pkt := make([]byte, 60)
	pkt[12], pkt[13] = 0x08, 0x00
	for _, kind := range []flowspaces.Kind{flowspaces.KindXDP, flowspaces.KindKernel} {
		fs, err := New(Options{Kind: kind, Interface: "t"})
		if err != nil {
			t.Fatal(err)
		}
		b := flowspaces.NewBudget(5)
		fs.SetBudget(b)
		bm, err := fs.budgetMap()
		if err != nil {
			t.Fatal(err)
		}
		m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 8})
		if err != nil {
			t.Fatal(err)
		}
		p := &progSpec{kind: kind, iface: "t", counters: m, snap: ringbuf.Snap, progName: "ffpf_test", budget: bm,
			nodes: []progNode{{iface: "t", slot: 0, in: true}}}
		prog, err := p.load("test")
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		pass := uint32(xdpPass)
		if kind != flowspaces.KindXDP {
			pass = ^uint32(0) // TCX_NEXT
		}
		for i := range 8 {
			if b.Spent() != (i >= 5) {
				t.Errorf("%s: after %d packets the budget says spent=%v", kind, i, b.Spent())
			}
			ret, err := prog.Run(&ebpf.RunOptions{Data: pkt})
			if err != nil || ret != pass {
				t.Fatalf("%s: packet %d: verdict %d, %v", kind, i, ret, err)
			}
		}
		var per []uint64
		if err := m.Lookup(uint32(0), &per); err != nil {
			t.Fatal(err)
		}
		var in uint64
		for _, v := range per {
			in += v
		}
		if in != 5 || !b.Spent() {
			t.Errorf("%s: the hook counted %d packets of 8 with a limit of 5 (spent: %v)", kind, in, b.Spent())
		}
		prog.Close()
		m.Close()
	}
}
