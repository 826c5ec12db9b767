package mafia

import (
	"math/bits"
	"strconv"
	"strings"

	"github.com/ffpf-go/ffpf/lang"
)

// The ffpf class of each update (README.md, "What a program becomes"):
//
//	Counter, HashMap of counters   C.set(C + 1), C.add(pkt.size) …   (counter[,key=K,size=N][,value=bytes])
//	                               any other set/add, a guarded one  (register[,key=K,size=N],set=E[,if=G])
//	Timestamp                      timestamp(T)                      (timestamp)
//	HashMap of timestamps          timestamp(T)                      (register,key=K,size=N,set=pkt.ts)
//	Sketch count-min               S.set(S + V), S.add(V)            (cms,key=K,width=size,depth=nhash,value=V)
//	Sketch pcsa, hyperloglog       S.update()                        (pcsa,key=K,bitmaps=size), (hll,key=K,precision=log2 size)
//	Sketch store                   S.set(V)                          (store,key=K,width=size,depth=nhash,value=V)
//	BloomFilter membership         B.insert()                        (bloom,key=K,bits=size,hashes=nhash,pass=all|new|member)
//	BloomFilter counting           B.set(B + V), B.add(V)            (bloom,key=K,bits=size,hashes=nhash,counting=true,value=V,pass=all)

// update compiles a step that updates a state: STATE.METHOD(...) or
// timestamp(STATE).
func (c *compiler) update(op *Op, in point, _ *Op) (point, []lang.Term, error) {
	name := updated(op)
	if op.Target != "" && !updateMethods[op.Name] {
		name = op.Target
	}
	st := c.sym.states[name]
	if st == nil {
		if op.Name == "timestamp" && op.Target == "" {
			if id, ok := op.Args[0].(*Ident); ok {
				return point{}, nil, c.sym.undeclared(id.Pos, id.Name, "the Timestamp")
			}
			return point{}, nil, c.errorf(op.Args[0].ExprPos(), "timestamp takes the name of a Timestamp: timestamp(now)")
		}
		return point{}, nil, c.sym.undeclared(op.Pos, name, "the state variable")
	}
	if sc := c.scoped[st.name]; sc != nil {
		return c.scopedOp(op, st, sc, in)
	}
	if op.Name == "timestamp" && op.Target == "" {
		switch st.kind {
		case kTimestamp:
			f := fn("timestamp")
			f.Label = st.name
			c.holder[st.name] = "timestamp"
			return c.add(f, in, op.Pos, nil, st), []lang.Term{f}, nil
		case kMapTimestamp:
			f, reads, err := c.registerOf(st, "pkt.ts", "")
			if err != nil {
				return point{}, nil, err
			}
			c.holder[st.name] = "register"
			return c.add(f, in, op.Pos, reads, st), []lang.Term{f}, nil
		}
		return point{}, nil, c.errorf(op.Args[0].ExprPos(), "timestamp(%s) writes a Timestamp, and %s is %s", st.name, st.name, kindNames[st.kind])
	}
	want := map[kind][]string{
		kCounter: {"set", "add"}, kMapCounter: {"set", "add"}, kTimestamp: {"set"}, kMapTimestamp: {"set"},
		kCountMin: {"set", "add"}, kCountingBloom: {"set", "add"}, kPCSA: {"update"}, kHLL: {"update"},
		kStore: {"set"}, kBloom: {"insert"},
	}[st.kind]
	ok := false
	for _, m := range want {
		ok = ok || m == op.Name
	}
	if !ok {
		if op.Name == "reset" || op.Name == "init" {
			return point{}, nil, c.errorf(op.Pos, "%s(): ffpf resets state at the end of each window (window(10s)), not at a step", op.describe())
		}
		if !updateMethods[op.Name] {
			return point{}, nil, c.errorf(op.Pos, "%s(...) reads %s: it is a value, not a step (use it in match(...) or tag(...))", op.describe(), st.name)
		}
		return point{}, nil, c.errorf(op.Pos, "%s is %s: its update is %s(...), not %s(...)", st.name, kindNames[st.kind], st.name+"."+strings.Join(want, "(...) or "+st.name+"."), op.describe())
	}
	switch st.kind {
	case kCounter, kMapCounter:
		if v, ok := c.increment(op, st); ok {
			f := fn("counter")
			if st.key != "" {
				f = fn("counter", "key", st.key, "size", itoa(st.size))
			}
			if v == "bytes" {
				f.Args = append(f.Args, &lang.Arg{Key: "value", Value: value("bytes")})
			}
			f.Label = st.name
			c.holder[st.name] = "counter"
			return c.add(f, in, op.Pos, nil, st), []lang.Term{f}, nil
		}
		fallthrough
	case kTimestamp, kMapTimestamp:
		f, reads, err := c.register(op, st, "")
		if err != nil {
			return point{}, nil, err
		}
		c.holder[st.name] = "register"
		return c.add(f, in, op.Pos, reads, st), []lang.Term{f}, nil
	case kCountMin, kCountingBloom:
		v, reads, err := c.added(op, st)
		if err != nil {
			return point{}, nil, err
		}
		var f *lang.Func
		if st.kind == kCountMin {
			f = fn("cms", "key", st.key, "width", itoa(st.size), "depth", itoa(st.nhash), "value", v)
			c.holder[st.name] = "cms"
		} else {
			f = fn("bloom", "key", st.key, "bits", itoa(st.size), "hashes", itoa(st.nhash), "counting", "true", "value", v, "pass", "all")
			c.holder[st.name] = "bloom"
		}
		f.Label = st.name
		return c.add(f, in, op.Pos, reads, st), []lang.Term{f}, nil
	case kPCSA, kHLL:
		if len(op.Args) != 0 {
			return point{}, nil, c.errorf(op.Pos, "%s.update() takes no argument: it adds the packet's key", st.name)
		}
		var f *lang.Func
		if st.kind == kPCSA {
			f = fn("pcsa", "key", st.key, "bitmaps", itoa(st.size))
			c.holder[st.name] = "pcsa"
		} else {
			f = fn("hll", "key", st.key, "precision", itoa(int64(bits.TrailingZeros64(uint64(st.size)))))
			c.holder[st.name] = "hll"
		}
		f.Label = st.name
		return c.add(f, in, op.Pos, nil, st), []lang.Term{f}, nil
	case kBloom:
		out, ts, _, err := c.bloom(op, st, in, "all")
		return out, ts, err
	case kStore:
		out, ts, _, err := c.store(op, st, in, "all")
		return out, ts, err
	}
	return point{}, nil, c.errorf(op.Pos, "%s cannot be updated by %s", st.name, op.describe())
}

