package daemon

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ffpf-go/ffpf/bridges/shm"
	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/flowgraph/daemon/client"
	_ "github.com/ffpf-go/ffpf/functions/builtin"
	"github.com/ffpf-go/ffpf/functions/gen"
)

// startDaemon serves a daemon of userspace alone on a socket in a
// directory of the test's, until the test ends.
func startDaemon(t testing.TB, cfg Config) *Daemon {
	t.Helper()
	dir := t.TempDir()
	if cfg.Socket == "" {
		cfg.Socket = filepath.Join(dir, "ffpf.sock")
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Serve() }()
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return d
}

func dial(t testing.TB, d *Daemon) *client.Client {
	t.Helper()
	c, err := client.Dial(d.Socket())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// trace writes a capture file of n generated packets.
func trace(t testing.TB, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "t.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := gen.WritePcap(f, gen.Config{Packets: int64(n), Seed: 1}, 65535); err != nil {
		t.Fatal(err)
	}
	return path
}

func fnByClass(fs []client.Function, class string) []client.Function {
	var out []client.Function
	for _, f := range fs {
		if f.Class == class {
			out = append(out, f)
		}
	}
	return out
}

// waitEnded waits until request id has ended.
func waitEnded(t testing.TB, c *client.Client, id string) *client.Stat {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := c.Stat(id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Request.State != "active" {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not end", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSharedWithinFlowgroup: two clients of one flowgroup submitting the
// same expression share every function (one bpf, counted by both), which
// stays while either request does and goes with the last.
func TestSharedWithinFlowgroup(t *testing.T) {
	d := startDaemon(t, Config{})
	a, b := dial(t, d), dial(t, d)
	expr := `(gen,packets=0) > (bpf,"tcp") > (pktcount)`
	ra, err := a.Submit(client.SubmitArgs{Expr: expr})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := b.Submit(client.SubmitArgs{Expr: expr})
	if err != nil {
		t.Fatal(err)
	}
	l, err := a.List()
	if err != nil {
		t.Fatal(err)
	}
	bpfs := fnByClass(l.Functions, "bpf")
	if len(bpfs) != 1 || bpfs[0].Refs != 2 {
		t.Fatalf("bpf functions %+v, want one shared by 2 requests", bpfs)
	}
	if len(l.Requests) != 2 || !strings.Contains(strings.Join(l.Requests[1].Functions, " "), bpfs[0].ID) {
		t.Fatalf("requests %+v do not both have %s", l.Requests, bpfs[0].ID)
	}
	if err := a.Remove(ra.ID); err != nil {
		t.Fatal(err)
	}
	l, _ = b.List()
	if bpfs := fnByClass(l.Functions, "bpf"); len(bpfs) != 1 || bpfs[0].Refs != 1 {
		t.Fatalf("after removing one request: bpf functions %+v, want one with 1 reference", bpfs)
	}
	// It keeps counting for the request that is left.
	st1, _ := b.Stat(rb.ID)
	time.Sleep(20 * time.Millisecond)
	st2, _ := b.Stat(rb.ID)
	if f1, f2 := fnByClass(st1.Functions, "bpf"), fnByClass(st2.Functions, "bpf"); f2[0].In <= f1[0].In {
		t.Errorf("the shared bpf stopped counting: in %d then %d", f1[0].In, f2[0].In)
	}
	if err := b.Remove(rb.ID); err != nil {
		t.Fatal(err)
	}
	if fs := d.rt.Functions(); len(fs) != 0 {
		t.Errorf("%d functions left after the last request went: %v", len(fs), fs[0].ID)
	}
}

// TestFlowgroupsSeparate: requests of different flowgroups share no
// function, and one is invisible to the other: ls does not list it, and
// stat, call, read and rm answer as for an id that does not exist. Root
// sees both.
func TestFlowgroupsSeparate(t *testing.T) {
	d := startDaemon(t, Config{})
	alice := &identity{cred: flowgraph.Credentials{UID: 1000, GID: 1000, PID: 1}, group: "uid:1000", conn: &conn{d: d}}
	bob := &identity{cred: flowgraph.Credentials{UID: 1001, GID: 1001, PID: 2}, group: "uid:1001", conn: &conn{d: d}}
	root := &identity{cred: flowgraph.Credentials{}, group: "uid:0", root: true, conn: &conn{d: d}}
	expr := `(gen,packets=0) > (bpf,"tcp") > (pktcount)`
	do := func(who *identity, op string, args any) (any, error) {
		raw, _ := json.Marshal(args)
		res, fds, err := d.dispatch(op, raw, who)
		closeFDs(fds)
		return res, err
	}
	ra, err := do(alice, "submit", client.SubmitArgs{Expr: expr, Keep: true})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := do(bob, "submit", client.SubmitArgs{Expr: expr, Keep: true})
	if err != nil {
		t.Fatal(err)
	}
	aliceID, bobID := ra.(*client.Request).ID, rb.(*client.Request).ID
	if fs := fnByClass(d.functionsOf(d.visibleTo(root)), "bpf"); len(fs) != 2 || fs[0].Refs != 1 || fs[1].Refs != 1 {
		t.Fatalf("bpf functions of two flowgroups %+v: want two, unshared", fs)
	}
	l, _ := do(alice, "ls", nil)
	if rs := l.(*client.List).Requests; len(rs) != 1 || rs[0].ID != aliceID {
		t.Errorf("alice lists %+v", rs)
	}
	for _, f := range l.(*client.List).Functions {
		if f.Refs != 1 {
			t.Errorf("alice sees %s shared %d times", f.ID, f.Refs)
		}
	}
	missing := func(op string, args any) {
		t.Helper()
		_, err := do(alice, op, args)
		_, err2 := do(alice, op, replaceID(args, "rnothere"))
		if !client.IsNotFound(err) || !client.IsNotFound(err2) {
			t.Errorf("%s of bob's request by alice: %v; of no request: %v; want both not_found", op, err, err2)
		} else if strings.Replace(err.Error(), bobID, "rnothere", 1) != err2.Error() {
			t.Errorf("%s tells bob's request apart from none: %q and %q", op, err, err2)
		}
	}
	missing("stat", client.IDArgs{ID: bobID})
	missing("call", client.CallArgs{ID: bobID, Function: "pktcount#2", Handler: "reset"})
	missing("read", client.ReadArgs{ID: bobID})
	missing("rm", client.IDArgs{ID: bobID})
	// bob's handler, named by id, through alice's own request: absent too.
	if _, err := do(alice, "call", client.CallArgs{ID: aliceID, Function: "pktcount#2", Handler: "reset"}); !client.IsNotFound(err) {
		t.Errorf("alice calls bob's function through her request: %v, want not_found", err)
	}
	l, _ = do(root, "ls", nil)
	if rs := l.(*client.List).Requests; len(rs) != 2 || !l.(*client.List).All {
		t.Errorf("root lists %d requests, want both", len(rs))
	}
	if _, err := do(root, "rm", client.IDArgs{ID: bobID}); err != nil {
		t.Errorf("root removes bob's request: %v", err)
	}
	if _, err := do(alice, "rm", client.IDArgs{ID: aliceID}); err != nil {
		t.Error(err)
	}
}

func replaceID(args any, id string) any {
	switch a := args.(type) {
	case client.IDArgs:
		a.ID = id
		return a
	case client.CallArgs:
		a.ID = id
		return a
	case client.ReadArgs:
		a.ID = id
		return a
	}
	panic("args")
}

// TestBadInput: malformed, oversized, unknown and truncated messages get a
// clear error (or, cut off, nothing), and the daemon serves on.
func TestBadInput(t *testing.T) {
	d := startDaemon(t, Config{})
	raw := func(t *testing.T, msg string) client.Reply {
		t.Helper()
		c, err := net.Dial("unix", d.Socket())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReaderSize(c, 1<<20).ReadBytes('\n')
		if err != nil {
			t.Fatalf("no answer to %.40q: %v", msg, err)
		}
		var r client.Reply
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("answer %q: %v", line, err)
		}
		return r
	}
	for _, tc := range []struct{ name, msg, code, says string }{
		{"not json", "hello\n", client.CodeMalformed, "JSON object"},
		{"not an object", "[1,2]\n", client.CodeMalformed, "JSON object"},
		{"oversized", `{"v":1,"op":"ls","args":{"x":"` + strings.Repeat("a", client.MaxMessage) + "\"}}\n", client.CodeTooLarge, "at most"},
		{"version", `{"v":99,"op":"ls"}` + "\n", client.CodeVersion, "version 99"},
		{"no version", `{"op":"ls"}` + "\n", client.CodeVersion, "version 0"},
		{"unknown op", `{"v":1,"op":"destroy"}` + "\n", client.CodeUnknownOp, `"destroy"`},
		{"unknown argument", `{"v":1,"op":"stat","args":{"id":"r1","verbose":true}}` + "\n", client.CodeMalformed, "verbose"},
		{"bad argument type", `{"v":1,"op":"stat","args":{"id":7}}` + "\n", client.CodeMalformed, "string"},
		{"unknown id", `{"v":1,"op":"stat","args":{"id":"rffffff"}}` + "\n", client.CodeNotFound, "no request rffffff"},
		{"syntax error", `{"v":1,"op":"submit","args":{"expr":"(bpf"}}` + "\n", client.CodeInvalid, "1:"},
		{"filter libpcap refuses", `{"v":1,"op":"submit","args":{"expr":"(gen) > (bpf,\"tcp and bogus\")"}}` + "\n", client.CodeInvalid, "bogus"},
		{"relative file", `{"v":1,"op":"submit","args":{"expr":"(bpf,\"tcp\")","file":"t.pcap"}}` + "\n", client.CodeInvalid, "absolute"},
		{"stdin", `{"v":1,"op":"submit","args":{"expr":"(pcap,file=-) > (pktcount)"}}` + "\n", client.CodeInvalid, "standard input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := raw(t, tc.msg)
			if r.OK || r.Code != tc.code || !strings.Contains(r.Error, tc.says) {
				t.Errorf("answer %+v, want code %s saying %q", r, tc.code, tc.says)
			}
			if strings.Contains(r.Error, "goroutine") || strings.Count(r.Error, "\n") > 2 {
				t.Errorf("not one clear sentence: %q", r.Error)
			}
		})
	}
	// A message cut off by a disconnect, and one that never ends.
	for _, msg := range []string{`{"v":1,"op":"submit","args":{"expr":"(gen) > (pkt`, strings.Repeat("x", 3<<20)} {
		c, err := net.Dial("unix", d.Socket())
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte(msg))
		c.Close()
	}
	// The daemon serves on, and took nothing of the above.
	c := dial(t, d)
	if l, err := c.List(); err != nil || len(l.Requests) != 0 || len(d.rt.Functions()) != 0 {
		t.Fatalf("after the bad input: %v, %+v, %d functions", err, l, len(d.rt.Functions()))
	}
	// After an oversized message the same connection goes on.
	conn, _ := net.Dial("unix", d.Socket())
	defer conn.Close()
	conn.Write([]byte(strings.Repeat("y", client.MaxMessage+10) + "\n" + `{"v":1,"id":2,"op":"ls"}` + "\n"))
	br := bufio.NewReader(conn)
	for i, want := range []string{client.CodeTooLarge, ""} {
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		var r client.Reply
		json.Unmarshal(line, &r)
		if r.Code != want || (want == "" && (!r.OK || r.ID != 2)) {
			t.Errorf("answer %d on the connection: %s", i, line)
		}
	}
}

