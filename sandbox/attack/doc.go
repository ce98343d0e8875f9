// Package attack is the adversarial suite of the jail (docs/adr/0027): a
// hostile probe agent runs in the real jail, as root and as an unprivileged
// user, under both profiles, and tries each class of attack; the verdict is
// taken on the host after the session, by the host's git and shell and a
// second launch of the shadow. The package holds only tests.
package attack
