package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/ffpf-go/ffpf/flowgraph"
)

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progressBar redraws one line on a terminal while a file is replayed.
type progressBar struct {
	done chan struct{}
	out  io.Writer
	quit chan struct{}
}

func startProgress(rt *flowgraph.Runtime, w io.Writer) *progressBar {
	p := &progressBar{done: make(chan struct{}), quit: make(chan struct{}), out: w}
	go func() {
		defer close(p.done)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		drawn := false
		for {
			select {
			case <-p.quit:
				if drawn {
					fmt.Fprint(w, "\r\033[K")
				}
				return
			case <-t.C:
				frac, known := rt.Progress()
				if !known {
					continue
				}
				const width = 30
				n := int(frac * width)
				el := rt.Elapsed().Seconds()
				pk := rt.Packets()
				rate := 0.0
				if el > 0 {
					rate = float64(pk) / el / 1e6
				}
				fmt.Fprintf(w, "\r[%s%s] %3.0f%%  %d packets  %.2f Mpps", strings.Repeat("=", n),
					strings.Repeat(" ", width-n), frac*100, pk, rate)
				drawn = true
			}
		}
	}()
	return p
}

// finish erases the bar; it is safe on a nil bar.
func (p *progressBar) finish() {
	if p == nil {
		return
	}
	close(p.quit)
	<-p.done
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
