package kernel

import (
	"testing"

	"github.com/cilium/ebpf"

	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
)

// TestMapBytesWindowed checks the state budget's measure of a function's
// maps against the maps the flowspace creates for it: with window= they
// are twice as many (a copy per epoch parity).
func TestMapBytesWindowed(t *testing.T) {
	needRoot(t)
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range []string{"key=srcip/24 width=500 depth=3", "key=srcip/24 width=500 depth=3 window=100ms"} {
		c, _ := functions.Default.Lookup("cms")
		ctx := &functions.Context{ID: "cms", Params: bindArgs(t, c, args), LinkType: functions.LinkEthernet, Snaplen: 262144}
		fn, err := c.EBPF(functions.TargetXDP, ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := &flowspaces.Node{ID: "cms", Class: c, Ctx: *ctx}
		size, err := mapBytes(functions.TargetXDP, n, fn)
		if err != nil {
			t.Fatal(err)
		}
		fields, _, err := c.State.Layout(functions.TargetXDP, ctx.Params)
		if err != nil {
			t.Fatal(err)
		}
		win, err := windowOf(n, fn)
		if err != nil {
			t.Fatal(err)
		}
		maps, err := newStateMaps(c, fields, fn, win.halves())
		win.close()
		if err != nil {
			t.Fatal(err)
		}
		var made int64
		for _, sm := range maps {
			for _, m := range []*ebpf.Map{sm.m, sm.odd} {
				if m == nil {
					continue
				}
				b := int64(m.MaxEntries()) * int64(m.ValueSize())
				if m.Type() == ebpf.PerCPUArray || m.Type() == ebpf.PerCPUHash {
					b *= int64(cpus)
				}
				made += b
			}
		}
		closeMaps(maps)
		if size == 0 || size != made {
			t.Errorf("cms %s: the state budget counts %d bytes, its maps take %d", args, size, made)
		}
	}
}
