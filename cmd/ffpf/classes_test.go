package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

// TestClassesPrintState: 'ffpf classes' shows each class's declared state,
// in text and JSON, and nothing for a class without state.
func TestClassesPrintState(t *testing.T) {
	var out, errb bytes.Buffer
	if err := cmdClasses(nil, &out, &errb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"state (native byte order):",
		"packets  u64 (packets)  merge=sum  packets that passed",
		"bytes  u64 (bytes)  merge=sum  sum of their wire lengths",
		"stolen     u64 (packets)  merge=sum  in kernel, xdp: packets of this capture's functions",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("classes does not print %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := cmdClasses([]string{"--json"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	var docs []struct {
		Name  string          `json:"name"`
		State json.RawMessage `json:"state"`
	}
	if err := json.Unmarshal(out.Bytes(), &docs); err != nil {
		t.Fatal(err)
	}
	state := map[string]string{}
	for _, d := range docs {
		state[d.Name] = string(bytes.Join(bytes.Fields(d.State), nil))
	}
	for name, want := range map[string]string{
		"pktcount": `{"byte_order":"native","fields":[{"name":"packets","type":"u64","unit":"packets","merge":"sum","summary":"packetsthatpassed"}]}`,
		"bpf":      ``,
	} {
		if state[name] != want {
			t.Errorf("classes --json: %s state %s, want %s", name, state[name], want)
		}
	}
}

// TestClassesPrintParametricState: a field whose length follows from the
// parameters, kept per epoch parity, in another byte order, is printed
// without instantiating anything.
func TestClassesPrintParametricState(t *testing.T) {
	reg := functions.NewRegistry()
	err := reg.Register(&functions.Class{Name: "cms", MinInputs: 1, MaxInputs: 1,
		New: func(*functions.Context) (functions.Function, error) {
			t.Error("printing the classes instantiated one")
			return nil, nil
		},
		Params: []functions.Param{{Name: "depth", Type: functions.Int, Required: true}, {Name: "width", Type: functions.Int, Required: true}},
		State: &functions.State{Order: binary.BigEndian, Fields: []functions.StateField{
			{Name: "rows", Type: buffers.U32, Unit: "bytes", Merge: functions.MergeSum, Parity: true, Summary: "the sketch",
				LenOf: func(p functions.Params) int { return int(p.Int("depth") * p.Int("width")) }, LenDoc: "depth×width"},
			{Name: "regs", Type: buffers.U8, Merge: functions.MergeMax, Len: 64, Summary: "registers"},
		}}})
	if err != nil {
		t.Fatal(err)
	}
	docs := describeClasses(reg)
	var out bytes.Buffer
	if err := printClasses(&out, docs); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{"state (big-endian byte order):",
		"rows 2×u32[depth×width] (bytes) merge=sum the sketch", "regs u8[64] merge=max registers"} {
		if !strings.Contains(text, want) {
			t.Errorf("classes does not print %q:\n%s", want, out.String())
		}
	}
	js, _ := json.Marshal(docs[0].State)
	if want := `{"byte_order":"big-endian","fields":[{"name":"rows","type":"u32","len_of":"depth×width","parity":true,"unit":"bytes","merge":"sum","summary":"the sketch"},{"name":"regs","type":"u8","len":64,"merge":"max","summary":"registers"}]}`; string(js) != want {
		t.Errorf("state as JSON:\n%s\nwant\n%s", js, want)
	}
}

// TestClassesAndPlaceSayHowWorkersShare: 'ffpf classes' gives each
// class's concurrency kind and the settings that make it ordered, in text
// and JSON; 'ffpf place' says how each function placed in userspace runs
// when several workers reach it, and why an ordered one is.
func TestClassesAndPlaceSayHowWorkersShare(t *testing.T) {
	var out, errb bytes.Buffer
	if err := cmdClasses(nil, &out, &errb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"workers: stateless: an instance per worker, no lock",
		"workers: mergeable: a shard of the state per worker, merged by each field's merge when read",
		"ordered with report=: its reports list each window's heaviest keys",
		"ordered with key=: its keys share one hash table",
		"workers: ordered: one lock",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("classes does not print %q", want)
		}
	}
	out.Reset()
	if err := cmdClasses([]string{"--json"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	var docs []classDoc
	if err := json.Unmarshal(out.Bytes(), &docs); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, d := range docs {
		kinds[d.Name] = d.Concurrency
	}
	for name, want := range map[string]string{"bpf": "stateless", "pktcount": "mergeable", "export": "ordered", "pcap": ""} {
		if kinds[name] != want {
			t.Errorf("classes --json: %s is %q, want %q", name, kinds[name], want)
		}
	}

	out.Reset()
	err := cmdPlace([]string{`[(gen,seed=1)|(gen,seed=2)] > (bpf,"tcp") > [(cms,report=3) | (hll) | n:(cms) > (match,"n.min > 3")]`}, &out, &errb)
	if err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	for _, want := range []string{
		"workers: stateless: an instance per worker, no lock",
		"workers: mergeable: a shard of its state per worker, merged when read",
		"workers: ordered: one lock, because its reports list each window's heaviest keys",
		"workers: ordered: one lock, because match#1 reads its state after each packet",
		"workers: ordered: one lock, because it reads the state of cms#2 after each packet",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("place does not print %q:\n%s", want, out.String())
		}
	}
}
