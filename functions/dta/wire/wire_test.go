package wire

import (
	"bytes"
	"errors"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, r := range []Report{
		{Op: KeyWrite, Redundancy: 2, Key: 0x0a000105, Data: 0xdeadbeef},
		{Op: KeyWrite, Immediate: true, Redundancy: 4, Key: 1, Data: 2},
		{Op: Append, List: 3, Data: 0xc0a80001},
		{Op: KeyIncrement, Redundancy: 1, Key: 7, Counter: 1 << 40},
		{Op: Postcarding, Key: 9, Hop: 4, Data: 0x01020304},
	} {
		b, err := r.Append(nil)
		if err != nil || len(b) != r.Len() {
			t.Fatalf("%+v: %d bytes, %v", r, len(b), err)
		}
		var got Report
		if err := Decode(b, &got); err != nil || got != r {
			t.Errorf("%+v: decoded %+v, %v", r, got, err)
		}
	}
}

// The bytes are the reference implementation's, field by field, big-endian.
func TestBytes(t *testing.T) {
	r := Report{Op: KeyWrite, Immediate: true, Redundancy: 2, Key: 0x0a000105, Data: 0x11223344}
	b, _ := r.Append(nil)
	want := []byte{0x01, 0x80, 0x02, 0x0a, 0x00, 0x01, 0x05, 0x11, 0x22, 0x33, 0x44}
	if !bytes.Equal(b, want) {
		t.Fatalf("% x, want % x", b, want)
	}
	r = Report{Op: Postcarding, Key: 0x01020304, Hop: 5, Data: 0xa0b0c0d0}
	b, _ = r.Append(nil)
	want = []byte{0x04, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0xa0, 0xb0, 0xc0, 0xd0}
	if !bytes.Equal(b, want) {
		t.Fatalf("% x, want % x", b, want)
	}
}

func TestMalformed(t *testing.T) {
	for _, c := range []struct {
		b    []byte
		want Reason
	}{
		{nil, ReasonShort},
		{[]byte{0x01}, ReasonShort},
		{[]byte{0x01, 0x00, 0x02, 0, 0, 0}, ReasonShort},
		{[]byte{0x09, 0x00, 0, 0, 0, 0, 0, 0, 0, 0}, ReasonOpcode},
		{[]byte{0x00, 0x00}, ReasonOpcode},
		{[]byte{0x02, 0x00, 0, 0, 0, 1, 0, 0, 0, 2, 0xff}, ReasonTrailing},
	} {
		var r Report
		err := Decode(c.b, &r)
		var e *Error
		if !errors.As(err, &e) || e.Reason != c.want {
			t.Errorf("% x: %v, want %v", c.b, err, c.want)
		}
	}
	if _, err := (&Report{Op: 7}).Append(nil); err == nil {
		t.Error("an unknown opcode encoded")
	}
}

func TestDecodeAllocatesNothing(t *testing.T) {
	b, _ := (&Report{Op: KeyIncrement, Key: 1, Counter: 2}).Append(nil)
	var r Report
	if n := testing.AllocsPerRun(100, func() { _ = Decode(b, &r) }); n != 0 {
		t.Fatalf("%v allocs per decode", n)
	}
}

func FuzzDecode(f *testing.F) {
	for _, r := range []Report{{Op: KeyWrite}, {Op: Append}, {Op: KeyIncrement}, {Op: Postcarding}} {
		b, _ := r.Append(nil)
		f.Add(b)
	}
	f.Add([]byte{0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Report
		if err := Decode(b, &r); err != nil {
			return
		}
		// What decodes re-encodes to the same bytes, reserved bits aside.
		out, err := r.Append(nil)
		if err != nil || len(out) != len(b) || out[0] != b[0] || !bytes.Equal(out[2:], b[2:]) || out[1] != b[1]&0x80 {
			t.Fatalf("% x re-encoded as % x (%v)", b, out, err)
		}
	})
}