// TestFloodOfSubmits: a flowgroup that submits without end is refused past
// MaxRequests with a clear error, and others are served meanwhile.
func TestFloodOfSubmits(t *testing.T) {
	d := startDaemon(t, Config{})
	c := dial(t, d)
	path := trace(t, 10)
	var err error
	n := 0
	for ; n <= MaxRequests; n++ {
		if _, err = c.Submit(client.SubmitArgs{Expr: fmt.Sprintf(`(bpf,"port %d") > (pktcount)`, n), File: path}); err != nil {
			break
		}
	}
	var ce *client.Error
	if n != MaxRequests || !errors.As(err, &ce) || ce.Code != client.CodeDenied || !strings.Contains(err.Error(), "remove some first") {
		t.Fatalf("after %d submits: %v; want %d and a denial", n, err, MaxRequests)
	}
	if l, err := dial(t, d).List(); err != nil || len(l.Requests) != MaxRequests {
		t.Fatalf("ls during the flood: %v", err)
	}
}

// TestNoLeaks: 1,000 submits and removals leave no function, descriptor,
// goroutine or memory behind.
func TestNoLeaks(t *testing.T) {
	d := startDaemon(t, Config{})
	c := dial(t, d)
	path := trace(t, 100)
	cycle := func(i int) {
		r, err := c.Submit(client.SubmitArgs{Expr: fmt.Sprintf(`(bpf,"tcp or port %d") > [(pktcount)|(bytecount)]`, i%7), File: path})
		if err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 { // a reader too, now and then
			rd, err := c.Read(r.ID)
			if err != nil {
				t.Fatal(err)
			}
			rd.Close()
		}
		if err := c.Remove(r.ID); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 50 { // warm up: pools, caches
		cycle(i)
	}
	fds0, g0, heap0 := resources(t)
	const cycles = 1000
	for i := range cycles {
		cycle(i)
	}
	fds1, g1, heap1 := resources(t)
	if p := os.Getenv("FFPF_HEAPPROFILE"); p != "" {
		f, _ := os.Create(p)
		pprof.WriteHeapProfile(f)
		f.Close()
	}
	t.Logf("after %d cycles: fds %d → %d, goroutines %d → %d, heap %d → %d KB", cycles, fds0, fds1, g0, g1, heap0>>10, heap1>>10)
	if n := len(d.rt.Functions()); n != 0 {
		t.Errorf("%d functions left", n)
	}
	if n := len(d.rt.Requests()); n != 0 {
		t.Errorf("%d flowgraph requests left", n)
	}
	if fds1 > fds0+2 {
		t.Errorf("descriptors grew from %d to %d", fds0, fds1)
	}
	if g1 > g0+5 {
		t.Errorf("goroutines grew from %d to %d", g0, g1)
	}
	// A leak of one PBuf or MBuf per cycle would be megabytes.
	if heap1 > heap0+4<<20 {
		t.Errorf("the heap grew from %d to %d KB", heap0>>10, heap1>>10)
	}
}

func resources(t testing.TB) (fds, goroutines int, heap uint64) {
	t.Helper()
	var ms runtime.MemStats
	for range 3 {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
	runtime.ReadMemStats(&ms)
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents), runtime.NumGoroutine(), ms.HeapAlloc
}

// TestLifetime: a request of a Go client lives with its connection unless
// kept; a kept one outlives it, and one whose sources ended stays listed,
// ended, with its final state.
func TestLifetime(t *testing.T) {
	d := startDaemon(t, Config{})
	path := trace(t, 1000)
	a := dial(t, d)
	tmp, err := a.Submit(client.SubmitArgs{Expr: `(gen,packets=0) > (pktcount)`})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := a.Submit(client.SubmitArgs{Expr: `(bpf,"tcp") > (pktcount)`, File: path, Keep: true})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	b := dial(t, d)
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := b.List()
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Requests) == 1 {
			if l.Requests[0].ID != kept.ID {
				t.Fatalf("left: %+v, want %s", l.Requests, kept.ID)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s outlived its connection", tmp.ID)
		}
		time.Sleep(5 * time.Millisecond)
	}
	st := waitEnded(t, b, kept.ID)
	if st.Request.State != "ended" || st.Packets != 1000 {
		t.Fatalf("%+v", st.Request)
	}
	// Ended, it stays, its state final.
	time.Sleep(20 * time.Millisecond)
	st2, err := b.Stat(kept.ID)
	if err != nil {
		t.Fatal(err)
	}
	p1, p2 := fnByClass(st.Functions, "pktcount")[0], fnByClass(st2.Functions, "pktcount")[0]
	if p1.State["packets"] != p2.State["packets"] || p1.In == 0 {
		t.Errorf("the final state changed or is empty: %v then %v", p1.State, p2.State)
	}
}

