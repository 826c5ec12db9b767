package collector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Answer is a query's answer as the HTTP endpoint gives it, for every
// primitive (the fields of the others are left out).
type Answer struct {
	Primitive string `json:"primitive"`
	Key       string `json:"key,omitempty"` // 0x-hexadecimal
	Status    string `json:"status"`        // found, not found, collision
	// Value is Key-Write's value or Key-Increment's count.
	Value *uint64 `json:"value,omitempty"`
	// Hops is Postcarding's path, null for a hop not collected.
	Hops    []*uint32 `json:"hops,omitempty"`
	Votes   int       `json:"votes,omitempty"`
	Matches int       `json:"matches,omitempty"`
	Slots   int       `json:"slots,omitempty"`
	// Append: the list, its entries oldest first, how many it was ever
	// given, the position after the entries (to read on from) and the
	// entries overwritten before they could be read.
	List    *uint32  `json:"list,omitempty"`
	Entries []uint32 `json:"entries,omitempty"`
	Total   uint64   `json:"total,omitempty"`
	Next    uint64   `json:"next,omitempty"`
	Lost    uint64   `json:"lost,omitempty"`
}

// ParseKey reads a 32-bit key: 0x-hexadecimal, decimal, or an IPv4
// address in dotted form (10.0.1.5 is 0x0a000105).
func ParseKey(s string) (uint32, error) {
	if strings.Count(s, ".") == 3 {
		ip := net.ParseIP(s).To4()
		if ip == nil {
			return 0, fmt.Errorf("%q is not an IPv4 address", s)
		}
		return uint32(ip[0])<<24 | uint32(ip[1])<<16 | uint32(ip[2])<<8 | uint32(ip[3]), nil
	}
	n, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not a 32-bit key (0x0a000105, 167772421 or 10.0.1.5)", s)
	}
	return uint32(n), nil
}

type httpError struct {
	code int
	err  error
}

func (e *httpError) Error() string { return e.err.Error() }

func badRequest(format string, args ...any) error {
	return &httpError{http.StatusBadRequest, fmt.Errorf(format, args...)}
}

// Query answers a query named as the HTTP endpoint names them:
// primitive keywrite, keyincrement or postcarding with "key" (and
// "redundancy", "consensus"), or append with "list" (and "n", the last n
// entries, or "from", the entries from that position on, at most n).
func (c *Collector) Query(primitive string, q url.Values) (*Answer, error) {
	intArg := func(name string, def, lo, hi int) (int, error) {
		s := q.Get(name)
		if s == "" {
			return def, nil
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < lo || n > hi {
			return 0, badRequest("%s=%q: a number from %d to %d", name, s, lo, hi)
		}
		return n, nil
	}
	key := func() (uint32, error) {
		if !q.Has("key") {
			return 0, badRequest("%s needs key=", primitive)
		}
		k, err := ParseKey(q.Get("key"))
		if err != nil {
			return 0, badRequest("%v", err)
		}
		return k, nil
	}
	a := &Answer{Primitive: primitive}
	switch primitive {
	case "keywrite":
		k, err := key()
		if err != nil {
			return nil, err
		}
		n, err := intArg("redundancy", 0, 1, MaxRedundancy)
		if err != nil {
			return nil, err
		}
		cons, err := intArg("consensus", 0, 1, MaxRedundancy)
		if err != nil {
			return nil, err
		}
		r, err := c.KeyWrite(k, n, cons)
		if err != nil {
			return nil, err
		}
		a.Key, a.Status, a.Votes, a.Matches, a.Slots = fmt.Sprintf("%#08x", k), r.Status.String(), r.Votes, r.Matches, r.Slots
		if r.Status == Found {
			v := uint64(r.Value)
			a.Value = &v
		}
	case "keyincrement":
		k, err := key()
		if err != nil {
			return nil, err
		}
		n, err := intArg("redundancy", 0, 1, MaxRedundancy)
		if err != nil {
			return nil, err
		}
		v, err := c.KeyIncrement(k, n)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			n = c.cfg.KeyIncrement.Redundancy
		}
		a.Key, a.Status, a.Value, a.Slots = fmt.Sprintf("%#08x", k), Found.String(), &v, n
	case "postcarding":
		k, err := key()
		if err != nil {
			return nil, err
		}
		r, err := c.Postcard(k)
		if err != nil {
			return nil, err
		}
		a.Key, a.Status, a.Votes, a.Slots = fmt.Sprintf("%#08x", k), r.Status.String(), r.Votes, r.Slots
		for _, h := range r.Hops {
			if h == Blank {
				a.Hops = append(a.Hops, nil)
			} else {
				a.Hops = append(a.Hops, &h)
			}
		}
	case "append":
		l, err := intArg("list", -1, 0, MaxLists-1)
		if err != nil {
			return nil, err
		}
		if l < 0 {
			return nil, badRequest("append needs list=")
		}
		n, err := intArg("n", 10, 0, 1<<20)
		if err != nil {
			return nil, err
		}
		list := uint32(l)
		a.List, a.Status = &list, Found.String()
		if q.Has("from") {
			from, perr := strconv.ParseUint(q.Get("from"), 10, 64)
			if perr != nil {
				return nil, badRequest("from=%q is not a position", q.Get("from"))
			}
			a.Entries, a.Next, a.Lost, err = c.AppendRead(list, from, n, []uint32{})
			if err == nil {
				a.Total = c.ap.total(list)
			}
		} else {
			a.Entries, a.Total, err = c.AppendLast(list, n)
			a.Next = a.Total
		}
		if err != nil {
			return nil, err
		}
	default:
		return nil, &httpError{http.StatusNotFound, fmt.Errorf("no primitive %q (keywrite, append, keyincrement, postcarding)", primitive)}
	}
	return a, nil
}