// increment recognises the updates the counter class makes: C.set(C + 1),
// C.set(C + pkt.size) (either way round), C.add(1), C.add(pkt.size).
func (c *compiler) increment(op *Op, st *state) (string, bool) {
	if len(op.Args) != 1 {
		return "", false
	}
	v := op.Args[0]
	if op.Name == "set" {
		b, ok := v.(*Binary)
		if !ok || b.Op != "+" {
			return "", false
		}
		switch {
		case isIdent(b.X, st.name):
			v = b.Y
		case isIdent(b.Y, st.name):
			v = b.X
		default:
			return "", false
		}
	}
	switch v := v.(type) {
	case *Num:
		if i, _, isInt, err := v.value(); err == nil && isInt && i == 1 && v.Unit == "" {
			return "packets", true
		}
	case *Field:
		if f, ok := fieldName(v.Name()); ok && f == "pkt.len" {
			return "bytes", true
		}
	}
	return "", false
}

func isIdent(e Expr, name string) bool {
	id, ok := e.(*Ident)
	return ok && id.Name == name
}

// added returns what S.set(S + V) or S.add(V) adds to a sketch: packets,
// bytes, or V in match's language.
func (c *compiler) added(op *Op, st *state) (string, []read, error) {
	if len(op.Args) != 1 {
		return "", nil, c.errorf(op.Pos, "%s takes one value", op.describe())
	}
	v := op.Args[0]
	if op.Name == "set" {
		b, ok := v.(*Binary)
		switch {
		case ok && b.Op == "+" && isIdent(b.X, st.name):
			v = b.Y
		case ok && b.Op == "+" && isIdent(b.Y, st.name):
			v = b.X
		default:
			return "", nil, c.errorf(v.ExprPos(), "%s is %s, which adds: write %s.set(%s + VALUE) or %s.add(VALUE)", st.name, kindNames[st.kind], st.name, st.name, st.name)
		}
	}
	if n, ok := v.(*Num); ok {
		if i, _, isInt, err := n.value(); err == nil && isInt && i == 1 && n.Unit == "" {
			return "packets", nil, nil
		}
	}
	if f, ok := v.(*Field); ok {
		if name, ok := fieldName(f.Name()); ok && name == "pkt.len" {
			return "bytes", nil, nil
		}
	}
	x := c.ctx(nil)
	s, err := c.num(v, x, op.describe())
	if err != nil {
		return "", nil, err
	}
	if readsState(v, st.name) {
		return "", nil, c.errorf(v.ExprPos(), "%s adds a value to a key's cells; the value cannot read %s itself", st.name, st.name)
	}
	return s, x.reads, nil
}

