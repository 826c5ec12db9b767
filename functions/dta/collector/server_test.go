package collector

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ffpf-go/ffpf/functions/dta/wire"
)

func startServer(t *testing.T, cfg ServerConfig) *Server {
	t.Helper()
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// waitFor polls cond until it holds, or fails after a long deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Reports of every primitive over loopback UDP, bad datagrams counted by
// reason, the answers over HTTP.
func TestServer(t *testing.T) {
	s := startServer(t, ServerConfig{Config: Config{
		KeyWrite:     KeyWriteConfig{Slots: 100003, Redundancy: 2},
		Append:       AppendConfig{Lists: 4, Size: 1000},
		KeyIncrement: KeyIncrementConfig{Slots: 100003},
		Postcarding:  PostcardingConfig{Chunks: 10007, Hops: 3},
	}, Sockets: 2, HTTP: "127.0.0.1:0"})
	conn, err := net.DialUDP("udp", nil, s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	send := func(b []byte) {
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	send(payload(wire.Report{Op: wire.KeyWrite, Redundancy: 2, Key: 0x0a000105, Data: 1234}))
	for i := range 20 {
		send(payload(wire.Report{Op: wire.Append, List: 3, Data: uint32(i)}))
	}
	send(payload(wire.Report{Op: wire.KeyIncrement, Redundancy: 2, Key: 9, Counter: 5}))
	send(payload(wire.Report{Op: wire.KeyIncrement, Redundancy: 2, Key: 9, Counter: 6}))
	for h := range 2 {
		send(payload(wire.Report{Op: wire.Postcarding, Key: 77, Hop: uint8(h), Data: uint32(100 + h)}))
	}
	send([]byte{0x01})                                           // short
	send([]byte{0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})             // opcode
	send(make([]byte, 200))                                      // opcode 0, longer than any report
	send(append(payload(wire.Report{Op: wire.Append}), 1, 2, 3)) // trailing
	send(payload(wire.Report{Op: wire.Append, List: 4}))         // list
	const sent = 1 + 20 + 2 + 2 + 5
	waitFor(t, "the reports", func() bool { return s.Stats().Datagrams == sent })
	st := s.Stats()
	if st.Reports["keywrite"] != 1 || st.Reports["append"] != 20 || st.Reports["keyincrement"] != 2 || st.Reports["postcarding"] != 2 {
		t.Errorf("reports %v", st.Reports)
	}
	if st.Dropped["short"] != 1 || st.Dropped["opcode"] != 1 || st.Dropped["trailing"] != 2 || st.Dropped["list"] != 1 || st.Dropped["socket"] != 0 {
		t.Errorf("dropped %v", st.Dropped)
	}

	// Reporters are spread over the sockets, each read on its own
	// goroutine: 32 reporters all on one of two sockets is a chance of 2^-31.
	for i := range 32 {
		c, err := net.DialUDP("udp", nil, s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		c.Write(payload(wire.Report{Op: wire.KeyIncrement, Redundancy: 1, Key: 1000, Counter: uint64(i)}))
		c.Close()
	}
	waitFor(t, "32 reporters' reports", func() bool { return s.Stats().Datagrams == sent+32 })
	for i, r := range s.rx {
		if r.datagrams.Load() == 0 {
			t.Errorf("socket %d received nothing", i)
		}
	}
	if n, _ := s.Collector().KeyIncrement(1000, 1); n != 31*32/2 {
		t.Errorf("the 32 reporters' increments sum to %d", n)
	}

	cl := &Client{Server: s.HTTPAddr().String()}
	ctx := context.Background()
	q := func(p string, kv ...string) *Answer {
		t.Helper()
		v := url.Values{}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		a, err := cl.Query(ctx, p, v)
		if err != nil {
			t.Fatalf("%s %v: %v", p, kv, err)
		}
		return a
	}
	if a := q("keywrite", "key", "10.0.1.5"); a.Status != "found" || a.Value == nil || *a.Value != 1234 {
		t.Errorf("keywrite: %+v", a)
	}
	if a := q("keywrite", "key", "0x0a000106"); a.Status != "not found" || a.Value != nil {
		t.Errorf("keywrite of a key never written: %+v", a)
	}
	if a := q("keyincrement", "key", "9"); a.Value == nil || *a.Value != 11 {
		t.Errorf("keyincrement: %+v", a)
	}
	if a := q("postcarding", "key", "77"); a.Status != "found" || len(a.Hops) != 2 || *a.Hops[0] != 100 || *a.Hops[1] != 101 {
		t.Errorf("postcarding: %+v", a)
	}
	if a := q("append", "list", "3", "n", "5"); a.Total != 20 || len(a.Entries) != 5 || a.Entries[0] != 15 || a.Entries[4] != 19 {
		t.Errorf("append: %+v", a)
	}
	if a := q("append", "list", "3", "from", "2", "n", "3"); len(a.Entries) != 3 || a.Entries[0] != 2 || a.Next != 5 {
		t.Errorf("append from 2: %+v", a)
	}
	for _, bad := range []url.Values{{"key": {"x"}}, {}, {"key": {"1"}, "redundancy": {"9"}}} {
		if _, err := cl.Query(ctx, "keywrite", bad); err == nil || err.(*QueryError).Code != 400 {
			t.Errorf("keywrite %v: %v", bad, err)
		}
	}
	if _, err := cl.Query(ctx, "nothing", nil); err == nil || err.(*QueryError).Code != 404 {
		t.Errorf("an unknown primitive: %v", err)
	}

	// /metrics only with ServerConfig.Metrics (package metrics tests it).
	resp, err := http.Get("http://" + s.HTTPAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/metrics without ServerConfig.Metrics: %s", resp.Status)
	}
}

// A flood beyond what the collector reads is counted, not lost silently:
// every datagram sent was either received or dropped by the socket.
func TestServerFloodCounted(t *testing.T) {
	hold := make(chan struct{})
	s := startServer(t, ServerConfig{Config: Config{Append: AppendConfig{Lists: 1, Size: 1 << 16}},
		Sockets: 1, RcvBuf: 4096, hold: hold})
	conn, err := net.DialUDP("udp", nil, s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const sent = 5000
	for i := range sent {
		if _, err := conn.Write(payload(wire.Report{Op: wire.Append, Data: uint32(i)})); err != nil {
			t.Fatal(err)
		}
	}
	close(hold)
	waitFor(t, "every datagram received or dropped", func() bool {
		st := s.Stats()
		return st.Datagrams+st.Dropped["socket"] == sent
	})
	st := s.Stats()
	t.Logf("%d received, %d dropped by the socket", st.Datagrams, st.Dropped["socket"])
	if st.Dropped["socket"] == 0 || st.Reports["append"] != st.Datagrams {
		t.Errorf("stats %+v", st)
	}
	// The entries that got through are in order.
	e, _, _, _ := s.Collector().AppendRead(0, 0, sent, nil)
	for i := 1; i < len(e); i++ {
		if e[i] <= e[i-1] {
			t.Fatalf("entry %d after %d", e[i], e[i-1])
		}
	}
	s.Close()
	if got := s.Stats().Dropped["socket"]; got != st.Dropped["socket"] {
		t.Errorf("after Close: %d socket drops, before %d", got, st.Dropped["socket"])
	}
}

// A second collector on a port a collector holds is refused: with
// SO_REUSEPORT alone the kernel would split the reports between the two,
// each answering queries from half of them.
func TestServerPortTaken(t *testing.T) {
	cfg := ServerConfig{Config: Config{KeyWrite: KeyWriteConfig{Slots: 1021, Redundancy: 2}}, Sockets: 2}
	s := startServer(t, cfg)
	cfg.Listen = s.Addr().String()
	if s2, err := NewServer(cfg); err == nil {
		s2.Close()
		t.Fatalf("a second collector listens on %s", cfg.Listen)
	} else if !strings.Contains(err.Error(), "in use") {
		t.Errorf("error %q does not say the address is in use", err)
	}
}
