package collector

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"github.com/ffpf-go/ffpf/functions/dta/layout"
)

// Bounds of a configuration: layout's, which the reporter and the
// translator check against too.
const (
	MaxRedundancy = layout.MaxRedundancy // copies of a key (N) a report may ask for
	MaxHops       = layout.MaxHops       // Postcarding's B: a chunk is 8 words (32 bytes), as the reference pads 5 hops to
	MaxSlots      = layout.MaxSlots      // slots (or chunks, or entries of a list) of one structure: CRC-32 mod M
	MaxLists      = layout.MaxLists      // Append lists
	Blank         = layout.Blank         // Postcarding's g(⊔): the word of a hop that was not collected
)

// Config is the collector's memory: which primitives it hosts and how
// large each structure is. A zero field leaves its primitive out; its
// reports are then counted as ReasonDisabled.
type Config struct {
	KeyWrite     KeyWriteConfig
	Postcarding  PostcardingConfig
	Append       AppendConfig
	KeyIncrement KeyIncrementConfig
}

// KeyWriteConfig sizes Key-Write's slots.
type KeyWriteConfig struct {
	Slots uint64 // M: slots of {checksum:32, data:32}
	// Redundancy is the N a query assumes when it names none: a key
	// written with fewer copies finds the others overwritten.
	Redundancy int
}

// KeyIncrementConfig sizes Key-Increment's counters.
type KeyIncrementConfig struct {
	Slots      uint64 // 64-bit counters
	Redundancy int    // the N a query takes the minimum over when it names none
}

// AppendConfig sizes Append's rings.
type AppendConfig struct {
	Lists uint32 // list ids 0 to Lists-1
	Size  uint64 // entries (32-bit) in each list's ring
}

// PostcardingConfig sizes Postcarding's chunks.
type PostcardingConfig struct {
	Chunks     uint64 // C: chunks of 8 words (32 bytes), B of them used
	Hops       int    // B: hops of a path, 1 to MaxHops
	Redundancy int    // N: chunks a path is written to (the report format carries none)
	// Values is |V|: hop values are 0 to Values-1, g is the identity, and
	// a word decodes as valid when it gives a value in V or the blank.
	// The smaller V, the rarer a false output ((|V|+1)·2^-32 per word).
	Values uint64
}

// Enabled reports whether the configuration hosts the primitive.
func (c *KeyWriteConfig) Enabled() bool     { return c.Slots > 0 }
func (c *KeyIncrementConfig) Enabled() bool { return c.Slots > 0 }
func (c *AppendConfig) Enabled() bool       { return c.Lists > 0 }
func (c *PostcardingConfig) Enabled() bool  { return c.Chunks > 0 }

// Bytes is the memory the configuration allocates.
func (c *Config) Bytes() uint64 {
	return c.KeyWrite.Slots*8 + c.KeyIncrement.Slots*8 + uint64(c.Append.Lists)*c.Append.Size*4 + c.Postcarding.Chunks*32
}

// Validate checks the configuration and fills in defaults.
func (c *Config) Validate() error {
	if !c.KeyWrite.Enabled() && !c.KeyIncrement.Enabled() && !c.Append.Enabled() && !c.Postcarding.Enabled() {
		return errors.New("the collector hosts no primitive: configure keywrite, append, keyincrement or postcarding")
	}
	if c.KeyWrite.Enabled() {
		if err := layout.CheckHashed("keywrite slots", c.KeyWrite.Slots); err != nil {
			return err
		}
		if err := checkRedundancy("keywrite", &c.KeyWrite.Redundancy, 2); err != nil {
			return err
		}
	}
	if c.KeyIncrement.Enabled() {
		if err := layout.CheckHashed("keyincrement slots", c.KeyIncrement.Slots); err != nil {
			return err
		}
		if err := checkRedundancy("keyincrement", &c.KeyIncrement.Redundancy, 2); err != nil {
			return err
		}
	}
	if c.Append.Enabled() || c.Append.Size > 0 {
		switch {
		case c.Append.Lists == 0 || c.Append.Lists > MaxLists:
			return fmt.Errorf("append lists=%d: 1 to %d lists", c.Append.Lists, MaxLists)
		case c.Append.Size == 0 || c.Append.Size > MaxSlots:
			return fmt.Errorf("append size=%d: 1 to %d entries per list", c.Append.Size, uint64(MaxSlots))
		}
	}
	if p := &c.Postcarding; p.Enabled() {
		if err := layout.CheckHashed("postcarding chunks", p.Chunks); err != nil {
			return err
		}
		if err := checkRedundancy("postcarding", &p.Redundancy, 1); err != nil {
			return err
		}
		if p.Hops == 0 {
			p.Hops = 5
		}
		if p.Hops < 1 || p.Hops > MaxHops {
			return fmt.Errorf("postcarding hops=%d: 1 to %d hops", p.Hops, MaxHops)
		}
		if p.Values == 0 {
			p.Values = 1 << 24
		}
		if p.Values >= Blank {
			return fmt.Errorf("postcarding values=%d: at most %d values, the last word is the blank", p.Values, uint64(Blank-1))
		}
	}
	return nil
}

