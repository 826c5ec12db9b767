package server

import (
	"testing"

	p4 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/ffpf-go/ffpf/flowspaces/p4/pisa"
	"github.com/ffpf-go/ffpf/flowspaces/p4/server/p4infotest"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// FuzzWrite applies arbitrary write requests (protobuf bytes) to a
// switch running p4infotest.Switch: no update may crash the server (a
// recovered panic would be INTERNAL), and the switch forwards packets
// after them.
func FuzzWrite(f *testing.F) {
	prog := p4infotest.Switch()
	info := p4infotest.P4Info(prog)
	for _, c := range malformed(ids{info}) {
		b, _ := proto.Marshal(&p4.WriteRequest{Updates: []*p4.Update{c.u}})
		f.Add(b)
	}
	dc, err := p4gen.EncodeJSON(prog)
	if err != nil {
		f.Fatal(err)
	}
	frames := [][]byte{udp([4]byte{10, 0, 0, 2}, 1000, 53), udp([4]byte{10, 0, 0, 7}, 7, 55), udp([4]byte{10, 0, 0, 3}, 7, 1)}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req p4.WriteRequest
		if proto.Unmarshal(data, &req) != nil {
			return
		}
		dev := pisa.NewDevice(255, nil, 0)
		s := New(dev, Options{DeviceID: 1, Profile: p4gen.Tofino1()})
		defer s.Close()
		pl, err := newPipeline(info, dc, s.prof)
		if err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		s.commit(pl)
		for i, u := range req.GetUpdates() {
			if err := s.update(pl, u); status.Code(err) == codes.Internal {
				t.Fatalf("update %d (%v): %v", i, u, err)
			}
		}
		for _, e := range req.GetUpdates() {
			if en := e.GetEntity(); en != nil {
				if _, err := s.read(pl, en); status.Code(err) == codes.Internal {
					t.Fatalf("read back %v: %v", en, err)
				}
			}
		}
		s.mu.Unlock()
		for i, fr := range frames {
			dev.Receive(1, fr, uint64(i))
		}
		if st := dev.Stats(); st.Errors != 0 {
			t.Fatalf("the switch failed on packets after the writes: %+v", st)
		}
	})
}
