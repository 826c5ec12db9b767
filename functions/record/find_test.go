package record

import (
	"bytes"
	"testing"
)

func TestFind(t *testing.T) {
	buf := make([]byte, 256)
	var b Builder
	b.Start(buf, Report, 5, "cms0")
	b.Begin("key")
	b.Addr("srcip", []byte{10, 0, 1, 5})
	b.U64("dstport", 80)
	b.Null("vlan")
	b.End()
	b.U64("estimate", 1234)
	b.String("name", "x")
	b.Begin("other")
	b.U64("estimate", 9)
	b.End()
	n, ok := b.Finish()
	if !ok {
		t.Fatal("record did not fit")
	}
	rec := buf[:n]

	f, ok := Find(rec, "estimate")
	if !ok || f.Type != U64 || f.Uint() != 1234 {
		t.Fatalf("estimate: %+v %v", f, ok)
	}
	if f, ok = Find(rec, "key.srcip"); !ok || f.Type != IPv4 || !bytes.Equal(f.Raw, []byte{10, 0, 1, 5}) {
		t.Fatalf("key.srcip: %+v %v", f, ok)
	}
	if f, ok = Find(rec, "other.estimate"); !ok || f.Uint() != 9 {
		t.Fatalf("other.estimate: %+v %v", f, ok)
	}
	if f, ok = Find(rec, "key"); !ok || f.Type != Begin {
		t.Fatalf("key: %+v %v", f, ok)
	}
	// An object's Raw is its members' encoding.
	var members [][]byte
	_ = Fields(rec, func(fl Field) error {
		members = append(members, fl.Raw)
		return nil
	})
	if !bytes.HasPrefix(f.Raw, []byte{byte(IPv4), 5, 's', 'r', 'c', 'i', 'p', 10, 0, 1, 5}) || bytes.Contains(f.Raw, []byte("estimate")) {
		t.Fatalf("key's raw % x", f.Raw)
	}
	for _, miss := range []string{"srcip", "key.estimate", "nothing", "key.", ".srcip"} {
		if _, ok := Find(rec, miss); ok {
			t.Errorf("found %q", miss)
		}
	}
	// Malformed records are not found in, whatever the cut.
	for i := range rec {
		Find(rec[:i], "estimate")
	}
	if a := testing.AllocsPerRun(100, func() { Find(rec, "key.dstport") }); a != 0 {
		t.Errorf("Find allocates %v times", a)
	}
}
