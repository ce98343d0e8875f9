package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/provision"
)

// firstLoginDoc is where every agent's login is described.
const firstLoginDoc = "https://github.com/cco-dev/cco/blob/main/docs/how-to/first-login.md"

// nextSteps ends a first install on a terminal with what to do next: go to
// a project and run an installed agent, and how it logs in.
func nextSteps(w io.Writer, rc *provision.Receipt) {
	var installed []string
	for _, name := range agent.Names() {
		if _, ok := rc.Extra["vendor."+name]; ok {
			installed = append(installed, name)
		}
	}
	fmt.Fprintln(w)
	if len(installed) == 0 {
		fmt.Fprintf(w, "next: no agent is installed yet; install one with `sudo cco-install --upgrade %s` (or %s), then run it in a project\n", agent.Names()[0], agent.List(agent.Names()[1:], "or"))
		return
	}
	fmt.Fprintln(w, "next: cd into a project and run an agent; it starts in its jail:")
	fmt.Fprintln(w, "  cd ~/src/my-project")
	if len(installed) == 1 {
		fmt.Fprintf(w, "  %s\n", installed[0])
	} else {
		fmt.Fprintf(w, "  %s    (or %s)\n", installed[0], strings.Join(installed[1:], ", "))
	}
	fmt.Fprintln(w, "log in: each agent asks on its first start: open the URL it prints, sign in, and paste the code back if it asks.")
	var keys []string
	for _, name := range installed {
		if p, ok := agent.Lookup(name); ok && len(p.Credentials) > 0 {
			keys = append(keys, name+" "+p.Credentials[0])
		}
	}
	if len(keys) > 0 {
		fmt.Fprintf(w, "  Or export an API key before you start it: %s.\n", strings.Join(keys, ", "))
	}
	fmt.Fprintf(w, "  Every agent's login: %s\n", firstLoginDoc)
}
