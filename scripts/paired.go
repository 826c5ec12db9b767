//go:build ignore

// paired times commands in paired runs for make bench: each round runs
// every command once, in turn (the order reversed every other round), so
// that a burst of load on the shared machine hits all of them alike. It
// prints, per command, the median wall time of its runs and the median of
// its ratio to the last command's time in the same round, then the load
// average before and after.
//
//	go run scripts/paired.go -n 41 -- ffpf run -r one.pcap '(pktcount)' -- tcpdump -r one.pcap -w /dev/null
//
// Output, one line per command: "cmd N median_ms M ratio R", then
// "load BEFORE AFTER" (1-minute load averages).
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

func main() {
	n := flag.Int("n", 41, "rounds")
	flag.Parse()
	// The flag package takes the first "--" as the end of the flags.
	cmds := [][]string{nil}
	for _, a := range flag.Args() {
		if a == "--" {
			cmds = append(cmds, nil)
			continue
		}
		cmds[len(cmds)-1] = append(cmds[len(cmds)-1], a)
	}
	if slices.ContainsFunc(cmds, func(c []string) bool { return len(c) == 0 }) {
		log.Fatal("paired: give commands, each after --")
	}
	before := loadavg()
	times := make([][]float64, len(cmds))
	ratios := make([][]float64, len(cmds))
	round := make([]float64, len(cmds))
	for r := 0; r < *n; r++ {
		for k := range cmds {
			i := k
			if r%2 == 1 {
				i = len(cmds) - 1 - k
			}
			round[i] = run(cmds[i])
		}
		for i := range cmds {
			times[i] = append(times[i], round[i])
			ratios[i] = append(ratios[i], round[i]/round[len(cmds)-1])
		}
	}
	for i, c := range cmds {
		fmt.Printf("cmd %d median_ms %.2f ratio %.3f %s\n", i, median(times[i]), median(ratios[i]), strings.Join(c, " "))
	}
	fmt.Printf("load %s %s\n", before, loadavg())
}

// run returns the wall time of one run of c in milliseconds, its output
// discarded; a command that fails ends the measurement.
func run(c []string) float64 {
	cmd := exec.Command(c[0], c[1:]...)
	start := time.Now()
	if err := cmd.Run(); err != nil {
		log.Fatalf("paired: %s: %v", strings.Join(c, " "), err)
	}
	return float64(time.Since(start).Microseconds()) / 1e3
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// loadavg is the 1-minute load average.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}
