package daemon

import (
	"crypto/subtle"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ffpf-go/ffpf/flowgraph"
	"github.com/ffpf-go/ffpf/flowgraph/daemon/client"
)

//go:embed web
var webFiles embed.FS

// httpServer is the daemon's HTTP side.
type httpServer struct {
	d        *Daemon
	ln       net.Listener
	srv      *http.Server
	loopback bool
}

// nobody is whom a request made over HTTP acts as when it opens files:
// it may read what everyone may read, and write nothing that is not
// everyone's to write.
var nobody = flowgraph.Credentials{UID: 65534, GID: 65534}

// writeOps change the flowgraph: over HTTP they need the token.
var writeOps = map[string]bool{"submit": true, "rm": true, "call": true}

func (d *Daemon) newHTTP(addr string) (*httpServer, error) {
	// Loopback unless told otherwise: ":9090" is 127.0.0.1:9090 (and
	// "0.0.0.0:9090" every address).
	if host, port, err := net.SplitHostPort(addr); err == nil && host == "" {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--http %s: %v", addr, err)
	}
	h := &httpServer{d: d, ln: ln}
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && ta.IP.IsLoopback() {
		h.loopback = true
	} else {
		fmt.Fprintf(d.cfg.Log, "ffpf: the HTTP API listens on %s, beyond this machine's loopback\n", ln.Addr())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", page("index.html", "text/html; charset=utf-8"))
	mux.HandleFunc("GET /app.js", page("app.js", "text/javascript; charset=utf-8"))
	mux.HandleFunc("GET /style.css", page("style.css", "text/css; charset=utf-8"))
	mux.Handle("GET /metrics", d.serveMetrics())
	mux.HandleFunc("GET /api/v1/events", h.events)
	mux.HandleFunc("GET /api/v1/{op}", h.api)
	mux.HandleFunc("POST /api/v1/{op}", h.api)
	h.srv = &http.Server{Handler: h.guard(mux), ReadHeaderTimeout: 10 * time.Second}
	return h, nil
}

// page serves one file of the page, embedded in the binary. (Not with
// http.FileServer: its table of media types would be built at every ffpf
// process's start-up.)
func page(name, typ string) http.HandlerFunc {
	b, err := webFiles.ReadFile("web/" + name)
	if err != nil {
		panic(err) // embedded: cannot be missing
	}
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", typ)
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(b)
	}
}

func (h *httpServer) serve() { h.srv.Serve(h.ln) }

func (h *httpServer) close() { h.srv.Close() }

// guard refuses, on a loopback listener, a request whose Host names
// another machine: a page elsewhere that a browser was made to resolve to
// this one (DNS rebinding) reads nothing.
func (h *httpServer) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.loopback {
			host := r.Host
			if hh, _, err := net.SplitHostPort(host); err == nil {
				host = hh
			}
			ip := net.ParseIP(strings.Trim(host, "[]"))
			if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
				http.Error(w, "this daemon answers requests for localhost only", http.StatusMisdirectedRequest)
				return
			}
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
}

// identity is who an HTTP request acts as: the web flowgroup, with write
// access when it presents the token.
func (h *httpServer) identity(r *http.Request) *identity {
	who := &identity{cred: nobody, group: webGroup}
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if h.d.cfg.Token != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(h.d.cfg.Token)) == 1 {
		who.write = true
	}
	return who
}

// api runs an operation: POST with its arguments as the body, or GET with
// them as query parameters (the read-only ones).
func (h *httpServer) api(w http.ResponseWriter, r *http.Request) {
	op := r.PathValue("op")
	who := h.identity(r)
	rep := &client.Reply{V: client.Version}
	var raw json.RawMessage
	if r.Method == http.MethodPost {
		b, err := io.ReadAll(io.LimitReader(r.Body, client.MaxMessage+1))
		switch {
		case err != nil:
			rep.Code, rep.Error = client.CodeMalformed, err.Error()
		case len(b) > client.MaxMessage:
			rep.Code, rep.Error = client.CodeTooLarge, fmt.Sprintf("a body is at most %d bytes", client.MaxMessage)
		}
		raw = b
	} else {
		if writeOps[op] {
			rep.Code, rep.Error = client.CodeInvalid, op+" is a POST"
		}
		raw = queryArgs(r.URL.Query())
	}
	if rep.Code == "" && writeOps[op] && !who.write {
		rep.Code = client.CodeDenied
		rep.Error = "writing over HTTP needs the token given to the daemon with --http-token (Authorization: Bearer TOKEN)"
		if h.d.cfg.Token == "" {
			rep.Error = "this daemon's HTTP API is read-only: it was started without --http-token"
		}
	}
	if rep.Code == "" {
		res, fds, err := h.d.dispatch(op, raw, who)
		closeFDs(fds)
		rep = result(rep, res, err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(statusOf(rep))
	json.NewEncoder(w).Encode(rep)
}

// queryArgs makes an operation's arguments of query parameters (all
// strings).
func queryArgs(q url.Values) json.RawMessage {
	m := map[string]string{}
	for k := range q {
		m[k] = q.Get(k)
	}
	b, _ := json.Marshal(m)
	return b
}

func statusOf(rep *client.Reply) int {
	switch rep.Code {
	case "":
		return http.StatusOK
	case client.CodeNotFound, client.CodeUnknownOp:
		return http.StatusNotFound
	case client.CodeDenied:
		return http.StatusForbidden
	case client.CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case client.CodeFailed:
		return http.StatusInternalServerError
	}
	return http.StatusBadRequest
}

// events streams a request's stat (?id=) as server-sent events, twice a
// second, until the page goes away or the request does.
func (h *httpServer) events(w http.ResponseWriter, r *http.Request) {
	who := h.identity(r)
	req, err := h.d.lookup(r.URL.Query().Get("id"), who)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "no streaming here", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		h.d.ctl.Lock()
		var st *client.Stat
		if h.d.present(req) {
			st = h.d.stat(req)
		}
		h.d.ctl.Unlock()
		if st == nil {
			fmt.Fprint(w, "event: gone\ndata: {}\n\n")
			fl.Flush()
			return
		}
		b, _ := json.Marshal(st)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return
		}
		fl.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-h.d.ctx.Done():
			return
		case <-tick.C:
		}
	}
}
