package verify

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"time"
)

// RecordPath is where the last verdict is kept, beside the receipt.
const RecordPath = "/var/lib/cco/jail-verified.json"

// Result is `cco-install verify --json`'s document, and the record's body.
type Result struct {
	Schema int       `json:"schema"`
	OK     bool      `json:"ok"`
	Time   time.Time `json:"time"`
	Kernel string    `json:"kernel"`
	Engine string    `json:"engine"`
	Layers []string  `json:"layers"`
	// Versions are cco's and each verified agent's.
	Versions map[string]string `json:"versions"`
	Checks   []Check           `json:"checks"`
	// Failed are the ids of the failed checks, "agent:id".
	Failed []string `json:"failed"`
}

// Fingerprint is what a verdict was taken on: a change to any of it makes
// the verdict stale.
type Fingerprint struct {
	Shadow  string            `json:"shadow"`
	Agents  map[string]string `json:"agents"`
	Kernel  string            `json:"kernel"`
	Sandbox string            `json:"sandbox_toml"`
}

// Record is the kept verdict.
type Record struct {
	Result
	Fingerprint Fingerprint `json:"fingerprint"`
}

// Finish fills the result's summary from its batteries.
func Finish(r *Result, bs []*Battery) {
	r.Schema, r.OK, r.Failed = Schema, true, []string{}
	if r.Layers == nil {
		r.Layers = []string{}
	}
	for _, b := range bs {
		if r.Engine == "" && b.Engine != "" {
			r.Engine, r.Layers = b.Engine, b.Layers
		}
		if r.Kernel == "" {
			r.Kernel = b.Kernel
		}
		for _, c := range b.Checks {
			r.Checks = append(r.Checks, c)
			if !c.OK {
				r.OK = false
				id := c.Agent + ":" + c.ID
				if !slices.Contains(r.Failed, id) {
					r.Failed = append(r.Failed, id)
				}
			}
		}
	}
	if r.Checks == nil {
		r.Checks = []Check{}
	}
}

// HashFile is a file's sha256, "" when it cannot be read.
func HashFile(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, 1<<30)); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Marshal is the record's bytes, as kept at RecordPath.
func Marshal(rec *Record) ([]byte, error) {
	b, err := json.MarshalIndent(rec, "", "  ")
	return append(b, '\n'), err
}

// Load reads the kept verdict; (nil, nil) when there is none.
func Load(path string) (*Record, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("%s does not parse (%v): run `sudo cco-install verify` to write it again", path, err)
	}
	return &rec, nil
}

// Changed names what differs between the verdict's fingerprint and now:
// "shadow", "agents", "kernel", "sandbox.toml".
func Changed(then, now Fingerprint) []string {
	out := []string{}
	if then.Shadow != now.Shadow {
		out = append(out, "shadow")
	}
	if !maps.Equal(then.Agents, now.Agents) {
		out = append(out, "agents")
	}
	if then.Kernel != now.Kernel {
		out = append(out, "kernel")
	}
	if then.Sandbox != now.Sandbox {
		out = append(out, "sandbox.toml")
	}
	return out
}

// Status is status --json's jail_verified.
type Status struct {
	Time    time.Time `json:"time"`
	OK      bool      `json:"ok"`
	Failed  []string  `json:"failed"`
	Changed []string  `json:"changed"`
}

// StatusOf is the record's summary against the fingerprint of now.
func StatusOf(rec *Record, now Fingerprint) *Status {
	if rec == nil {
		return nil
	}
	f := rec.Failed
	if f == nil {
		f = []string{}
	}
	return &Status{Time: rec.Time, OK: rec.OK, Failed: f, Changed: Changed(rec.Fingerprint, now)}
}