// register compiles a set or add of a counter or timestamp state into a
// register, with guard (if=) when not "".
func (c *compiler) register(op *Op, st *state, guard string) (*lang.Func, []read, error) {
	x := c.ctx(st)
	var set string
	switch {
	case op.Name == "timestamp" && op.Target == "":
		set = "pkt.ts"
	case len(op.Args) != 1:
		return nil, nil, c.errorf(op.Pos, "%s takes one value", op.describe())
	default:
		v, err := c.num(op.Args[0], x, op.describe())
		if err != nil {
			return nil, nil, err
		}
		set = v
		if op.Name == "add" {
			set = "(old + " + v + ")"
		}
		// A Counter narrower than 64 bits wraps, as the paper's registers
		// of width bits do (a Lamport clock of 8 bits).
		if st.width < 64 && (st.kind == kCounter || st.kind == kMapCounter) {
			set = "(" + set + " & " + strconv.FormatUint(1<<st.width-1, 10) + ")"
		}
	}
	f, _, err := c.registerOf(st, set, guard)
	return f, x.reads, err
}

func (c *compiler) registerOf(st *state, set, guard string) (*lang.Func, []read, error) {
	f := fn("register")
	if st.key != "" {
		f = fn("register", "key", st.key, "size", itoa(st.size))
	}
	f.Args = append(f.Args, &lang.Arg{Key: "set", Value: value(set)})
	if guard != "" {
		f.Args = append(f.Args, &lang.Arg{Key: "if", Value: value(guard)})
	}
	f.Label = st.name
	return f, nil, nil
}

// bloom compiles B.insert() with pass= (new and member: the test before
// it, fused).
func (c *compiler) bloom(op *Op, st *state, in point, pass string) (point, []lang.Term, bool, error) {
	if len(op.Args) != 0 {
		return point{}, nil, true, c.errorf(op.Pos, "%s.insert() takes no argument: it inserts the packet's key", st.name)
	}
	f := fn("bloom", "key", st.key, "bits", itoa(st.size), "hashes", itoa(st.nhash), "pass", pass)
	f.Label = st.name
	c.holder[st.name] = "bloom"
	return c.add(f, in, op.Pos, nil, st), []lang.Term{f}, true, nil
}

// store compiles S.set(V) with pass= (new and old: the test of its cells
// before it, fused).
func (c *compiler) store(op *Op, st *state, in point, pass string) (point, []lang.Term, bool, error) {
	if len(op.Args) != 1 {
		return point{}, nil, true, c.errorf(op.Pos, "%s.set takes the value to store", st.name)
	}
	x := c.ctx(nil)
	v, err := c.num(op.Args[0], x, op.describe())
	if err != nil {
		return point{}, nil, true, err
	}
	if readsState(op.Args[0], st.name) {
		return point{}, nil, true, c.errorf(op.Args[0].ExprPos(), "%s stores a value in a key's cells; the value cannot read %s itself", st.name, st.name)
	}
	f := fn("store", "key", st.key, "width", itoa(st.size), "depth", itoa(st.nhash), "value", v, "pass", pass)
	f.Label = st.name
	c.holder[st.name] = "store"
	return c.add(f, in, op.Pos, x.reads, st), []lang.Term{f}, true, nil
}

// scopedOp compiles a step of a packet-scoped BloomFilter's life: init and
// insert record what its bits are; reset ends it. None is a function.
func (c *compiler) scopedOp(op *Op, st *state, sc *scoped, in point) (point, []lang.Term, error) {
	switch op.Name {
	case "init":
		if len(op.Args) != 1 {
			return point{}, nil, c.errorf(op.Pos, "%s.init takes the bits the filter starts with", st.name)
		}
		if sc.inserted {
			return point{}, nil, c.errorf(op.Pos, "%s.init(...) after its insert: initialise it first", st.name)
		}
		x := c.ctx(nil)
		v, err := c.num(op.Args[0], x, op.describe())
		if err != nil {
			return point{}, nil, err
		}
		if len(x.reads) > 0 {
			return point{}, nil, c.errorf(op.Args[0].ExprPos(), "%s.init takes a packet's field (ipv4.checksum), not state", st.name)
		}
		sc.init = v
	case "insert":
		if len(op.Args) != 0 {
			return point{}, nil, c.errorf(op.Pos, "%s.insert() takes no argument", st.name)
		}
		sc.inserted = true
	case "reset":
		if len(op.Args) != 0 {
			return point{}, nil, c.errorf(op.Pos, "%s.reset() takes no argument", st.name)
		}
		sc.init, sc.inserted = "", false
	default:
		return point{}, nil, c.errorf(op.Pos, "%s is reset after each packet: its steps are init, insert and reset, and read() is a value", st.name)
	}
	return in, nil, nil
}

