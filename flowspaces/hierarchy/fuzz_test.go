package hierarchy

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// FuzzParse: whatever the file says, Parse returns a hierarchy that
// Describe and Format can show, or one error that names the file.
func FuzzParse(f *testing.F) {
	examples, _ := filepath.Glob("../../examples/hierarchy/*.yaml")
	for _, e := range examples {
		if b, err := os.ReadFile(e); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("children:\n  - {name: a, kind: xdp, interface: eth0}\n"))
	f.Add([]byte("name: user\nchildren: []\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-done:
			case <-time.After(3 * time.Second):
				buf := make([]byte, 1<<20)
				panic(fmt.Sprintf("slow input %q\n%s", data, buf[:runtime.Stack(buf, true)]))
			}
		}()
		root, err := Parse(data, "h.yaml", nil)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "h.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		Describe(root)
		if err := Format(io.Discard, root); err != nil {
			t.Fatal(err)
		}
	})
}
