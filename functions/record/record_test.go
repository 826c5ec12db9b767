package record

import (
	"encoding/json"
	"testing"
)

func build(t testing.TB, buf []byte) int {
	var b Builder
	b.Start(buf, Report, 1_700_000_000_000_000_000, "cms#1")
	b.Begin("key")
	b.Prefix("srcip", []byte{10, 0, 1, 0}, 24)
	b.Addr("dstip", []byte{0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
	b.U64("dstport", 80)
	b.Null("vlan")
	b.MAC("srcmac", []byte{0, 0x1b, 0x21, 0xaa, 0xbb, 0xcc})
	b.End()
	b.U64("estimate", 12345)
	b.F64("share", 0.25)
	b.I64("delta", -3)
	b.Bool("exact", true)
	b.String("note", "a \"quoted\"\n")
	n, ok := b.Finish()
	if !ok {
		t.Fatal("record did not fit")
	}
	return n
}

func TestJSON(t *testing.T) {
	buf := make([]byte, 512)
	n := build(t, buf)
	out, err := AppendJSON(nil, buf[:n])
	if err != nil {
		t.Fatal(err)
	}
	want := `{"function":"cms#1","ts":1700000000000000000,"kind":"report","key":{"srcip":"10.0.1.0/24","dstip":"2001:db8::1","dstport":80,"vlan":null,"srcmac":"00:1b:21:aa:bb:cc"},"estimate":12345,"share":0.25,"delta":-3,"exact":true,"note":"a \"quoted\"\n"}`
	if string(out) != want {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
}

func TestDoesNotFit(t *testing.T) {
	buf := make([]byte, 512)
	n := build(t, buf)
	for size := 0; size < n; size++ {
		var b Builder
		b.Start(make([]byte, size), Report, 0, "cms#1")
		b.Begin("key")
		b.Prefix("srcip", []byte{10, 0, 1, 0}, 24)
		b.End()
		b.U64("estimate", 1)
		if m, ok := b.Finish(); ok && m > size {
			t.Fatalf("a record of %d bytes fit in %d", m, size)
		}
	}
}

func TestMalformed(t *testing.T) {
	buf := make([]byte, 512)
	n := build(t, buf)
	rec := buf[:n]
	for cut := 0; cut < n; cut++ {
		if _, err := AppendJSON(nil, rec[:cut]); err == nil {
			t.Fatalf("a record cut to %d of %d bytes decoded", cut, n)
		}
	}
	bad := append([]byte(nil), rec...)
	bad[0] = 'X'
	if _, err := AppendJSON(nil, bad); err == nil {
		t.Fatal("bad magic decoded")
	}
}

func TestBuildAllocatesNothing(t *testing.T) {
	buf := make([]byte, 512)
	if a := testing.AllocsPerRun(100, func() { build(t, buf) }); a != 0 {
		t.Fatalf("%v allocations per record", a)
	}
}

func FuzzFields(f *testing.F) {
	buf := make([]byte, 512)
	f.Add(buf[:build(f, buf)])
	f.Fuzz(func(t *testing.T, rec []byte) {
		out, err := AppendJSON(nil, rec)
		if err != nil {
			return
		}
		var v map[string]any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("decoded to invalid JSON %s: %v", out, err)
		}
	})
}

// Floats are written as encoding/json writes them: 1516940, not 1.51694e+06.
func TestJSONFloatsAsEncodingJSON(t *testing.T) {
	for _, v := range []float64{1516940, 0.25, 1e21, 1e20, 1e-7, 1e-6, -3, 0, 123456789012345680, 1.0 / 3} {
		buf := make([]byte, 128)
		var b Builder
		b.Start(buf, Report, 1, "x#1")
		b.F64("v", v)
		n, ok := b.Finish()
		if !ok {
			t.Fatal("record did not fit")
		}
		out, err := AppendJSON(nil, buf[:n])
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(map[string]any{"function": "x#1", "ts": 1, "kind": "report", "v": v})
		var got, exp map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%v: not JSON: %s", v, out)
		}
		json.Unmarshal(want, &exp)
		if string(got["v"]) != string(exp["v"]) {
			t.Errorf("%v written %s, encoding/json writes %s", v, got["v"], exp["v"])
		}
	}
}