// checkReads refuses a read of a state that is not after its update on
// the packets' way.
func (c *compiler) checkReads() error {
	for id, n := range c.nodes {
		for _, r := range n.reads {
			u, ok := c.updNode[r.st.name]
			if !ok {
				return c.errorf(r.pos, "%s is read here but never updated%s: a state is read after the step that updates it (%s)", r.st.name, c.roleNote(), updateHint(r.st))
			}
			if u == id || c.ancestor(u, id) {
				continue
			}
			up := c.nodes[u].at
			if c.ancestor(id, u) {
				return c.errorf(r.pos, "%s is read here, before its update at %s on the packets' way: a switch reads and writes a state once a packet, so ffpf reads it after the update (a match just before the update is its guard, when it reads only that state)", r.st.name, up)
			}
			return c.errorf(r.pos, "%s is read here, beside its update at %s (in another branch of + or another flow): branches run unordered, so the read would see the state before or after the update by chance; read it after the update, in sequence (>>)", r.st.name, up)
		}
	}
	return nil
}

func (c *compiler) roleNote() string {
	if c.role == "" {
		return ""
	}
	return " at " + c.role
}

func updateHint(st *state) string {
	switch st.kind {
	case kCounter, kMapCounter:
		return st.name + ".set(...)"
	case kTimestamp, kMapTimestamp:
		return "timestamp(" + st.name + ")"
	case kBloom:
		return st.name + ".insert()"
	case kPCSA, kHLL:
		return st.name + ".update()"
	}
	return st.name + ".set(...)"
}

// ancestor reports whether node a feeds node b, directly or not.
func (c *compiler) ancestor(a, b int) bool {
	seen := map[int]bool{}
	stack := slices_clone(c.nodes[b].ins)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n < 0 || seen[n] {
			continue
		}
		if n == a {
			return true
		}
		seen[n] = true
		stack = append(stack, c.nodes[n].ins...)
	}
	return false
}

func slices_clone(s []int) []int { return append([]int(nil), s...) }

// windowed are the classes that keep state per window.
var windowed = map[string]bool{"counter": true, "cms": true, "hll": true, "pcsa": true, "bloom": true, "store": true}

// applyWindows gives every windowed state function its window.
func (c *compiler) applyWindows(own map[string]string) error {
	for _, n := range c.nodes {
		if n.self == nil {
			continue
		}
		w := own[n.self.name]
		if w == "" {
			w = c.window
		}
		if w == "" {
			continue
		}
		h := c.holder[n.self.name]
		switch {
		case windowed[h]:
			n.fn.Args = append(n.fn.Args, &lang.Arg{Key: "window", Value: value(w)})
		case h == "timestamp":
			// a Timestamp is the packet's: nothing to reset
		default:
			return c.errorf(n.at, "%s is kept in a register, which has no window: ffpf keeps its cells for the whole run (take the window off this flow, or keep %s in a counter)", n.self.name, n.self.name)
		}
	}
	return nil
}

// hashedClasses are the classes that position a key's cells by its hashes.
var hashedClasses = map[string]bool{"cms": true, "hll": true, "pcsa": true, "bloom": true, "store": true, "counter": true, "register": true}

// switchPositions asks every sketch, Bloom filter and HashMap (a keyed
// counter or register) for a switch's positions of its keys (hash=switch)
// where its switch half also runs in userspace, so that a program keeps
// the same cells, and passes the same packets, on a host as on a switch:
// all but a windowed state and a counting Bloom filter, which keep the
// host's hash on a host.
func (c *compiler) switchPositions() {
	for _, n := range c.nodes {
		if n.self == nil || !hashedClasses[c.holder[n.self.name]] {
			continue
		}
		ok, keyed := true, false
		for _, a := range n.fn.Args {
			switch a.Key {
			case "window", "counting":
				ok = false
			case "key":
				keyed = true
			}
		}
		ok = ok && (keyed || c.holder[n.self.name] != "counter" && c.holder[n.self.name] != "register")
		if ok {
			n.fn.Args = append(n.fn.Args, &lang.Arg{Key: "hash", Value: value("switch")})
		}
	}
}

// origins lists the program positions of the request's functions in the
// order Format prints them, and whether each works on a copy.
func (c *compiler) origins(chains []*lang.Chain) ([]Pos, []bool) {
	at := map[*lang.Func]Pos{}
	for _, n := range c.nodes {
		at[n.fn] = n.at
	}
	var out []Pos
	var copies []bool
	var walk func([]*lang.Chain)
	walk = func(cs []*lang.Chain) {
		for _, ch := range cs {
			for _, t := range ch.Terms {
				switch t := t.(type) {
				case *lang.Func:
					out = append(out, at[t])
					copies = append(copies, c.copies[t])
				case *lang.Group:
					walk(t.Chains)
				}
			}
		}
	}
	walk(chains)
	return out, copies
}