func checkRedundancy(name string, n *int, def int) error {
	if *n == 0 {
		*n = def
	}
	return layout.CheckRedundancy(name+" redundancy", *n)
}

// ParseKeyWrite reads "slots=M[,redundancy=N]".
func ParseKeyWrite(s string) (KeyWriteConfig, error) {
	var c KeyWriteConfig
	err := parseSpec("keywrite", s, map[string]func(uint64) error{
		"slots":      func(v uint64) error { c.Slots = v; return nil },
		"redundancy": func(v uint64) error { c.Redundancy = int(min(v, 1<<16)); return nil },
	})
	return c, err
}

// ParseKeyIncrement reads "slots=M[,redundancy=N]".
func ParseKeyIncrement(s string) (KeyIncrementConfig, error) {
	var c KeyIncrementConfig
	err := parseSpec("keyincrement", s, map[string]func(uint64) error{
		"slots":      func(v uint64) error { c.Slots = v; return nil },
		"redundancy": func(v uint64) error { c.Redundancy = int(min(v, 1<<16)); return nil },
	})
	return c, err
}

// ParseAppend reads "lists=L,size=S".
func ParseAppend(s string) (AppendConfig, error) {
	c := AppendConfig{Lists: 1}
	err := parseSpec("append", s, map[string]func(uint64) error{
		"lists": func(v uint64) error { c.Lists = uint32(min(v, 1<<32-1)); return nil },
		"size":  func(v uint64) error { c.Size = v; return nil },
	})
	return c, err
}

// ParsePostcarding reads "chunks=C[,hops=B][,redundancy=N][,values=V]".
func ParsePostcarding(s string) (PostcardingConfig, error) {
	var c PostcardingConfig
	err := parseSpec("postcarding", s, map[string]func(uint64) error{
		"chunks":     func(v uint64) error { c.Chunks = v; return nil },
		"hops":       func(v uint64) error { c.Hops = int(min(v, 1<<16)); return nil },
		"redundancy": func(v uint64) error { c.Redundancy = int(min(v, 1<<16)); return nil },
		"values":     func(v uint64) error { c.Values = v; return nil },
	})
	return c, err
}

// parseSpec reads "name=number,..." with the names of set, each at most
// once; the first name (slots, lists, chunks) is required.
func parseSpec(what, s string, set map[string]func(uint64) error) error {
	seen := map[string]bool{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return fmt.Errorf("%s %q: want name=number, as in slots=1M,redundancy=2", what, kv)
		}
		f, known := set[k]
		if !known {
			names := make([]string, 0, len(set))
			for n := range set {
				names = append(names, n)
			}
			return fmt.Errorf("%s has no setting %q (it has %s)", what, k, strings.Join(sortStrings(names), ", "))
		}
		if seen[k] {
			return fmt.Errorf("%s sets %s twice", what, k)
		}
		seen[k] = true
		n, err := ParseCount(v)
		if err != nil {
			return fmt.Errorf("%s %s: %v", what, k, err)
		}
		if n == 0 { // a zero size would leave the primitive out, and 0 stands for a default
			if k == "redundancy" || k == "hops" || k == "values" {
				return fmt.Errorf("%s %s=0: at least 1 (leave %s out for the default)", what, k, k)
			}
			return fmt.Errorf("%s %s=0: at least 1", what, k)
		}
		if err := f(n); err != nil {
			return err
		}
	}
	for _, req := range []string{"slots", "size", "chunks"} {
		if _, has := set[req]; has && !seen[req] {
			return fmt.Errorf("%s needs %s=", what, req)
		}
	}
	return nil
}

func sortStrings(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}

// ParseCount reads a count: decimal or 0x hexadecimal, with an optional
// suffix K, M, G (10^3, 10^6, 10^9, as ffpf's Int parameters) or Ki, Mi,
// Gi (2^10, 2^20, 2^30).
func ParseCount(s string) (uint64, error) {
	mult := uint64(1)
	for _, u := range []struct {
		suffix string
		mult   uint64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"K", 1e3}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}} {
		if strings.HasSuffix(s, u.suffix) && !strings.HasPrefix(s, "0x") {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a count", s)
	}
	hi, lo := bits.Mul64(n, mult)
	if hi != 0 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return lo, nil
}