// TestSlowReaderLosesOnlyItsOwn: two applications read one request; the
// one that does not read loses packets, counted (in = out + dropped), and
// the one whose ring has room gets every packet, in time order. The
// packets come through a FIFO, written once both readers are attached.
func TestSlowReaderLosesOnlyItsOwn(t *testing.T) {
	d := startDaemon(t, Config{})
	c := dial(t, d)
	src := trace(t, 30000)
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	go0 := make(chan struct{})
	wrote := make(chan error, 1)
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0) // until the daemon opens it
		if err != nil {
			wrote <- err
			return
		}
		defer w.Close()
		b, err := os.ReadFile(src)
		if err != nil {
			wrote <- err
			return
		}
		// The file's header at once (the source reads it when it opens),
		// its packets once both readers are there.
		if _, err := w.Write(b[:24]); err != nil {
			wrote <- err
			return
		}
		<-go0
		_, err = w.Write(b[24:])
		wrote <- err
	}()
	r, err := c.Submit(client.SubmitArgs{Expr: `(bpf,"udp")`, File: fifo})
	if err != nil {
		t.Fatal(err)
	}
	slow, err := dial(t, d).ReadWith(client.ReadArgs{ID: r.ID, Cells: 2})
	if err != nil {
		t.Fatal(err)
	}
	_ = slow
	// Room for every packet: the test reads only once they are all in.
	fast, err := c.ReadWith(client.ReadArgs{ID: r.ID, Cells: 1024, Window: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	close(go0)
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	st := waitEnded(t, c, r.ID)
	got, last := uint64(0), int64(0)
	for {
		cell, err := fast.Next(0)
		if errors.Is(err, shm.ErrTimeout) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := range int(cell.N) {
			if cell.D[i].TS < last {
				t.Fatalf("packet %d out of time order", got)
			}
			last = cell.D[i].TS
			if _, ok := cell.Packet(i); !ok {
				t.Fatal("a descriptor outside its window")
			}
		}
		got += uint64(cell.N)
		if cell.Dropped != 0 {
			t.Errorf("the reader with room lost %d packets", cell.Dropped)
		}
		fast.Release()
	}
	st, _ = c.Stat(r.ID)
	tap := fnByClass(st.Functions, "tap")[0]
	sl, fa := st.Readers[0], st.Readers[1]
	for _, rd := range st.Readers {
		if rd.In != rd.Out+rd.Dropped || rd.In != tap.In {
			t.Errorf("reader %d: in %d, out %d, dropped %d; the tap had %d", rd.Reader, rd.In, rd.Out, rd.Dropped, tap.In)
		}
	}
	if tap.In < 5000 || fa.Dropped != 0 || fa.Out != got || got != tap.In {
		t.Errorf("the reader with room: %+v, got %d of the tap's %d", fa, got, tap.In)
	}
	if sl.Dropped == 0 || sl.Out > 2*256 {
		t.Errorf("the reader that does not read: %+v; want its 2 cells filled and the rest dropped", sl)
	}
	t.Logf("tap in %d; reader with room %+v; idle reader %+v", tap.In, fa, sl)
}
