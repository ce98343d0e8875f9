package appserver

import (
	"reflect"
	"strings"
	"testing"
)

func TestApplies(t *testing.T) {
	for _, c := range []struct {
		args string
		want bool
	}{
		{"agents", true},
		{"agents list", true},
		{"--dangerously-bypass-approvals-and-sandbox agents", true},
		{"agents --dangerously-bypass-approvals-and-sandbox", true},
		{"-c model=o3 agents", true},
		{"-cmodel=o3 agents", true},
		{"--config model=o3 --enable x agents", true},
		{"-C /work agents", true},
		{"--cd=/work --no-alt-screen agents", true},
		{"-m gpt agents", true},
		{"", false},
		{"exec hello", false},
		{"resume --last", false},
		{"app-server", false},
		{"help agents", false},
		{"agents --help", false},
		{"agents -h", false},
		{"--help agents", false},
		{"agents list --help", false},
		{"--remote unix:///tmp/s agents", false},
		{"agents --remote=ws://127.0.0.1:1", false},
		{"--version agents", false},
		// A value, not the subcommand.
		{"-m agents", false},
		{"--profile agents exec", false},
		{"-c agents", false},
		// After "--" everything is the prompt.
		{"-- agents", false},
		{"agents -- -h", true},
		{"agents -c -- --help", true}, // "--" is no option's value
		// The prompt "agents": a positional came first.
		{"fix agents", false},
	} {
		if got := Applies(strings.Fields(c.args)); got != c.want {
			t.Errorf("Applies(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}

func TestPlanForwardsConfigInEverySpelling(t *testing.T) {
	for _, c := range []struct {
		args      string
		flags     []string
		dir       string
		whyNoFlag string
	}{
		{args: "-c k=v agents", flags: []string{"-c", "k=v"}},
		{args: "-ck=v agents", flags: []string{"-ck=v"}},
		{args: "-c=k=v agents", flags: []string{"-c=k=v"}},
		{args: "--config k=v agents", flags: []string{"--config", "k=v"}},
		{args: "--config=k=v agents", flags: []string{"--config=k=v"}},
		{args: "--enable f agents", flags: []string{"--enable", "f"}},
		{args: "--enable=f agents", flags: []string{"--enable=f"}},
		{args: "--disable f agents", flags: []string{"--disable", "f"}},
		{args: "--disable=f agents", flags: []string{"--disable=f"}},
		{args: "agents -c a=1 --enable b", flags: []string{"-c", "a=1", "--enable", "b"}},
		{args: "-c a=1 --no-alt-screen -m o3 --yolo agents --disable=z",
			flags: []string{"-c", "a=1", "--disable=z"}},
		{args: "-C /w agents", dir: "/w"},
		{args: "-C/w agents", dir: "/w"},
		{args: "--cd /w agents", dir: "/w"},
		{args: "--cd=/w agents", dir: "/w"},
		{args: "-C /a --cd /b agents", dir: "/b"},
		// A flag whose value is "-c" is not a -c.
		{args: "-m -c agents", whyNoFlag: "the model is named -c"},
		{args: "agents -- -c k=v", whyNoFlag: "after -- it is the prompt"},
		{args: "agents -c", whyNoFlag: "no value: codex reports it"},
	} {
		p := planFor(strings.Fields(c.args))
		if len(c.flags) == 0 && len(p.serverFlags) != 0 {
			t.Errorf("%q: server flags %q, want none (%s)", c.args, p.serverFlags, c.whyNoFlag)
		} else if len(c.flags) != 0 && !reflect.DeepEqual(p.serverFlags, c.flags) {
			t.Errorf("%q: server flags %q, want %q", c.args, p.serverFlags, c.flags)
		}
		if p.dir != c.dir {
			t.Errorf("%q: server dir %q, want %q", c.args, p.dir, c.dir)
		}
	}
}

func TestTail(t *testing.T) {
	tl := &tail{max: 8}
	for i := 0; i < 10; i++ {
		tl.Write([]byte("abc"))
	}
	if got := tl.String(); got != "bcabcabc" {
		t.Errorf("tail = %q, want the last 8 bytes", got)
	}
}
