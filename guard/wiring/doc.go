// Package wiring installs the guard's scripts (Steps) and tells
// `cco-install status` what has drifted under them (Drift): a script edited
// or loosened, a policy file cco wrote that was removed or edited, a vendor
// install ahead of the shadow on PATH. Reading the policy files themselves
// (does the policy wire the guard) is package managed's, which writes them.
package wiring
