package p4info

import (
	"fmt"
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/config/v1"
)

// TestP4InfoIDs: IDs of names from the P4Info p4c writes for the P4
// tutorials' basic.p4 (MyIngress.ipv4_lpm is table 37375156,
// MyIngress.ipv4_forward action 28792405).
func TestP4InfoIDs(t *testing.T) {
	for _, c := range []struct {
		prefix p4v1.P4Ids_Prefix
		name   string
		id     uint32
	}{
		{p4v1.P4Ids_TABLE, "MyIngress.ipv4_lpm", 37375156},
		{p4v1.P4Ids_ACTION, "MyIngress.ipv4_forward", 28792405},
	} {
		s := newIDs()
		s.add(c.prefix, c.name)
		s.compute()
		if got := s.id[c.prefix][c.name]; got != c.id {
			t.Errorf("%s: id %d, p4c's is %d", c.name, got, c.id)
		}
	}
	// Two names whose hashes collide in 24 bits: the second in sorted
	// order probes to the next ID.
	byHash := map[uint32]string{}
	var a, b string
	for i := 0; b == ""; i++ {
		n := fmt.Sprintf("ffpf_ingress.a%d", i)
		h := JenkinsHash(n) & 0xffffff
		if other, ok := byHash[h]; ok {
			a, b = other, n
		}
		byHash[h] = n
	}
	if b < a {
		a, b = b, a
	}
	s := newIDs()
	s.add(p4v1.P4Ids_ACTION, b)
	s.add(p4v1.P4Ids_ACTION, a)
	s.compute()
	ida, idb := s.id[p4v1.P4Ids_ACTION][a], s.id[p4v1.P4Ids_ACTION][b]
	if ida != 0x01000000|JenkinsHash(a)&0xffffff || idb != 0x01000000|(JenkinsHash(b)+1)&0xffffff {
		t.Errorf("%s and %s collide: ids %#x and %#x, want the second probed one up", a, b, ida, idb)
	}
}