// Handler serves queries at /keywrite, /keyincrement, /postcarding and
// /append (JSON, see Collector.Query), the counters at /stats (JSON) and,
// given ServerConfig.Metrics, Prometheus metrics at /metrics.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, p := range []string{"keywrite", "keyincrement", "postcarding", "append"} {
		mux.HandleFunc("GET /"+p, func(w http.ResponseWriter, r *http.Request) {
			a, err := s.c.Query(p, r.URL.Query())
			if err != nil {
				code := http.StatusBadRequest
				var he *httpError
				if errors.As(err, &he) {
					code = he.code
				} else if errors.Is(err, ErrDisabled) {
					code = http.StatusNotFound
				}
				writeJSON(w, code, map[string]string{"error": err.Error()})
				return
			}
			writeJSON(w, http.StatusOK, a)
		})
	}
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, s.Stats()) })
	if s.metrics != nil {
		mux.Handle("GET /metrics", s.metrics)
	}
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// Client queries a collector's HTTP endpoint.
type Client struct {
	Server string // host:port, or a URL
	HTTP   *http.Client
}

// Query asks the collector a query (see Collector.Query).
func (cl *Client) Query(ctx context.Context, primitive string, q url.Values) (*Answer, error) {
	var a Answer
	if err := cl.get(ctx, "/"+primitive, q, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// Stats reads the collector's counters.
func (cl *Client) Stats(ctx context.Context) (*Stats, error) {
	var s Stats
	if err := cl.get(ctx, "/stats", nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

func (cl *Client) get(ctx context.Context, path string, q url.Values, v any) error {
	base := cl.Server
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	u := strings.TrimSuffix(base, "/") + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	hc := cl.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the collector at %s: %v", cl.Server, unwrapURL(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("reading the collector's answer: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return &QueryError{Code: resp.StatusCode, Msg: e.Error}
		}
		return &QueryError{Code: resp.StatusCode, Msg: resp.Status}
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("the collector at %s answered no JSON: %v", cl.Server, err)
	}
	return nil
}

// QueryError is a query the collector refused (HTTP 400: a bad
// argument, 404: a primitive it does not host).
type QueryError struct {
	Code int
	Msg  string
}

func (e *QueryError) Error() string { return "the collector refused the query: " + e.Msg }

func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return oe.Err
	}
	return err
}
