package sandbox

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/sandbox/caches"
	"github.com/cco-dev/cco/sandbox/egress/policy"
)

// ConfigValue is one sandbox.toml key's effective value and the file it
// came from (Config.Source), as `cco-install config` shows it.
type ConfigValue struct {
	Key    string `json:"key"`
	Value  any    `json:"value"`
	Source string `json:"source"`
}

// Effective lists every key's effective value, in Config's order: a key
// no file sets shows its default (egress_allow's, the shipped list of each
// agent, by agent).
func (c *Config) Effective() []ConfigValue {
	v := reflect.ValueOf(*c)
	t := v.Type()
	var out []ConfigValue
	for i := range t.NumField() {
		key := t.Field(i).Tag.Get("toml")
		if key == "" {
			continue
		}
		val := v.Field(i).Interface()
		switch key {
		case "caches":
			if c.Caches == "" {
				val = caches.Persist
			}
		case "egress":
			if c.Egress == "" {
				val = policy.ModePublic
			}
		case "max_procs":
			val = procs(c.MaxProcs)
		case "tmpfs_size":
			switch {
			case c.TmpfsSize.Bytes > 0:
				val = c.TmpfsSize.Bytes
			case c.TmpfsSize.Percent > 0:
				val = fmt.Sprintf("%g%%", c.TmpfsSize.Percent)
			default:
				val = "50%"
			}
		case "home_read_only":
			l := []string{}
			for _, t := range c.HomeTrees() {
				l = append(l, "~/"+t)
			}
			val = l
		case "egress_ports":
			if c.EgressPorts == nil {
				val = slices.Clone(policy.DefaultPorts)
			}
		case "egress_upstream":
			if c.EgressUpstream == "" {
				val = "env"
			}
		case "egress_log":
			if c.EgressLog == "" {
				val = "~/.local/state/cco/egress.log"
			}
		case "egress_allow":
			if c.EgressAllow == nil {
				m := map[string][]string{}
				for _, n := range agent.Names() {
					m[n] = policy.DefaultAllow(n)
				}
				val = m
			}
		}
		if l, ok := val.([]string); ok && l == nil {
			val = []string{}
		}
		if l, ok := val.([]int); ok && l == nil {
			val = []int{}
		}
		out = append(out, ConfigValue{Key: key, Value: val, Source: c.Source(key)})
	}
	return out
}
