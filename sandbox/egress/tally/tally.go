// Package tally counts a session's destinations, allowed and refused, for
// the one line the shadow prints when the session ends: the evidence of
// what the session reached that no later flood of the audit log can
// rotate away. The proxy counts (Tally), hands the shadow a Summary as
// one JSON line, and the shadow prints its Line. It links no HTTP stack.
package tally

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/cco-dev/cco/internal/safetext"
)

// Outcome is what became of a request: allowed, refused by the policy, or
// failed upstream.
type Outcome int

const (
	Allowed Outcome = iota
	Refused
	Failed
	outcomes
)

var outcomeNames = [outcomes]string{"allowed", "refused", "failed"}

// maxDests bounds the destinations a Tally tells apart for each outcome:
// past it, a new destination counts only in Others.
const maxDests = 4096

// Shown is how many destinations of each outcome a Summary names, the
// most frequent first.
const Shown = 5

// Tally counts requests by outcome and destination. Its zero value is
// ready; it is safe for concurrent use.
type Tally struct {
	mu    sync.Mutex
	dests [outcomes]map[string]int
	other [outcomes]int
	// upstream counts the upstream proxy's failures by reason, up to
	// maxUpstream reasons (in the order first seen).
	upstream []UpstreamFailure
}

// maxUpstream bounds the upstream failures a Tally tells apart.
const maxUpstream = 3

// UpstreamFailure is one reason the upstream proxy failed, and how often.
type UpstreamFailure struct {
	Reason string `json:"reason"`
	N      int    `json:"n"`
}

// Upstream counts one failure of the upstream proxy (egress_upstream):
// the session's end says it in one line.
func (t *Tally) Upstream(reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.upstream {
		if t.upstream[i].Reason == reason {
			t.upstream[i].N++
			return
		}
	}
	if len(t.upstream) < maxUpstream {
		t.upstream = append(t.upstream, UpstreamFailure{reason, 1})
	} else {
		t.upstream[maxUpstream-1].N++
	}
}

// Add counts one request to target (host:port as the client asked, cut
// to the audit log's length) with its outcome.
func (t *Tally) Add(target string, o Outcome) {
	if o < 0 || o >= outcomes {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.dests[o]
	if m == nil {
		m = map[string]int{}
		t.dests[o] = m
	}
	if _, ok := m[target]; ok || len(m) < maxDests {
		m[target]++
		return
	}
	t.other[o]++
}

// Dest is one destination and its count.
type Dest struct {
	Target string `json:"target"`
	N      int    `json:"n"`
}

// Group is one outcome's part of a Summary: the total, the number of
// destinations, and the most frequent ones.
type Group struct {
	Requests     int    `json:"requests"`
	Destinations int    `json:"destinations"`
	Top          []Dest `json:"top,omitempty"`
}

// Summary is a session's tally as the proxy hands it to the shadow.
type Summary struct {
	Allowed Group `json:"allowed"`
	Refused Group `json:"refused"`
	Failed  Group `json:"failed"`
	// Upstream are the upstream proxy's failures (Tally.Upstream).
	Upstream []UpstreamFailure `json:"upstream,omitempty"`
}

// Summary is the tally so far.
func (t *Tally) Summary() Summary {
	t.mu.Lock()
	defer t.mu.Unlock()
	var gs [outcomes]Group
	for o := range outcomes {
		g := &gs[o]
		g.Destinations = len(t.dests[o])
		g.Requests = t.other[o]
		if t.other[o] > 0 {
			g.Destinations++ // at least one more, untold
		}
		for target, n := range t.dests[o] {
			g.Requests += n
			g.Top = append(g.Top, Dest{target, n})
		}
		sort.Slice(g.Top, func(i, j int) bool {
			if g.Top[i].N != g.Top[j].N {
				return g.Top[i].N > g.Top[j].N
			}
			return g.Top[i].Target < g.Top[j].Target
		})
		if len(g.Top) > Shown {
			g.Top = g.Top[:Shown]
		}
	}
	return Summary{Allowed: gs[Allowed], Refused: gs[Refused], Failed: gs[Failed], Upstream: append([]UpstreamFailure(nil), t.upstream...)}
}

// Empty reports whether the session made no request at all.
func (s Summary) Empty() bool {
	return s.Allowed.Requests == 0 && s.Refused.Requests == 0 && s.Failed.Requests == 0
}

// Encode is the summary as one line of JSON (without the newline).
func (s Summary) Encode() string {
	b, _ := json.Marshal(s) // strings and ints only: it cannot fail
	return string(b)
}

// Decode reads what Encode wrote.
func Decode(line string) (Summary, error) {
	var s Summary
	if err := json.Unmarshal([]byte(line), &s); err != nil {
		return Summary{}, fmt.Errorf("the egress proxy's summary: %w", err)
	}
	return s, nil
}

// shownTarget is how much of a target the line prints, in bytes before
// escaping.
const shownTarget = 80

// Line is the summary as the shadow prints it after the session, one line
// without its newline: every byte of a target the jail chose goes through
// safetext.Escape, the one printer. logPath names the audit log that holds the details.
func (s Summary) Line(logPath string) string {
	var b strings.Builder
	b.WriteString("cco: egress this session:")
	for i, g := range []Group{s.Allowed, s.Refused, s.Failed} {
		if Outcome(i) == Failed && g.Requests == 0 {
			continue // failures only when there were some
		}
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " %s %d", outcomeNames[i], g.Requests)
		if g.Requests == 0 {
			continue
		}
		fmt.Fprintf(&b, " to %d (", g.Destinations)
		for k, d := range g.Top {
			if k > 0 {
				b.WriteString(", ")
			}
			b.WriteString(safetext.Escape(clip(d.Target, shownTarget)))
			if d.N > 1 {
				b.WriteString(" x" + strconv.Itoa(d.N))
			}
		}
		if more := g.Destinations - len(g.Top); more > 0 {
			fmt.Fprintf(&b, ", %d more", more)
		}
		b.WriteString(")")
	}
	if logPath != "" {
		b.WriteString("; details: " + safetext.Escape(logPath))
	}
	if up := s.UpstreamLine(); up != "" {
		b.WriteString("\n" + up)
	}
	return b.String()
}

// UpstreamLine is the one line about the upstream proxy's failures, or
// "" when it had none.
func (s Summary) UpstreamLine() string {
	if len(s.Upstream) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("cco: egress upstream proxy failed this session:")
	for i, u := range s.Upstream {
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " %s", safetext.Escape(clip(u.Reason, 400)))
		if u.N > 1 {
			fmt.Fprintf(&b, " (x%d)", u.N)
		}
	}
	return b.String()
}

// clip cuts s to at most n bytes, on a rune boundary where s is UTF-8,
// marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > n-utf8.UTFMax && cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
