package daemon

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/flowgraph/daemon/client"
)

// BenchmarkSubmitToActive: the time from a client's submit to its reply,
// sent once the request's functions run in the datapath (a userspace
// request read from a file), against populating and instantiating the
// same request on a flowgraph directly (no socket, no daemon) in the same
// run. Each request is removed after (untimed).
func BenchmarkSubmitToActive(b *testing.B) {
	path := trace(b, 100)
	expr := func(i int) string { return fmt.Sprintf(`(bpf,"tcp or port %d") > [(pktcount)|(bytecount)]`, i%1000) }
	b.Run("daemon", func(b *testing.B) {
		d := startDaemon(b, Config{})
		c := dial(b, d)
		var server time.Duration
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			r, err := c.Submit(client.SubmitArgs{Expr: expr(i), File: path})
			if err != nil {
				b.Fatal(err)
			}
			server += time.Duration(r.ActiveNS)
			b.StopTimer()
			if err := c.Remove(r.ID); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/submit")
		b.ReportMetric(float64(server.Microseconds())/1000/float64(b.N), "ms-in-daemon/submit")
	})
	b.Run("runtime", func(b *testing.B) {
		rt := flowgraph.New(flowgraph.Config{})
		defer rt.Close()
		active := false
		src := `(pcap,file="` + path + `")`
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			req, err := rt.Populate(expr(i), flowgraph.RequestOptions{DefaultSource: src})
			if err != nil {
				b.Fatal(err)
			}
			if err := rt.Instantiate(); err != nil {
				b.Fatal(err)
			}
			if !active {
				rt.Activate(context.Background())
				active = true
			}
			b.StopTimer()
			rt.Remove(req)
			b.StartTimer()
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/submit")
	})
}

// BenchmarkScrape: /metrics of a daemon holding 250 requests of four
// functions each (1,001 functions with their shared source), over HTTP
// and as the registry gathers and writes it in the text format, against
// reading the same functions' counters and state alone
// (Runtime.Functions), in the same run.
func BenchmarkScrape(b *testing.B) {
	d := startDaemon(b, Config{HTTP: "127.0.0.1:0"})
	c := dial(b, d)
	path := trace(b, 1000)
	for i := range 250 {
		if _, err := c.Submit(client.SubmitArgs{Expr: fmt.Sprintf(`(bpf,"port %d") > [(pktcount)|(bytecount)]`, i), File: path}); err != nil {
			b.Fatal(err)
		}
	}
	if n := len(d.rt.Functions()); n != 1001 {
		b.Fatalf("%d functions, want 1,001", n)
	}
	b.Run("http", func(b *testing.B) {
		url := "http://" + d.HTTPAddr() + "/metrics"
		var size int
		for i := 0; i < b.N; i++ {
			resp, err := http.Get(url)
			if err != nil {
				b.Fatal(err)
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			size = int(n)
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/scrape")
		b.ReportMetric(float64(size), "bytes/scrape")
	})
	b.Run("exposition", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			mfs, err := d.metrics.Gather()
			if err != nil {
				b.Fatal(err)
			}
			enc := expfmt.NewEncoder(io.Discard, expfmt.NewFormat(expfmt.TypeTextPlain))
			for _, mf := range mfs {
				if err := enc.Encode(mf); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/scrape")
	})
	b.Run("state", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			d.rt.Functions()
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/scrape")
	})
}
