package reporter

import (
	"testing"

	"github.com/ffpf-go/ffpf/functions/record"
)

// An object of one member of at most 32 bits is that member; any other
// object folds.
func TestOneMember(t *testing.T) {
	obj := func(fill func(b *record.Builder)) []byte {
		var b record.Builder
		buf := make([]byte, 512)
		b.Start(buf, record.Event, 1, "t")
		b.Begin("key")
		fill(&b)
		b.End()
		n, ok := b.Finish()
		if !ok {
			t.Fatal("record")
		}
		f, ok := record.Find(buf[:n], "key")
		if !ok {
			t.Fatal("no key")
		}
		return f.Raw
	}
	for _, c := range []struct {
		name string
		fill func(b *record.Builder)
		v    uint64
		ok   bool
	}{
		{"dstip", func(b *record.Builder) { b.Addr("dstip", []byte{10, 0, 1, 5}) }, 0x0a000105, true},
		{"port", func(b *record.Builder) { b.U64("dstport", 80) }, 80, true},
		{"proto", func(b *record.Builder) { b.String("proto", "udp") }, 17, true},
		{"proto number", func(b *record.Builder) { b.U64("proto", 132) }, 132, true},
		{"wide", func(b *record.Builder) { b.U64("x", 1<<32) }, 0, false},
		{"ipv6", func(b *record.Builder) { b.Addr("dstip", make([]byte, 16)) }, 0, false},
		{"prefix", func(b *record.Builder) { b.Prefix("dstip", []byte{10, 0, 1, 0}, 24) }, 0, false},
		{"string", func(b *record.Builder) { b.String("proto", "sctp") }, 0, false},
		{"two", func(b *record.Builder) { b.Addr("srcip", []byte{1, 2, 3, 4}); b.U64("dstport", 80) }, 0, false},
	} {
		v, ok := oneMember(obj(c.fill))
		if v != c.v || ok != c.ok {
			t.Errorf("%s: %d %v, want %d %v", c.name, v, ok, c.v, c.ok)
		}
	}
}
