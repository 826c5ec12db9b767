package dns

import (
	"math/rand/v2"
	"strings"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// nameOf is the parsed name in presentation form, lower case.
func nameOf(msg []byte, nm *name) string {
	var b strings.Builder
	for _, l := range nm.labels[:nm.n] {
		b.WriteString(strings.ToLower(string(msg[l.off : l.off+l.n])))
		b.WriteByte('.')
	}
	if b.Len() == 0 {
		return "."
	}
	return b.String()
}

func dotted(msg []byte, nm *name) bool {
	for _, l := range nm.labels[:nm.n] {
		if strings.IndexByte(string(msg[l.off:l.off+l.n]), '.') >= 0 {
			return true
		}
	}
	return false
}

// message builds a DNS message with x/net's builder, compressing names:
// answers first in a response whose question repeats their suffixes
// would not compress the question, so the question comes after a query
// of the same names in other records only where the format allows; the
// first question is what dnsname reads.
func message(t *testing.T, names []string) []byte {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, Response: true})
	b.EnableCompression()
	b.StartQuestions()
	for i, n := range names {
		if err := b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(n), Type: dnsmessage.Type(1 + i%28), Class: dnsmessage.ClassINET}); err != nil {
			t.Fatal(err)
		}
	}
	b.StartAnswers()
	for _, n := range names {
		b.AResource(dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName(n), Class: dnsmessage.ClassINET}, dnsmessage.AResource{A: [4]byte{1, 2, 3, 4}})
	}
	msg, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// TestQuestionAgreesWithXNet: on messages x/net builds (compressed) and
// on random corruptions of them, a name dnsname parses is the one x/net's
// parser reads, with the same type; dnsname never reads past a message,
// and refuses what it must (pointer loops, forward pointers, names over
// 255 bytes, reserved label types).
func TestQuestionAgreesWithXNet(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	labels := []string{"www", "Example", "com", "a", "mail", "x-1", strings.Repeat("l", 63)}
	var nm name
	agreed, corrupt := 0, 0
	for range 3000 {
		var names []string
		for range 1 + rng.IntN(3) {
			var parts []string
			for range 1 + rng.IntN(4) {
				parts = append(parts, labels[rng.IntN(len(labels))])
			}
			if n := strings.Join(parts, ".") + "."; len(n) < 250 {
				names = append(names, n)
			}
		}
		if len(names) == 0 {
			names = []string{"a."}
		}
		msg := message(t, names)
		for k := range 2 {
			if k == 1 { // corrupt a few bytes
				msg = append([]byte(nil), msg...)
				for range 1 + rng.IntN(3) {
					msg[rng.IntN(len(msg))] = byte(rng.IntN(256))
				}
				msg = msg[:rng.IntN(len(msg)+1)]
				corrupt++
			}
			qtype, present, ok := question(msg, &nm)
			var p dnsmessage.Parser
			_, herr := p.Start(msg)
			q, qerr := p.Question()
			if k == 0 && (!ok || !present || herr != nil || qerr != nil) {
				t.Fatalf("a well-formed message %x: ok %v present %v, x/net %v %v", msg, ok, present, herr, qerr)
			}
			if !ok || !present || dotted(msg, &nm) {
				continue // x/net refuses a label holding a dot, RFC 1035 allows any byte
			}
			if herr != nil || qerr != nil || strings.ToLower(q.Name.String()) != nameOf(msg, &nm) || uint16(q.Type) != qtype {
				t.Fatalf("%x: dnsname read %s type %d, x/net %v %v: %v %v", msg, nameOf(msg, &nm), qtype, q.Name, q.Type, herr, qerr)
			}
			agreed++
		}
	}
	if agreed < 3000 || corrupt != 3000 {
		t.Errorf("%d agreements over %d corrupted and 3000 whole messages", agreed, corrupt)
	}
	hdr := []byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}
	for name, msg := range map[string][]byte{
		"pointer to itself":   append(append([]byte{}, hdr...), 0xC0, 12, 0, 1, 0, 1),
		"loop of two":         append(append([]byte{}, hdr...), 1, 'a', 0xC0, 16, 1, 'b', 0xC0, 12, 0, 1, 0, 1),
		"forward pointer":     append(append([]byte{}, hdr...), 0xC0, 14, 1, 'a', 0, 0, 1, 0, 1),
		"into the header":     append(append([]byte{}, hdr...), 0xC0, 2, 0, 1, 0, 1),
		"reserved label type": append(append([]byte{}, hdr...), 0x80, 0, 0, 1, 0, 1),
		"label past the end":  append(append([]byte{}, hdr...), 5, 'a'),
		"no type":             append(append([]byte{}, hdr...), 1, 'a', 0, 0, 1),
		"256 bytes":           append(append(append([]byte{}, hdr...), []byte(strings.Repeat("\x3f"+strings.Repeat("x", 63), 4))...), 0, 0, 1, 0, 1),
		"short header":        hdr[:11],
	} {
		if _, present, ok := question(msg, &nm); ok || !present {
			t.Errorf("%s: accepted", name)
		}
	}
	// 255 bytes exactly is a name: three labels of 63 and one of 61.
	long := append(append([]byte{}, hdr...), []byte(strings.Repeat("\x3f"+strings.Repeat("x", 63), 3)+"\x3d"+strings.Repeat("y", 61))...)
	if _, _, ok := question(append(long, 0, 0, 1, 0, 1), &nm); !ok || nm.n != 4 {
		t.Error("a name of 255 bytes refused")
	}
	// A chain of pointers, each further back, is a name.
	chain := append(append([]byte{}, hdr...), 0, 0, 1, 0, 1) // a root question first
	chain = append(chain, 3, 'c', 'o', 'm', 0, 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 0xC0, 17, 3, 'w', 'w', 'w', 0xC0, 22)
	if end, ok := parseName(chain, 32, &nm); !ok || end != 38 || nameOf(chain, &nm) != "www.example.com." {
		t.Errorf("a chain of pointers: %v %d %s", ok, end, nameOf(chain, &nm))
	}
}

func TestSuffixMatchesLabelByLabel(t *testing.T) {
	msg := []byte("\x03www\x07ExAmple\x03com\x00")
	var nm name
	if _, ok := parseName(msg, 0, &nm); !ok {
		t.Fatal("not parsed")
	}
	for suffix, want := range map[string]bool{".example.com": true, "example.com": true, "EXAMPLE.COM.": true, "com": true, ".": true,
		"ample.com": false, "www.example.com.x": false, "a.www.example.com": false} {
		l, err := labels(suffix)
		if err != nil {
			t.Fatal(err)
		}
		if got := nm.hasSuffix(msg, l); got != want {
			t.Errorf("%q: %v", suffix, got)
		}
	}
	for _, bad := range []string{"a..b", strings.Repeat("x", 64) + ".com", strings.Repeat("abc.", 70)} {
		if _, err := labels(bad); err == nil {
			t.Errorf("suffix %q accepted", bad)
		}
	}
}
