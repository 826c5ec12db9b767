package lang

import (
	"sort"
	"strings"
)

// Suggest returns the candidate closest to name, if any is close enough: a
// Damerau–Levenshtein (optimal string alignment) distance of at most 2 (at
// most 1 when name has 3 runes or fewer, where 2 edits match almost
// anything), or a common prefix of at least 3 runes. The distance must also
// be less than the length of name, or "y" would suggest any one-letter label.
// Comparison ignores case.
// Distance matches beat prefix-only matches; ties go to the longer common
// prefix, then to alphabetical order, so the answer is deterministic.
func Suggest(name string, candidates []string) (string, bool) {
	n := []rune(strings.ToLower(name))
	maxDist := 2
	if len(n) <= 3 {
		maxDist = 1
	}
	type match struct {
		s            string
		dist, prefix int
		close        bool
	}
	var ms []match
	for _, c := range candidates {
		cr := []rune(strings.ToLower(c))
		m := match{s: c, dist: osa(n, cr), prefix: commonPrefix(n, cr)}
		m.close = m.dist <= maxDist && m.dist < len(n)
		if c == name {
			continue // the name itself: nothing to suggest
		}
		if m.close || m.prefix >= 3 {
			ms = append(ms, m)
		}
	}
	if len(ms) == 0 {
		return "", false
	}
	sort.Slice(ms, func(i, j int) bool {
		a, b := ms[i], ms[j]
		if a.close != b.close {
			return a.close
		}
		if a.close && a.dist != b.dist {
			return a.dist < b.dist
		}
		if a.prefix != b.prefix {
			return a.prefix > b.prefix
		}
		if a.dist != b.dist {
			return a.dist < b.dist
		}
		return a.s < b.s
	})
	return ms[0].s, true
}

func commonPrefix(a, b []rune) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

// osa is the optimal-string-alignment form of the Damerau–Levenshtein
// distance: insertions, deletions, substitutions and adjacent transpositions.
func osa(a, b []rune) int {
	if len(a) == 0 {
		return len(b)
	}
	if len(b) == 0 {
		return len(a)
	}
	// Three rolling rows: the transposition looks two rows back.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d = min(d, prev2[j-2]+1)
			}
			cur[j] = d
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
