package vmtests

import (
	"strings"
	"testing"
)

// The package is complete: after dpkg -i of the built deb, `man
// cco-install` shows cco-install(8), each shell's completion is where that
// shell looks and completes through the installed binary, and the
// copyright file is there.
func TestPackageManPageAndCompletion(t *testing.T) {
	b := packages(t)[newVersion]
	m := boot(t)
	if err := m.Put(b.Deb, "/tmp/cco.deb", 0o644); err != nil {
		t.Fatal(err)
	}
	must(t, m, Root, "/", nil, "dpkg", "-i", "/tmp/cco.deb")
	for _, page := range [][]string{{"cco-install"}, {"8", "cco-install-status"}} {
		r := must(t, m, Root, "/", []string{"MANPAGER=cat", "MANWIDTH=100"}, append([]string{"man"}, page...)...)
		if !strings.Contains(r.Stdout, "provision a machine for cco") && !strings.Contains(r.Stdout, "check the installation") {
			t.Errorf("man %v does not show cco-install's page:\n%s", page, r.Stdout)
		}
	}
	if r := must(t, m, Root, "/", nil, "man", "-w", "cco-install"); strings.TrimSpace(r.Stdout) != "/usr/share/man/man8/cco-install.8" {
		t.Errorf("man -w cco-install: %q", r.Stdout)
	}
	// bash: bash-completion loads the script on demand; completing
	// "cco-install --upg" asks the installed binary and offers --upgrade.
	bash := must(t, m, Root, "/", nil, "bash", "-c", `. /usr/share/bash-completion/bash_completion
_completion_loader cco-install
complete -p cco-install
COMP_LINE="cco-install --upg"; COMP_POINT=${#COMP_LINE}; COMP_WORDS=(cco-install --upg); COMP_CWORD=1
__start_cco-install cco-install --upg cco-install
printf 'reply: %s\n' "${COMPREPLY[@]}"`)
	if !strings.Contains(bash.Stdout, "-F __start_cco-install cco-install") || !strings.Contains(bash.Stdout, "reply: --upgrade") {
		t.Errorf("bash completion:\n%s\n%s", bash.Stdout, bash.Stderr)
	}
	// zsh: compinit finds _cco-install on its fpath.
	zsh := must(t, m, Root, "/", nil, "zsh", "-c", `autoload -U compinit && compinit -u && print -r -- "comp: $_comps[cco-install]"`)
	if !strings.Contains(zsh.Stdout, "comp: _cco-install") {
		t.Errorf("zsh completion:\n%s\n%s", zsh.Stdout, zsh.Stderr)
	}
	// fish: its vendor completions directory, asked through the binary.
	fish := must(t, m, Root, "/", []string{"HOME=/root"}, "fish", "-c", `complete -C "cco-install --upg"`)
	if !strings.Contains(fish.Stdout, "--upgrade") {
		t.Errorf("fish completion:\n%s\n%s", fish.Stdout, fish.Stderr)
	}
	if r := must(t, m, Root, "/", nil, "cat", "/usr/share/doc/cco/copyright"); !strings.Contains(r.Stdout, "License: Apache-2.0") {
		t.Errorf("/usr/share/doc/cco/copyright:\n%s", r.Stdout)
	}
	if r := must(t, m, Root, "/", nil, "cco-install", "version", "--json"); !strings.Contains(r.Stdout, `"version": "`+newVersion+`"`) {
		t.Errorf("cco-install version --json:\n%s", r.Stdout)
	}
}
