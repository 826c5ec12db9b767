package collector

import "testing"

func TestParse(t *testing.T) {
	kw, err := ParseKeyWrite("slots=4M,redundancy=2")
	if err != nil || kw.Slots != 4000000 || kw.Redundancy != 2 {
		t.Fatalf("%+v %v", kw, err)
	}
	ap, err := ParseAppend("lists=16,size=1Mi")
	if err != nil || ap.Lists != 16 || ap.Size != 1<<20 {
		t.Fatalf("%+v %v", ap, err)
	}
	pc, err := ParsePostcarding("chunks=0x10001,hops=5,values=262144")
	if err != nil || pc.Chunks != 0x10001 || pc.Hops != 5 || pc.Values != 1<<18 {
		t.Fatalf("%+v %v", pc, err)
	}
	for _, bad := range []string{"", "slots", "slots=x", "slots=1M,slots=2M", "redundancy=2", "slot=1M", "slots=99999999999999999999"} {
		if _, err := ParseKeyWrite(bad); err == nil {
			t.Errorf("ParseKeyWrite(%q) passed", bad)
		}
	}
	// 0 is the default in the structures; written out, it is an error, not the default
	if _, err := ParseKeyWrite("slots=1021,redundancy=0"); err == nil {
		t.Error("keywrite redundancy=0 passed")
	}
	if _, err := ParseKeyIncrement("slots=1021,redundancy=0"); err == nil {
		t.Error("keyincrement redundancy=0 passed")
	}
	for _, bad := range []string{"chunks=61,hops=0", "chunks=61,values=0", "chunks=61,redundancy=0"} {
		if _, err := ParsePostcarding(bad); err == nil {
			t.Errorf("ParsePostcarding(%q) passed", bad)
		}
	}
	for _, c := range []Config{
		{},
		{KeyWrite: KeyWriteConfig{Slots: 1 << 20}},
		{KeyWrite: KeyWriteConfig{Slots: 1000, Redundancy: 9}},
		{Append: AppendConfig{Lists: 0, Size: 10}},
		{Postcarding: PostcardingConfig{Chunks: 1000, Hops: 9}},
		{Postcarding: PostcardingConfig{Chunks: 1000, Values: Blank}},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v passed", c)
		}
	}
}
